"""What every sandbox backend shares: the server program and a byte channel to it.

A backend starts one long-lived fork-server (runner.py) per worker slot and hands back
a Channel: bytes in (jobs), bytes out (result lines), and a way to kill it all.
"""
from __future__ import annotations

from colbench.errors import ColbenchError

import os
import select
import subprocess
import tempfile
from functools import cache
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
SANDBOX_PYTHON = "/usr/bin/python3"  # Debian's: the pyenv/venv ones live under /root


class SandboxUnavailable(ColbenchError, RuntimeError):
    """No sandbox of the asked kind works on this machine."""


@cache
def server_source() -> str:
    """canonical.py then runner.py, run as one program by `python3 -I -S -c`."""
    return (HERE / "canonical.py").read_text() + "\n\n" + (HERE / "runner.py").read_text()


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

    def __init__(self, process: subprocess.Popen, stderr_file, on_close=None):
        self.process = process
        self._stderr = stderr_file
        self._on_close = on_close

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
        if self._on_close is not None:
            self._on_close()


def start_process(command: list[str], *, uid: int | None, env: dict | None = None, on_close=None) -> Channel:
    """Popen a server. As root, it becomes `uid` before exec (Popen does the setuid in C,
    after fork, so no preexec_fn runs in our threaded process)."""
    stderr_file = tempfile.TemporaryFile()
    drop = {} if uid is None else {"user": uid, "group": uid, "extra_groups": []}
    process = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr_file,
        cwd="/",
        env=env if env is not None else {"PATH": "/usr/bin:/bin"},
        start_new_session=True,
        close_fds=True,
        **drop,
    )
    return Channel(process, stderr_file, on_close)
