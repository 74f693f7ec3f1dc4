"""bubblewrap: one long-lived sandbox per worker slot.

Inside: Debian's python, read-only /usr, a fresh /proc and /dev, a small tmpfs /tmp as
the only writable place, no network (not even the host's loopback), no environment,
nothing of the checkout, /root or /home. As root we first drop to an unprivileged uid:
bwrap's user namespace alone would still let the inside read /etc/shadow and /root.
RLIMIT_NPROC is set by the server inside, never on bwrap (it makes bwrap's own forks
fail at random).
"""
from __future__ import annotations

import os
import shutil
import subprocess

from .base import SANDBOX_PYTHON, Channel, server_source, slot_uid, start_process

TMP_SIZE = 64 << 20


def bwrap_command(argv: list[str]) -> list[str]:
    return [
        shutil.which("bwrap") or "bwrap",
        "--unshare-all", "--unshare-user", "--disable-userns",
        "--die-with-parent", "--new-session", "--clearenv",
        "--ro-bind", "/usr", "/usr",
        "--symlink", "usr/lib", "/lib",
        "--symlink", "usr/lib64", "/lib64",
        "--symlink", "usr/bin", "/bin",
        "--symlink", "usr/sbin", "/sbin",
        "--proc", "/proc",
        "--dev", "/dev",
        "--size", str(TMP_SIZE), "--tmpfs", "/tmp",
        "--remount-ro", "/dev",  # else /dev/shm would be writable
        "--remount-ro", "/",
        "--chdir", "/tmp",
        *argv,
    ]


class BwrapBackend:
    name = "bwrap"

    @staticmethod
    def check() -> str | None:
        """None if bwrap can start a sandbox here, else why not."""
        if shutil.which("bwrap") is None:
            return "bwrap is not installed"
        if not os.path.exists(SANDBOX_PYTHON):
            return f"{SANDBOX_PYTHON} is missing"
        uid = slot_uid(63) if os.geteuid() == 0 else None
        drop = {} if uid is None else {"user": uid, "group": uid, "extra_groups": []}
        try:
            done = subprocess.run(
                bwrap_command([SANDBOX_PYTHON, "-I", "-S", "-c", "print('ok')"]),
                capture_output=True, timeout=20, cwd="/", **drop,
            )
        except (OSError, subprocess.SubprocessError) as error:
            return f"bwrap failed: {error}"
        if done.stdout.strip() != b"ok":
            return "bwrap failed: " + done.stderr.decode(errors="replace").strip()[:200]
        return None

    def start(self, slot: int, memory_mb: int) -> Channel:
        uid = slot_uid(slot) if os.geteuid() == 0 else None
        argv = [SANDBOX_PYTHON, "-I", "-S", "-c", server_source(), "/tmp", "ns"]
        return start_process(bwrap_command(argv), uid=uid)
