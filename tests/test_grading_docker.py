"""The Docker backend against a real engine (tests/plugins/docker_engine.py starts one),
with the grading image built from this machine's Python, and `colbench sandbox`."""
from __future__ import annotations

import ast
import errno
import json
import os
import subprocess
import sys
import time
import uuid
from contextlib import closing

import pytest

from colbench.grading.grader import Grader, SandboxUnavailable
from colbench.grading.sandboxes import BwrapBackend, cgroups, resolve
from colbench.grading.sandboxes.docker import DockerBackend
from colbench.grading.sandboxes.image import ImageError, build_image, configured_image
from colbench.tasks.spec import TaskSpec

COLBENCH = [sys.executable, "-m", "colbench.cli.app"]
ADD = TaskSpec("backend", "add", "def add(a, b):\n    return a + b\n",
               {f"test{i}": f"add({i}, 1)" for i in range(1, 4)})


def colbench(*args: str, **env: str) -> subprocess.CompletedProcess:
    environment = dict(os.environ, COLUMNS="160", NO_COLOR="1", **env)
    environment.pop("COLBENCH_DEBUG", None)
    return subprocess.run(COLBENCH + list(args), capture_output=True, text=True, env=environment, timeout=300)


def one_line_error(result: subprocess.CompletedProcess) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode != 0 and len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


def absent_image() -> str:
    return f"colbench-grading:absent-{uuid.uuid4().hex[:8]}"


# ------------------------------------------------------------------ the image

def test_cli_builds_an_image_that_records_its_source(docker_engine):
    import docker

    tag = f"colbench-grading:cli-{uuid.uuid4().hex[:8]}"
    result = colbench("sandbox", "image", "--tag", tag, "--json")
    assert result.returncode == 0, result.stderr
    built = json.loads(result.stdout)
    try:
        debian_python = subprocess.run(["/usr/bin/python3", "-c", "import platform; print(platform.python_version())"],
                                       capture_output=True, text=True).stdout.strip()
        assert built["tag"] == tag and built["id"].startswith("sha256:")
        assert 10e6 < built["size"] < 200e6
        labels = built["labels"]
        assert labels["colbench.grading.source"] == "host-python"
        assert labels["colbench.grading.python"] == debian_python
        assert labels["colbench.grading.contents"] == "libraries:numpy,pandas,dateutil,pytz,six"
        assert {"colbench.grading.colbench", "colbench.grading.built"} <= labels.keys()
        with closing(docker.from_env()) as client:
            assert client.images.get(tag).id == built["id"]
            rebuilt = build_image(client, tag)
            assert rebuilt.id != built["id"]  # the build time differs
            with pytest.raises(docker.errors.ImageNotFound):
                client.images.get(built["id"])  # no untagged copy piles up
    finally:
        with closing(docker.from_env()) as client:
            client.images.remove(tag, force=True)


def test_the_image_needs_python3_seccomp(docker_engine, monkeypatch):
    import docker

    from colbench.grading.sandboxes import image

    monkeypatch.setattr(image, "SECCOMP_GLOB", "/nonexistent/seccomp*.so")
    with closing(docker.from_env()) as client, pytest.raises(ImageError, match="python3-seccomp is not installed"):
        build_image(client, tag=absent_image())


def test_the_image_needs_the_offered_libraries(docker_engine, monkeypatch):
    import docker

    from colbench.grading.sandboxes import image

    monkeypatch.setattr(image, "LIBRARY_PATH", "/nonexistent/dist-packages")
    with (
        closing(docker.from_env()) as client,
        pytest.raises(ImageError, match="apt-get install --no-install-recommends python3-numpy python3-pandas")
    ):
        build_image(client, tag=absent_image())


def test_a_tag_the_engine_refuses_is_one_line(docker_engine):
    line = one_line_error(colbench("sandbox", "image", "--tag", "Not A Tag"))
    assert "image Not A Tag" in line and "invalid reference format" in line


def test_building_without_an_engine_is_one_line():
    line = one_line_error(colbench("sandbox", "image", DOCKER_HOST="unix:///nonexistent/docker.sock"))
    assert "no Docker engine answers at unix:///nonexistent/docker.sock" in line


# ------------------------------------------------------------------ a missing image

def test_a_missing_image_is_a_clear_reason_and_never_pulled(docker_engine, monkeypatch, tmp_path):
    missing = absent_image()
    monkeypatch.setenv("COLBENCH_GRADING_IMAGE", missing)
    why = DockerBackend.check()
    assert why == f"the grading image {missing} is missing: run `colbench sandbox image --tag {missing}`"
    with pytest.raises(SandboxUnavailable,
                       match=f"--sandbox docker is unavailable: the grading image {missing} is missing"):
        Grader(sandbox="docker")
    with pytest.raises(SandboxUnavailable, match="colbench sandbox image"):
        DockerBackend().start(0, 256)  # no pull behind the check's back
    line = one_line_error(colbench("grade", "--sandbox", "docker", COLBENCH_DB=f"sqlite:///{tmp_path / 'c.db'}"))
    assert f"the grading image {missing} is missing: run `colbench sandbox image --tag {missing}`" in line
    if BwrapBackend.check() is None:
        assert resolve("auto").name == "bwrap"


def test_an_image_of_other_contents_is_refused_with_the_rebuild_command(docker_engine, monkeypatch):
    """An image built before the offered libraries (no contents label) would grade numpy
    answers otherwise than bwrap: the backend asks for a rebuild instead of using it."""
    import io
    import tarfile

    import docker

    tag = absent_image().replace("absent", "old")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.addfile(tarfile.TarInfo("empty"), io.BytesIO(b""))
    with closing(docker.from_env()) as client:
        client.api.import_image(src=buffer.getvalue(), repository=tag.split(":")[0], tag=tag.split(":")[1])
        try:
            monkeypatch.setenv("COLBENCH_GRADING_IMAGE", tag)
            assert DockerBackend.check() == (
                f"the grading image {tag} holds no offered libraries, not libraries:numpy,pandas,dateutil,pytz,six: "
                f"run `colbench sandbox image --tag {tag}` to rebuild it"
            )
            with pytest.raises(SandboxUnavailable, match="to rebuild it"):
                Grader(sandbox="docker")
        finally:
            client.images.remove(tag, force=True)


def test_the_default_image_names_the_plain_command():
    from colbench.grading.sandboxes.docker import missing_image_advice
    from colbench.grading.sandboxes.image import DEFAULT_IMAGE

    assert missing_image_advice(DEFAULT_IMAGE).endswith("run `colbench sandbox image`")


# ------------------------------------------------------------------ grading

def test_docker_grades_and_contains_a_loop(docker_engine):
    with Grader(sandbox="docker", workers=1, grading="strict") as grader:
        assert grader.backend == "docker"
        good, hang, wrong, after = grader.grade([
            (ADD, "def add(a, b):\n    return a + b"),
            (ADD, "def add(a, b):\n    while True:\n        pass"),
            (ADD, "def add(a, b):\n    return a - b"),
            (ADD, "import os\ndef add(a, b):\n    return a + b"),
        ])
    assert good.success and after.success
    assert not wrong.success and [t.passed for t in wrong.tests] == [False] * 3
    assert [t.error for t in hang.tests] == ["timeout"] * 3


def test_auto_prefers_docker_once_the_image_is_there(docker_engine):
    assert DockerBackend.check() is None
    assert resolve("auto").name == "docker"


def test_processes_of_one_sandbox_do_not_count_against_another(docker_engine):
    """RLIMIT_NPROC counts a uid's processes machine-wide: with one uid for every
    container, an answer holding a dozen processes would stop another from starting
    a thread, and the verdict would depend on what ran beside it."""
    crowd = TaskSpec("backend", "crowd", "def crowd(x):\n    return x\n", {"test1": "crowd(1)"})
    thread = TaskSpec("backend", "thread", "def thread(x):\n    return x\n", {"test1": "thread(2)"})
    crowding = (
        "import os, time\n"
        "def crowd(x):\n"
        "    for _ in range(12):\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(0.7)\n"
        "            os._exit(0)\n"
        "    time.sleep(0.7)\n"
        "    return x\n"
    )
    threading = (
        "import threading, time\n"
        "def thread(x):\n"
        "    time.sleep(0.3)\n"
        "    worker = threading.Thread(target=lambda: None)\n"
        "    worker.start()\n"
        "    worker.join()\n"
        "    return x\n"
    )
    with Grader(sandbox="docker", workers=2, grading="strict") as grader:
        crowded, threaded = grader.grade([(crowd, crowding), (thread, threading)])
    assert crowded.success, crowded.tests[0].error
    assert threaded.success, threaded.tests[0].error


def test_server_pid_is_the_containers_first_process(docker_engine):
    channel = DockerBackend().start(0, 256)
    try:
        # The host's view of the container's pid 1. Its command line reads empty until the runtime's init has
        # exec'd the server (a moment that a loaded machine stretches), so the test waits for it too.
        pid, command, give_up = None, b"", time.monotonic() + 30
        while not command and time.monotonic() < give_up:
            pid = channel.server_pid()
            if pid is not None:
                with open(f"/proc/{pid}/cmdline", "rb") as handle:
                    command = handle.read()
        assert pid and pid > 1
        assert command.split(b"\0")[:4] == [b"/usr/bin/python3", b"-s", b"-S", b"-P"]
    finally:
        channel.close()
    assert channel.server_pid() is None


# ------------------------------------------------------------------ hardening, seen from inside

PROBES = r'''
import os
import socket


def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return line.split()[1]


def write_error(path):
    try:
        open(path, "w").close()
    except OSError as error:
        return error.errno
    return 0


def interfaces():
    return sorted(line.split(":")[0].strip() for line in open("/proc/net/dev").readlines()[2:])


def connect():
    try:
        socket.create_connection(("1.1.1.1", 53), timeout=0.5)
    except OSError as error:
        return type(error).__name__
    return "connected"


def ids():
    return [os.getuid(), os.geteuid(), os.getgid(), os.getegid(), os.getgroups()]


def files_until_full():
    made = 0
    try:
        while made < 10000:
            open("flood%d" % made, "w").close()
            made += 1
    except OSError as error:
        return [made, error.errno]
    return [made, 0]


def cgroup(v1, v2):
    for path in ("/sys/fs/cgroup/" + v1, "/sys/fs/cgroup/" + v2):
        if os.path.exists(path):
            return open(path).read().split()
    return None


def tmp():
    info = os.stat("/tmp")
    return [info.st_uid == os.getuid(), info.st_gid == os.getgid()]


def pid_one():
    return [part.decode() for part in open("/proc/1/cmdline", "rb").read().split(b"\0")[:3]]


def probe(what, *args):
    return {
        "status": status, "write_error": write_error, "interfaces": interfaces, "connect": connect,
        "ids": ids, "tmp": tmp, "files_until_full": files_until_full, "cgroup": cgroup, "pid_one": pid_one,
        "exists": os.path.exists,
    }[what](*args)
'''

CALLS = {
    "root": "probe('write_error', '/probe')",
    "usr": "probe('write_error', '/usr/bin/probe')",
    "interfaces": "probe('interfaces')",
    "connect": "probe('connect')",
    "ids": "probe('ids')",
    "tmp": "probe('tmp')",
    "inodes": "probe('files_until_full')",
    "pids": "probe('cgroup', 'pids/pids.max', 'pids.max')",
    "memory": "probe('cgroup', 'memory/memory.limit_in_bytes', 'memory.max')",
    "swap": "probe('cgroup', 'memory/memory.memsw.limit_in_bytes', 'memory.swap.max')",
    "cpu_quota": "probe('cgroup', 'cpu/cpu.cfs_quota_us', 'cpu.max')",
    "cpu_period": "probe('cgroup', 'cpu/cpu.cfs_period_us', 'cpu.max')",
    "shm": "probe('exists', '/dev/shm')",
    "CapEff": "probe('status', 'CapEff')",
    "NoNewPrivs": "probe('status', 'NoNewPrivs')",
    "Seccomp": "probe('status', 'Seccomp')",
    "pid_one": "probe('pid_one')",
}
MEMORY_MB = 512


@pytest.fixture(scope="module")
def inside(docker_engine):
    """What each probe returned inside a grading container: {name in CALLS: value}."""
    task = TaskSpec("backend", "probe", "def probe(*args):\n    return 0\n",
                    {f"test{i}": call for i, call in enumerate(CALLS.values(), 1)})
    with Grader(sandbox="docker", workers=1, memory_mb=MEMORY_MB, grading="strict") as grader:
        (report,) = grader.grade([(task, PROBES)])
    found = {}
    for name, test in zip(CALLS, report.tests):
        assert test.actual is not None, f"{test.call}: {test.error}"
        found[name] = ast.literal_eval(test.actual)
    return found


def test_the_root_is_read_only(inside):
    assert inside["root"] == inside["usr"] == errno.EROFS


def test_no_network(inside):
    assert inside["interfaces"] == ["lo"]
    assert inside["connect"] == "OSError"


def test_runs_as_the_slots_own_unprivileged_uid(inside):
    from colbench.grading.sandboxes.base import slot_uid

    *ids, groups = inside["ids"]
    uid = slot_uid(0)  # the first answer slot, as under bwrap
    assert ids == [uid] * 4 and set(groups) <= {uid}  # Docker lists the primary group too


def test_tmp_belongs_to_the_sandbox_alone(inside):
    assert inside["tmp"] == [1, 1]  # owned by its uid: the server wipes it after each task


def test_tmp_has_an_inode_cap(inside):
    made, error = inside["inodes"]
    assert made < 4096 and error == errno.ENOSPC


def test_process_memory_and_cpu_caps(inside):
    from colbench.grading.sandboxes import docker as backend

    assert inside["pids"] == [str(backend.PIDS_LIMIT)]
    limit = (MEMORY_MB + backend.MEMORY_HEADROOM_MB) << 20
    assert inside["memory"] == [str(limit)]
    if inside["swap"] is not None:  # absent where the kernel does not account swap
        assert inside["swap"] in ([str(limit)], ["0"])  # v1: memory and swap together; v2: swap alone
    if len(inside["cpu_quota"]) == 2:  # v2: cpu.max holds both
        quota, period = inside["cpu_quota"]
    else:
        (quota,), (period,) = inside["cpu_quota"], inside["cpu_period"]
    assert int(quota) == int(period)  # one CPU


def test_no_shared_memory_mount(inside):
    assert inside["shm"] == 0  # False, as the canonical form writes booleans


def test_no_capabilities_no_new_privileges_and_seccomp(inside):
    assert int(inside["CapEff"], 16) == 0
    assert inside["NoNewPrivs"] == "1"
    assert inside["Seccomp"] == "2"


def test_our_server_is_pid_one(inside):
    assert inside["pid_one"] == ["/usr/bin/python3", "-s", "-S"]


# ------------------------------------------------------------------ colbench sandbox check

def test_sandbox_check_reports_each_backend(docker_engine):
    result = colbench("sandbox", "check", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert set(report["backends"]) == {"bwrap", "docker", "none"}
    assert report["backends"]["docker"] == {"usable": True, "why_not": None, "image": configured_image()}
    assert report["backends"]["none"]["usable"] and "plain subprocess" in report["backends"]["none"]["warning"]
    assert report["backends"]["bwrap"]["usable"] == (BwrapBackend.check() is None)
    if os.geteuid() == 0 and cgroups.available():
        assert f"a cgroup ({cgroups.available()}) caps memory" in report["backends"]["bwrap"]["confinement"]
    assert report["auto"] == "docker"

    missing = absent_image()
    report = json.loads(colbench("sandbox", "check", "--json", COLBENCH_GRADING_IMAGE=missing).stdout)
    assert not report["backends"]["docker"]["usable"]
    assert "colbench sandbox image" in report["backends"]["docker"]["why_not"]
    assert report["auto"] == ("bwrap" if report["backends"]["bwrap"]["usable"] else None)
