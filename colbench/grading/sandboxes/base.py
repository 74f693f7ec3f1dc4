"""What every sandbox backend shares: the server program and a byte channel to it.

A backend starts one long-lived fork-server (runner.py) per worker slot and hands back
a Channel: bytes in (jobs), bytes out (result lines), and a way to kill it all.
"""
from __future__ import annotations

from colbench.errors import ColbenchError
from colbench.processes import process_state, start_time

import json
import os
import select
import subprocess
import tempfile
import time
from functools import cache
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
SANDBOX_PYTHON = "/usr/bin/python3"  # Debian's: the pyenv/venv ones live under /root
# -I would be -E -s -P: the same, except that -E ignores PYTHONHASHSEED. Each backend
# instead hands the interpreter an environment holding only sandbox_env().
PYTHON_FLAGS = ("-s", "-S", "-P")
# The official grader runs the reference and the answer in one process, so under one
# hash seed: their sets and str-keyed orders agree. Every sandbox of one Grader starts
# under one fixed seed, so the same code gives the same order in the reference's
# sandbox and the answer's, on every run.
HASH_SEED = 0
# What /proc/<server>/exe may read: the interpreter itself, whatever its link is called.
PYTHON_PATHS = {os.path.realpath(SANDBOX_PYTHON), "/usr/bin/python3.11", "/usr/local/bin/python3.11"}


class SandboxUnavailable(ColbenchError, RuntimeError):
    """No sandbox of the asked kind works on this machine."""


@cache
def server_source() -> str:
    """canonical.py then runner.py, run as one program by `python3 -s -S -P -c`."""
    return (HERE / "canonical.py").read_text() + "\n\n" + (HERE / "runner.py").read_text()


def server_command(python: str, workdir: str, cleanup: str, seccomp: str = "required") -> list[str]:
    """The fork-server's command line (runner.serve's arguments)."""
    return [python, *PYTHON_FLAGS, "-c", server_source(), workdir, cleanup, seccomp]


def sandbox_env(hash_seed: int = HASH_SEED) -> dict[str, str]:
    """The whole environment of a sandbox's interpreter: nothing of the host's."""
    return {
        "PATH": "/usr/bin:/bin",
        "PYTHONHASHSEED": str(hash_seed),
        # numpy's BLAS and OpenMP would start a thread per core, each counted against
        # the child's RLIMIT_NPROC and address space; the official grader's are its own.
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


def slot_uid(slot: int) -> int:
    """An unprivileged uid of our own for each worker slot, when we run as root.

    Far above any real account, and different per grading process, so that kill(-1)
    and RLIMIT_NPROC inside one slot reach nothing else.
    """
    if not 0 <= slot < 64:
        raise ValueError("at most 64 sandbox slots")
    return 1_600_000_000 + (os.getpid() % 1_000_000) * 64 + slot


class Channel:
    """Pipes to a sandboxed server started with subprocess."""

    def __init__(self, process: subprocess.Popen, stderr_file, on_close=None, info_fd: int | None = None):
        self.process = process
        self._stderr = stderr_file
        self._on_close = on_close
        self._info_fd = info_fd
        self._server_pid: int | None = None

    def server_pid(self) -> int | None:
        """The host pid of the sandbox's process 1 (our server), where the backend says it."""
        if self._info_fd is not None:
            self._server_pid = _child_pid(self._info_fd)
            os.close(self._info_fd)
            self._info_fd = None
        return self._server_pid

    def send(self, data: bytes) -> None:
        view = memoryview(data)
        fd = self.process.stdin.fileno()
        while view:
            view = view[os.write(fd, view):]

    def receive(self, timeout: float) -> bytes:
        """Some bytes, b'' at end of file; TimeoutError if nothing came in time."""
        fd = self.process.stdout.fileno()
        ready, _, _ = select.select([fd], [], [], max(timeout, 0))
        if not ready:
            raise TimeoutError
        return os.read(fd, 1 << 16)

    def diagnostics(self) -> str:
        """The last of what the sandbox wrote on stderr, for error messages."""
        try:
            self._stderr.seek(0)
            text = self._stderr.read()[-2000:].decode("utf-8", "replace")
        except (OSError, ValueError):
            return ""
        return " ".join(text.split())[-300:]

    def close(self) -> None:
        try:
            self.process.kill()  # bwrap: --die-with-parent takes the whole sandbox down
        except ProcessLookupError:
            pass
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        for stream in (self.process.stdin, self.process.stdout, self._stderr):
            try:
                stream.close()
            except OSError:
                pass
        if self._info_fd is not None:
            os.close(self._info_fd)
            self._info_fd = None
        if self._server_pid is not None:
            _wait_for_exit(self._server_pid)  # it dies with bwrap; its parent, not us, reaps it
        if self._on_close is not None:
            self._on_close()


def _wait_for_exit(pid: int, wait_s: float = 5.0) -> None:
    give_up = time.monotonic() + wait_s
    while time.monotonic() < give_up and process_state(pid) not in (None, "Z", "X"):
        time.sleep(0.005)


def _child_pid(fd: int) -> int | None:
    """bwrap's --info-fd report: a JSON object with "child-pid", written once the sandbox runs."""
    data = b""
    while select.select([fd], [], [], 5.0)[0]:
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
        try:
            return int(json.loads(data)["child-pid"])
        except (ValueError, KeyError, TypeError):
            continue
    return None


def server_intact(pid: int, started: str | None) -> bool:
    """Is host process `pid` still our server: started when it was, traced by nobody, and
    running the sandbox's Python? A tripwire behind the seccomp filter and pid 1's
    immunity to its namespace's signals, which should make this never fire."""
    try:
        with open(f"/proc/{pid}/status") as status:
            tracer = next(line.split()[1] for line in status if line.startswith("TracerPid:"))
    except (OSError, IndexError, StopIteration):
        return False
    if started is None or start_time(pid) != started or tracer != "0":
        return False
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
    except PermissionError:
        return os.geteuid() != 0  # not root: our server is undumpable, so we may not look
    except OSError:
        return False
    return exe.removesuffix(" (deleted)") in PYTHON_PATHS


def start_process(
    command: list[str], *, uid: int | None, env: dict | None = None, on_close=None,
    info_fd: tuple[int, int] | None = None,
) -> Channel:
    """Popen a server. As root, it becomes `uid` before exec (Popen does the setuid in C,
    after fork, so no preexec_fn runs in our threaded process). info_fd: a pipe (read,
    write) whose write end the sandbox reports its process 1 on (bwrap --info-fd)."""
    stderr_file = tempfile.TemporaryFile()
    drop = {} if uid is None else {"user": uid, "group": uid, "extra_groups": []}
    try:
        process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr_file,
            cwd="/",
            env=env if env is not None else sandbox_env(),
            start_new_session=True,
            close_fds=True,
            pass_fds=(info_fd[1],) if info_fd else (),
            **drop,
        )
    except BaseException:
        if on_close is not None:
            on_close()
        raise
    finally:
        if info_fd:
            os.close(info_fd[1])
    return Channel(process, stderr_file, on_close, info_fd[0] if info_fd else None)
