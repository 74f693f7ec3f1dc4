"""A Docker engine with the grading image, for the Docker backend's tests.

Uses the engine $DOCKER_HOST points at when one answers there; otherwise starts a
private dockerd for the session (as root) with its socket, data and state in a short
temporary folder (a unix socket's path must stay under about 100 bytes), no iptables
and no bridge: the grading containers have no network anyway. The grading image is
built with the same code as `colbench sandbox image`.

Where dockerd is not installed the tests skip with the reason, except under CI
(CI=true), where they fail: CI installs it (scripts/setup.sh), so a missing one there
is a broken set-up. A dockerd that is installed but cannot start (no overlayfs, no
cgroups, not root) is a limit of the machine: they skip, with the end of its log.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from contextlib import closing
from dataclasses import dataclass

import pytest

START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0


@dataclass
class DockerEngine:
    host: str  # a DOCKER_HOST value
    image: object  # colbench.grading.sandboxes.image.ImageInfo of the grading image
    private: bool  # started by this session (and stopped at its end)
    start_s: float = 0.0  # how long the private daemon took to answer


def _answers(host: str) -> bool:
    import docker

    try:
        with closing(docker.DockerClient(base_url=host, timeout=2)) as client:
            return bool(client.ping())
    except Exception:
        return False


def _log_tail(path: str, lines: int = 5) -> str:
    try:
        with open(path, errors="replace") as handle:
            return " | ".join(line.strip() for line in handle.readlines()[-lines:])
    except OSError:
        return "(no log)"


class _PrivateDaemon:
    """One dockerd of our own, and everything it leaves behind, under one folder."""

    def __init__(self, binary: str):
        self.folder = tempfile.mkdtemp(prefix="cbd-", dir="/tmp")
        self.host = f"unix://{self.folder}/docker.sock"
        self.log = os.path.join(self.folder, "dockerd.log")
        command = [
            binary, "-H", self.host,
            "--data-root", f"{self.folder}/data", "--exec-root", f"{self.folder}/exec",
            "--pidfile", f"{self.folder}/docker.pid",
            "--iptables=false", "--bridge=none",
        ]
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            start_new_session=True)

    def wait_until_it_answers(self) -> str | None:
        """None once the engine answers, else why it never did."""
        give_up = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < give_up:
            if self.process.poll() is not None:
                return f"dockerd exited with {self.process.returncode}: {_log_tail(self.log)}"
            if _answers(self.host):
                return None
            time.sleep(0.1)
        return f"dockerd did not answer within {START_TIMEOUT_S:.0f}s: {_log_tail(self.log)}"

    def stop(self) -> None:
        self._remove_grading_containers()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        # dockerd's own containerd and shims normally leave with it; any that did not
        # are found by the folder in their command line, which only ours contain.
        for pid in self._processes_using_folder():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for mount in reversed(self._mounts_under_folder()):
            subprocess.run(["umount", "-l", mount], capture_output=True)
        shutil.rmtree(self.folder, ignore_errors=True)

    def _remove_grading_containers(self) -> None:
        import docker

        from colbench.grading.sandboxes.docker import CONTAINER_LABEL

        if self.process.poll() is not None:
            return
        try:
            with closing(docker.DockerClient(base_url=self.host, timeout=30)) as client:
                for container in client.containers.list(all=True, filters={"label": CONTAINER_LABEL}):
                    container.remove(force=True)
        except Exception:
            pass  # stopping the daemon takes them down anyway

    def _processes_using_folder(self) -> list[int]:
        found = []
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/cmdline", "rb") as handle:
                    if self.folder.encode() in handle.read():
                        found.append(int(name))
            except OSError:
                continue
        return found

    def _mounts_under_folder(self) -> list[str]:
        with open("/proc/self/mounts") as handle:
            points = [line.split()[1] for line in handle]
        return [point for point in points if point.startswith(self.folder + "/")]


def _unavailable(reason: str, *, fail_under_ci: bool) -> None:
    if fail_under_ci and os.environ.get("CI"):
        pytest.fail(f"a Docker engine is required under CI: {reason}")
    pytest.skip(f"Docker engine not available: {reason}")


def _build_grading_image(host: str):
    import docker

    from colbench.grading.sandboxes.image import build_image

    with closing(docker.DockerClient(base_url=host, timeout=120)) as client:
        return build_image(client)


@pytest.fixture(scope="session")
def docker_engine():
    """The session's engine (the one $DOCKER_HOST names, or a private one) with the
    grading image; $DOCKER_HOST names it for the rest of the session."""
    pytest.importorskip("docker")
    given = os.environ.get("DOCKER_HOST")
    if given and _answers(given):
        yield DockerEngine(given, _build_grading_image(given), private=False)
        return
    binary = shutil.which("dockerd") or next(
        (p for p in ("/usr/sbin/dockerd", "/usr/bin/dockerd") if os.path.exists(p)), None
    )
    if binary is None:
        _unavailable("dockerd is not installed (apt-get install docker.io, or run scripts/setup.sh)",
                     fail_under_ci=True)
    if os.geteuid() != 0:
        _unavailable("a private dockerd needs root, and $DOCKER_HOST names no engine that answers", fail_under_ci=False)
    started = time.monotonic()
    daemon = _PrivateDaemon(binary)
    try:
        problem = daemon.wait_until_it_answers()
        if problem:
            _unavailable(f"dockerd is installed but did not start: {problem}", fail_under_ci=False)
        start_s = time.monotonic() - started
        image = _build_grading_image(daemon.host)
        os.environ["DOCKER_HOST"] = daemon.host
        yield DockerEngine(daemon.host, image, private=True, start_s=start_s)
    finally:
        if os.environ.get("DOCKER_HOST") == daemon.host:
            if given is None:
                del os.environ["DOCKER_HOST"]
            else:
                os.environ["DOCKER_HOST"] = given
        daemon.stop()
