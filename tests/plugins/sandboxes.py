"""The grading sandboxes to test against: every confining sandbox in the registry
(colbench.grading.sandboxes.SANDBOXES), so a newly registered one runs each grading, attack
and official-format test with no change here.

`sandbox` is parametrized over them. A sandbox skips only where it cannot start here (its
check() says why); Docker runs on a private engine (plugins/docker_engine.py), which skips
only where that dockerd cannot start.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from colbench.grading.sandboxes import SANDBOXES, cgroups
from colbench.grading.sandboxes.base import process_state, slot_uid

BACKENDS = [choice.name for choice in SANDBOXES if choice.confines]
# A sandbox that needs a service of its own names the fixture that starts it (and decides
# whether a missing service skips or fails); any other skips only where its check() says no.
SERVICES = {"docker": "docker_engine"}


@pytest.fixture(scope="module", params=BACKENDS)
def sandbox(request) -> str:
    if request.param in SERVICES:
        request.getfixturevalue(SERVICES[request.param])
        return request.param
    why = SANDBOXES.get(request.param).factory.check()
    if why is not None:
        pytest.skip(f"{request.param} cannot start a sandbox here: {why}")
    return request.param


@pytest.fixture(scope="module")
def bwrap() -> str:
    """bwrap alone, for tests that grade but do not test the sandboxes: skipped where it cannot start."""
    why = SANDBOXES.get("bwrap").factory.check()
    if why is not None:
        pytest.skip(f"bwrap cannot start a sandbox here: {why}")
    return "bwrap"


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
