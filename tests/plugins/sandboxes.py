"""The grading sandboxes to test against: bwrap, and Docker on a private engine.

`sandbox` is parametrized over both, so each grading, attack and official-format test
runs on each. bwrap skips only where it cannot start a sandbox; Docker only where the
private dockerd cannot start (plugins/docker_engine.py says why).
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from colbench.grading.sandboxes import cgroups
from colbench.grading.sandboxes.base import process_state, slot_uid
from colbench.grading.sandboxes.bwrap import BwrapBackend

BACKENDS = ["bwrap", "docker"]


@pytest.fixture(scope="module", params=BACKENDS)
def sandbox(request) -> str:
    if request.param == "docker":
        request.getfixturevalue("docker_engine")
    else:
        why = BwrapBackend.check()
        if why is not None:
            pytest.skip(f"bwrap cannot start a sandbox here: {why}")
    return request.param


def sandbox_remains(slots: list[int]) -> dict:
    """What the sandboxes of these slots could have left on the host: processes under
    their uids, their cgroup leaves, grading containers; and System V IPC objects."""
    ours = {slot_uid(slot) for slot in slots}
    processes = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                uid = int((entry / "status").read_text().split("\nUid:")[1].split()[0])
            except (OSError, IndexError):
                continue
            if uid in ours and process_state(int(entry.name)) not in (None, "Z", "X"):  # zombies hold nothing
                processes.append(int(entry.name))
    # Each object by its key and id: the other columns (attach times, attach counts) move whenever
    # its owner (say the tests' PostgreSQL server) attaches, which is not ours to judge.
    ipc = {kind: [" ".join(line.split()[:2]) for line in Path(f"/proc/sysvipc/{kind}").read_text().splitlines()[1:]]
           for kind in ("shm", "msg", "sem")}
    return {
        "processes": processes,
        "cgroups": [str(leaf) for slot in slots for leaf in cgroups.ours(f"{os.getpid()}-{slot}-")],
        "ipc": ipc,
        "containers": _grading_containers(slots),
    }


def _grading_containers(slots: list[int]) -> list[str]:
    if not os.environ.get("DOCKER_HOST"):
        return []
    import docker

    client = docker.from_env(timeout=10)
    found = client.containers.list(all=True, filters={"label": "colbench.grading"})
    return [c.name for c in found if c.labels.get("colbench.grading") in {str(slot) for slot in slots}]


def shmem_kb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("Shmem:"):
            return int(line.split()[1])
    return 0
