"""bubblewrap: one long-lived sandbox per worker slot.

Inside: Debian's python, read-only /usr, a fresh /proc and /dev, a small tmpfs /tmp as
the only writable place, no network (not even the host's loopback), no environment but
base.sandbox_env(), nothing of the checkout, /root, /home or /etc (but the symlinks by
which Debian's shared-library alternatives lead back into /usr). Our server is the
sandbox's process 1 (--as-pid-1): no process of the sandbox's uid but ours holds the
host's pipes, and pid 1 ignores every signal its namespace sends it.

As root we first drop to an unprivileged uid of the slot's own (bwrap's user namespace
alone would still let the inside read /etc/shadow and /root), and a small launcher puts
the sandbox in a cgroup of its own (cgroups.py) and gives it a tmpfs capped in inodes as
well as bytes, mounted in a private mount namespace so that nothing outlives it.
RLIMIT_NPROC is set by the server inside, never on bwrap (it makes bwrap's own forks
fail at random).
"""
from __future__ import annotations

import glob
import itertools
import os
import shutil
import subprocess

from . import cgroups
from .base import HASH_SEED, PYTHON_FLAGS, SANDBOX_PYTHON, Channel, sandbox_env, server_command, slot_uid, start_process

TMP_SIZE = 64 << 20
TMP_INODES = 4096
MEMORY_HEADROOM = 256 << 20  # the server and the tmpfs, above one child's address space
PRIVATE_TMP = "/mnt"  # mounted over in the launcher's own mount namespace only

# Runs as root: joins the cgroups, mounts the capped tmpfs, drops to the slot's uid, execs
# bwrap. (At the memory cap the kernel kills the largest process: a child, never the
# small server, since RLIMIT_AS keeps each child's share below the cap.)
LAUNCHER = r"""
for procs in $COLBENCH_CGROUP_PROCS; do echo $$ > "$procs"; done
exec unshare --mount --propagation private -- sh -c '
  mount -t tmpfs -o "$COLBENCH_TMP_OPTIONS" colbench-tmp "$COLBENCH_TMP" &&
  exec setpriv --reuid="$COLBENCH_UID" --regid="$COLBENCH_UID" --clear-groups -- "$@"' sh "$@"
"""


def library_alternatives() -> list[str]:
    """bwrap arguments recreating Debian's alternatives for shared libraries inside.

    numpy's libblas.so.3 is /usr/lib/x86_64-linux-gnu/libblas.so.3 -> /etc/alternatives/
    libblas.so.3-x86_64-linux-gnu -> the chosen implementation under /usr: without the
    middle link the loader finds nothing. Only links that lead back into /usr, and only
    the links: /etc itself stays out of the sandbox.
    """
    arguments = []
    for link in sorted(glob.glob("/etc/alternatives/lib*.so*")):
        target = os.readlink(link)
        if os.path.isabs(target) and os.path.realpath(link).startswith("/usr/"):
            arguments += ["--symlink", target, link]
    return arguments


def bwrap_command(
    argv: list[str], *, tmp_from: str | None = None, info_fd: int | None = None, hash_seed: int = HASH_SEED,
) -> list[str]:
    """tmp_from: a host directory to bind as /tmp (the launcher's capped tmpfs); else a
    tmpfs of bwrap's, capped in bytes only."""
    tmp = ["--bind", tmp_from, "/tmp"] if tmp_from else ["--size", str(TMP_SIZE), "--tmpfs", "/tmp"]
    info = ["--info-fd", str(info_fd)] if info_fd is not None else []
    env = [part for name, value in sandbox_env(hash_seed).items() for part in ("--setenv", name, value)]
    return [
        shutil.which("bwrap") or "bwrap",
        "--unshare-all", "--unshare-user", "--disable-userns",
        "--die-with-parent", "--new-session", "--clearenv", *env, "--as-pid-1", *info,
        "--ro-bind", "/usr", "/usr",
        "--symlink", "usr/lib", "/lib",
        "--symlink", "usr/lib64", "/lib64",
        "--symlink", "usr/bin", "/bin",
        "--symlink", "usr/sbin", "/sbin",
        *library_alternatives(),
        "--proc", "/proc",
        "--dev", "/dev",
        *tmp,
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
                bwrap_command([SANDBOX_PYTHON, *PYTHON_FLAGS, "-c", "print('ok')"]),
                capture_output=True, timeout=20, cwd="/", **drop,
            )
        except (OSError, subprocess.SubprocessError) as error:
            return f"bwrap failed: {error}"
        if done.stdout.strip() != b"ok":
            return "bwrap failed: " + done.stderr.decode(errors="replace").strip()[:200]
        return None

    @staticmethod
    def details() -> dict:
        return {"confinement": BwrapBackend.confinement()}

    @staticmethod
    def confinement() -> str:
        """What bounds a sandbox here beyond bwrap itself, in words."""
        if os.geteuid() != 0:
            return "not root: no cgroup (memory is capped per process), /tmp capped in bytes only"
        version = cgroups.available()
        caps = (
            f"a cgroup ({version}) caps memory, processes and CPU"
            if version
            else "no writable cgroup (memory is capped per process)"
        )
        return f"{caps}; /tmp capped at {TMP_SIZE >> 20} MiB and {TMP_INODES} inodes"

    def __init__(self):
        self.confined = os.geteuid() == 0 and all(shutil.which(tool) for tool in ("unshare", "setpriv", "mount"))
        self._starts = itertools.count(1)
        if self.confined:
            cgroups.remove_leftovers()

    def start(self, slot: int, memory_mb: int, hash_seed: int = HASH_SEED) -> Channel:
        argv = server_command(SANDBOX_PYTHON, "/tmp", "ns")
        info = os.pipe()
        if not self.confined:
            uid = slot_uid(slot) if os.geteuid() == 0 else None
            return start_process(bwrap_command(argv, info_fd=info[1], hash_seed=hash_seed), uid=uid, info_fd=info)

        uid = slot_uid(slot)
        start = next(self._starts)  # a fresh leaf per start: an old one may still be going away
        group = cgroups.create(f"{os.getpid()}-{slot}-{start}", cgroups.Limits((memory_mb << 20) + MEMORY_HEADROOM))
        env = {
            "PATH": "/usr/bin:/bin:/usr/sbin:/sbin",
            "COLBENCH_CGROUP_PROCS": " ".join(group.procs_files) if group else "",
            "COLBENCH_TMP": PRIVATE_TMP,
            "COLBENCH_TMP_OPTIONS": f"size={TMP_SIZE},nr_inodes={TMP_INODES},mode=0700,uid={uid},gid={uid}",
            "COLBENCH_UID": str(uid),
        }
        sandbox = bwrap_command(argv, tmp_from=PRIVATE_TMP, info_fd=info[1], hash_seed=hash_seed)
        return start_process(
            ["sh", "-c", LAUNCHER, "colbench-launcher", *sandbox], uid=None, env=env, info_fd=info,
            on_close=group.remove if group else None,
        )
