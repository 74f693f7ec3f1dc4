"""`--sandbox none`: the same fork-server as a plain subprocess. NOT a sandbox.

The children still get rlimits, their own session, stdout to /dev/null and the wall
deadline. As root the server also runs under a uid of its own in a fresh network
namespace (so the host's loopback is out of reach). But every world-readable file of
the host stays readable, so never use it on a machine holding anything secret.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

from .base import HASH_SEED, PYTHON_FLAGS, SANDBOX_PYTHON, Channel, sandbox_env, server_command, start_process, slot_uid

WARNING = (
    "\n" + "!" * 78 + "\n"
    "!!  colbench grading with --sandbox none: model-written code runs as a plain   !!\n"
    "!!  subprocess of this machine. It can read your files. Use bwrap or docker.   !!\n"
    + "!" * 78 + "\n"
)


class PlainBackend:
    name = "none"

    @staticmethod
    def check() -> str | None:
        return None

    @staticmethod
    def details() -> dict:
        return {"warning": "runs graded code as a plain subprocess: it can read this machine's files"}

    def start(self, slot: int, memory_mb: int, hash_seed: int = HASH_SEED) -> Channel:
        python = SANDBOX_PYTHON if os.path.exists(SANDBOX_PYTHON) else sys.executable
        workdir = tempfile.mkdtemp(prefix="colbench-grading-")
        as_root = os.geteuid() == 0 and shutil.which("unshare") and shutil.which("setpriv")
        if not as_root:
            # Same uid as us: kill(-1) would kill our own processes, so only the group.
            argv = server_command(python, workdir, "group", seccomp="optional")
            return start_process(
                argv, uid=None, env=sandbox_env(hash_seed), on_close=lambda: shutil.rmtree(workdir, True)
            )

        uid = slot_uid(slot)
        os.chown(workdir, uid, uid)
        os.chmod(workdir, 0o700)
        drop = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]

        def forget() -> None:
            _kill_uid(uid)
            shutil.rmtree(workdir, ignore_errors=True)

        argv = server_command(python, workdir, "uid", seccomp="optional")
        return start_process(["unshare", "--net", "--", *drop, *argv], uid=None, env=sandbox_env(hash_seed),
                             on_close=forget)


def _kill_uid(uid: int) -> None:
    """Kill every process left under the slot's uid (the server may be dead already)."""
    subprocess.run(
        ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--",
         SANDBOX_PYTHON, *PYTHON_FLAGS, "-c", "import os; os.kill(-1, 9)"],
        capture_output=True, timeout=10, env=sandbox_env(),
    )
