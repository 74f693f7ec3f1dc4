"""Docker: one container per worker slot, running the same fork-server.

The image is built here from the host's Python (`colbench sandbox image`, see image.py)
and never pulled: the machines colbench grades on reach no registry, and an image we
did not build is not one we should trust to run graded code. The `docker` SDK is
imported only when this backend is asked for.

Each container: no network, a read-only root, a small /tmp with a cap on its inodes
too (a flood of empty files is not bounded by the size cap), caps on processes,
memory (no swap) and CPU, its own IPC namespace with no /dev/shm, a uid of its own with
no capabilities and no way to gain privileges, and Docker's default seccomp profile.
Our server is pid 1 (no init), so its own clean-up reaches every process left behind.

The uid is the slot's (base.slot_uid), as under bwrap, not `nobody`: RLIMIT_NPROC counts
a uid's processes across the whole machine, so with one uid for all containers an
answer holding a dozen processes would stop the answer beside it from starting a thread.
"""
from __future__ import annotations

import os
import select
import struct

from .base import HASH_SEED, SANDBOX_PYTHON, SandboxUnavailable, sandbox_env, server_command, slot_uid
from .image import CONTENTS, CONTENTS_LABEL, DEFAULT_IMAGE, configured_image

PING_TIMEOUT_S = 2.0
CONTAINER_LABEL = "colbench.grading"  # on every container we start (its slot), to find leftovers
# /tmp is the server's work dir, which it wipes (and chmods) after each task, so the
# sandbox's uid owns it. Its mode is the image's /tmp, which Docker copies up.
TMP_OPTIONS = "size=64m,nr_inodes=4096,uid={uid},gid={uid}"
PIDS_LIMIT = 64
ONE_CPU = 1_000_000_000  # in units of 1e-9 CPUs
MEMORY_HEADROOM_MB = 256  # the server itself, beside one child at its memory limit


def client(timeout: float = 30.0):
    import docker  # lazy: the SDK is only needed when this backend is used

    return docker.from_env(timeout=timeout)


def connect(timeout: float = 30.0):
    """A client of an engine that answers, or SandboxUnavailable saying where none did."""
    where = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    try:
        engine = client(timeout)
        engine.ping()
    except ImportError:
        raise SandboxUnavailable("the docker SDK is not installed (pip install 'docker>=7')") from None
    except Exception as error:  # the SDK raises several kinds for "no engine"
        raise SandboxUnavailable(
            f"no Docker engine answers at {where} ({type(error).__name__}): start dockerd or point DOCKER_HOST at one"
        ) from None
    return engine


def _build_command(image: str) -> str:
    return "colbench sandbox image" if image == DEFAULT_IMAGE else f"colbench sandbox image --tag {image}"


def missing_image_advice(image: str) -> str:
    return f"the grading image {image} is missing: run `{_build_command(image)}`"


def outdated_image_advice(image: str, contents: str | None) -> str:
    return (
        f"the grading image {image} holds {contents or 'no offered libraries'}, not {CONTENTS}: "
        f"run `{_build_command(image)}` to rebuild it"
    )


class DockerChannel:
    """The container's stdin and stdout over the attach socket.

    Without a tty, Docker frames its output: 8 bytes (stream, 0, 0, 0, length) then
    the payload. We unwrap stdout frames and ignore anything else.
    """

    def __init__(self, container, socket):
        self.container = container
        self._raw = getattr(socket, "_sock", socket)
        self._socket = socket
        self._frames = b""

    def send(self, data: bytes) -> None:
        self._raw.sendall(data)

    def receive(self, timeout: float) -> bytes:
        while True:
            payload = self._unframe()
            if payload:
                return payload
            ready, _, _ = select.select([self._raw], [], [], max(timeout, 0))
            if not ready:
                raise TimeoutError
            chunk = self._raw.recv(1 << 16)
            if not chunk:
                return b""
            self._frames += chunk

    def _unframe(self) -> bytes:
        out = b""
        while len(self._frames) >= 8:
            stream, length = self._frames[0], struct.unpack(">I", self._frames[4:8])[0]
            if len(self._frames) < 8 + length:
                break
            if stream == 1:
                out += self._frames[8 : 8 + length]
            self._frames = self._frames[8 + length :]
        return out

    def server_pid(self) -> int | None:
        """The host's pid of the container's process 1 (our server), None once it is gone."""
        try:
            self.container.reload()
        except Exception:  # removed, or the engine went away
            return None
        state = self.container.attrs.get("State") or {}
        if not state.get("Running"):
            return None
        return state.get("Pid") or None

    def diagnostics(self) -> str:
        try:
            return self.container.logs(stdout=False, stderr=True)[-300:].decode("utf-8", "replace")
        except Exception:
            return ""

    def close(self) -> None:
        try:
            self._socket.close()
        except Exception:
            pass
        try:
            self.container.remove(force=True)
        except Exception:
            pass


class DockerBackend:
    name = "docker"

    @staticmethod
    def details() -> dict:
        return {"image": configured_image()}

    @staticmethod
    def check() -> str | None:
        """None if a Docker engine answers quickly and holds the grading image, else why not."""
        try:
            engine = connect(timeout=PING_TIMEOUT_S)
        except SandboxUnavailable as error:
            return str(error)
        import docker

        image = configured_image()
        try:
            labels = engine.images.get(image).labels or {}
        except docker.errors.ImageNotFound:
            return missing_image_advice(image)
        except Exception as error:  # API errors, or the transport's own (timeouts)
            return f"the Docker engine cannot look up {image} ({type(error).__name__})"
        finally:
            engine.close()
        if labels.get(CONTENTS_LABEL) != CONTENTS:
            return outdated_image_advice(image, labels.get(CONTENTS_LABEL))  # it would grade otherwise than bwrap
        return None

    def __init__(self):
        self._docker = None

    def start(self, slot: int, memory_mb: int, hash_seed: int = HASH_SEED) -> DockerChannel:
        import docker

        if self._docker is None:
            self._docker = client()
        memory = f"{memory_mb + MEMORY_HEADROOM_MB}m"
        uid = slot_uid(slot)
        image = configured_image()
        try:
            container = self._docker.containers.create(
                image,
                command=server_command(SANDBOX_PYTHON, "/tmp", "ns"),
                environment=sandbox_env(hash_seed),  # Docker adds only HOSTNAME and HOME
                stdin_open=True,
                network_mode="none",
                read_only=True,
                tmpfs={"/tmp": TMP_OPTIONS.format(uid=uid)},
                pids_limit=PIDS_LIMIT,
                mem_limit=memory,
                memswap_limit=memory,  # equal: no swap
                nano_cpus=ONE_CPU,
                ipc_mode="none",  # a private IPC namespace, and no /dev/shm mounted at all
                user=f"{uid}:{uid}",
                cap_drop=["ALL"],
                security_opt=["no-new-privileges"],
                init=False,
                hostname="grading",
                working_dir="/tmp",
                # Every result line also lands in the container's log: keep that small.
                log_config={"type": "json-file", "config": {"max-size": "1m", "max-file": "1"}},
                labels={CONTAINER_LABEL: str(slot)},
            )
        except docker.errors.ImageNotFound:
            raise SandboxUnavailable(missing_image_advice(image)) from None
        socket = container.attach_socket(params={"stdin": 1, "stdout": 1, "stream": 1})
        container.start()
        return DockerChannel(container, socket)
