"""A cgroup per sandbox: memory, process and CPU caps that the kernel counts for the host.

RLIMIT_AS bounds one process's address space, but not System V shared memory once
detached, tmpfs pages, or the kernel memory (inodes, dentries) a file flood costs. A
cgroup's memory cap counts all of these. It needs root: without it, or where no cgroup
hierarchy is writable, sandboxes run without one (the seccomp filter, the tmpfs caps and
the server's per-job IPC check still hold).

cgroup v2 where the unified hierarchy offers the controllers; else the v1 hierarchies
(the machines this was written on mount v1 memory, pids and cpu).
"""
from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
GROUP = "colbench"  # our subtree in each hierarchy; one leaf per sandbox: <grading pid>-<slot>
CPU_PERIOD_US = 100_000


@dataclass(frozen=True)
class Limits:
    memory_bytes: int
    pids: int = 64
    cpus: float = 1.0


class Cgroup:
    """One sandbox's leaf in each hierarchy. The sandbox's launcher writes its own pid
    into every `procs_files` entry before it execs, so all it starts is inside."""

    def __init__(self, leaves: list[Path]):
        self.leaves = leaves

    @property
    def procs_files(self) -> list[str]:
        return [str(leaf / "cgroup.procs") for leaf in self.leaves]

    def pids(self) -> set[int]:
        found = set()
        for leaf in self.leaves:
            try:
                found.update(int(pid) for pid in (leaf / "cgroup.procs").read_text().split())
            except OSError:
                pass
        return found

    def remove(self, wait_s: float = 5.0) -> bool:
        """Kill what is left inside and delete the leaves. False if something stayed."""
        give_up = time.monotonic() + wait_s
        while True:
            left = self.pids()
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            if not left or time.monotonic() > give_up:
                break
            time.sleep(0.01)
        removed = True
        for leaf in self.leaves:
            try:
                leaf.rmdir()
            except FileNotFoundError:
                pass
            except OSError:
                removed = False
        return removed


def _v2_ready() -> bool:
    try:
        offered = (ROOT / "cgroup.controllers").read_text().split()
    except OSError:
        return False
    return {"memory", "pids", "cpu"} <= set(offered)


def _v2_settings(limits: Limits) -> dict[str, str]:
    return {
        "memory.max": str(limits.memory_bytes),
        "memory.swap.max": "0",
        "pids.max": str(limits.pids),
        "cpu.max": f"{int(limits.cpus * CPU_PERIOD_US)} {CPU_PERIOD_US}",
    }


def _v1_settings(limits: Limits) -> dict[str, dict[str, str]]:
    return {  # per hierarchy, in the order the kernel accepts them (memsw >= memory)
        "memory": {"memory.limit_in_bytes": str(limits.memory_bytes),
                   "memory.memsw.limit_in_bytes": str(limits.memory_bytes)},
        "pids": {"pids.max": str(limits.pids)},
        "cpu": {"cpu.cfs_period_us": str(CPU_PERIOD_US), "cpu.cfs_quota_us": str(int(limits.cpus * CPU_PERIOD_US))},
    }


V1_HIERARCHIES = ("memory", "pids", "cpu")


def available() -> str | None:
    """"v2" or "v1": the cgroup version sandboxes get here; None where they get none."""
    if os.geteuid() != 0:
        return None
    if _v2_ready():
        return "v2"
    if all(os.access(ROOT / hierarchy, os.W_OK) for hierarchy in V1_HIERARCHIES):
        return "v1"
    return None


def create(name: str, limits: Limits) -> Cgroup | None:
    """A fresh leaf `name` with these limits, or None where cgroups cannot be had."""
    version = available()
    if version is None:
        return None
    created: list[Path] = []
    try:
        if version == "v2":
            parent = ROOT / GROUP
            parent.mkdir(exist_ok=True)
            for level in (ROOT, parent):  # let the controllers reach our leaves
                (level / "cgroup.subtree_control").write_text("+memory +pids +cpu")
            plan = {parent / name: _v2_settings(limits)}
        else:
            plan = {ROOT / hierarchy / GROUP / name: files for hierarchy, files in _v1_settings(limits).items()}
        for leaf, files in plan.items():
            leaf.parent.mkdir(exist_ok=True)
            leaf.mkdir()
            created.append(leaf)
            for file, value in files.items():
                setting = leaf / file
                if setting.exists():  # memsw exists only where swap is accounted
                    setting.write_text(value)
    except OSError:
        Cgroup(created).remove()
        return None
    return Cgroup(created)


def _leaves():
    for parent in [ROOT / GROUP, *(ROOT / hierarchy / GROUP for hierarchy in V1_HIERARCHIES)]:
        try:
            yield from (leaf for leaf in parent.iterdir() if leaf.is_dir())
        except OSError:
            continue


def leftovers() -> list[Path]:
    """Leaves of ours whose grading process is gone (it was killed before cleaning up)."""
    return [leaf for leaf in _leaves() if not Path(f"/proc/{leaf.name.split('-', 1)[0]}").exists()]


def remove_leftovers() -> None:
    Cgroup(leftovers()).remove(wait_s=1.0)


def ours(prefix: str) -> list[Path]:
    """Leaves whose name starts with `prefix` (e.g. this process's "<pid>-")."""
    return [leaf for leaf in _leaves() if leaf.name.startswith(prefix)]
