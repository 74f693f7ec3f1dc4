"""Several rollout workers on one store: claims, idempotent inserts, dead workers.

The multi-process tests run real `colbench rollout` processes (the scripted expert on
lite tasks, graded in bwrap) against the loopback PostgreSQL server.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from sqlmodel import col, select

from colbench.processes import worker_gone, worker_id
from colbench.rollout import _abandoned
from colbench.store import queries
from colbench.store.db import Database
from colbench.store.models import Trajectory, Turn
from colbench.families.builtin import ensure_lite_tasks

COLBENCH = [sys.executable, "-m", "colbench.cli.app"]


def slot_of(db: Database, n_tasks: int, samples: int = 1) -> queries.Slot:
    ensure_lite_tasks(db)
    with db.read() as session:
        ids = [t.id for t in queries.tasks_in(session, family="backend", split="lite-train")[:n_tasks]]
    slot = queries.Slot(policy="p", simulator="s", setting="x", task_ids=tuple(ids), samples_per_task=samples)
    with db.write() as session:
        queries.ensure_slots(session, slot)
    return slot


# ---------------------------------------------------------------- workers' identity


def test_a_worker_is_gone_once_its_process_is_a_zombie_or_its_pid_is_reused():
    assert worker_gone(worker_id()) is False
    child = subprocess.Popen(["sleep", "30"])
    host, _, _, tag = worker_id().split(":")
    from colbench.processes import start_time

    alive = f"{host}:{child.pid}:{start_time(child.pid)}:{tag}"
    assert worker_gone(alive) is False
    assert worker_gone(f"{host}:{child.pid}:1:{tag}") is True  # same pid, another start: a reused pid
    child.kill()
    deadline = time.time() + 10
    while worker_gone(alive) is not True and time.time() < deadline:  # not reaped yet: a zombie
        time.sleep(0.05)
    assert worker_gone(alive) is True
    child.wait()
    assert worker_gone(alive) is True
    assert worker_gone(f"elsewhere:{child.pid}:1:{tag}") is None  # another host: only heartbeats tell


def test_a_dead_workers_rows_are_claimed_at_once_a_live_ones_not(db):
    slot = slot_of(db, 4)
    child = subprocess.Popen(["sleep", "30"])
    from colbench.processes import start_time

    host = worker_id().split(":")[0]
    doomed = f"{host}:{child.pid}:{start_time(child.pid)}:aaaaaa"
    check = _abandoned(stale_after_s=3600)
    with db.write() as session:
        assert len(queries.claim(session, slot, doomed, 2, check)) == 2
    with db.write() as session:
        assert len(queries.claim(session, slot, worker_id(), 10, check)) == 2  # the other two only
    child.kill()
    child.wait()
    with db.write() as session:
        assert queries.claimable(session, slot, check) == 2
        taken = queries.claim(session, slot, worker_id(), 10, check)
    assert len(taken) == 2


# ---------------------------------------------------------------- PostgreSQL: claims


@pytest.mark.postgres
def test_a_claim_in_progress_locks_only_what_it_takes(postgres_url):
    """Two workers claim at the same moment: the second gets other rows, not none."""
    db = Database(postgres_url)
    slot = slot_of(db, 6)
    check = _abandoned(stale_after_s=3600)
    with db.write() as first:
        mine = queries.claim(first, slot, "first", 2, check)  # its transaction is still open
        with db.write() as second:
            theirs = queries.claim(second, slot, "second", 2, check)
    assert len(mine) == len(theirs) == 2 and not {t.id for t in mine} & {t.id for t in theirs}


@pytest.mark.postgres
def test_inserting_the_same_slots_at_once_is_not_an_error(postgres_url):
    """Both check, both insert: the one that commits second skips the rows it would duplicate."""
    import threading

    db = Database(postgres_url)
    slot = slot_of(db, 3, samples=0)
    bigger = slot_with(slot, 2)
    checked, errors = threading.Barrier(2), []

    def insert(which: queries.Slot, wait_s: float, hold_s: float) -> None:
        try:
            with db.write() as session:
                checked.wait()
                time.sleep(wait_s)
                queries.ensure_slots(session, which)
                time.sleep(hold_s)  # commit late: the other has checked, and its insert waits on these rows
        except Exception as exc:  # noqa: BLE001 - the test reports it
            errors.append(exc)

    threads = [
        threading.Thread(target=insert, args=args) for args in ((slot_with(slot, 1), 0.0, 1.0), (bigger, 0.2, 0.0))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    with db.read() as session:
        assert sorted((t.task_id, t.sample_index) for t in session.exec(select(Trajectory))) == sorted(
            (task, index) for task in slot.task_ids for index in range(2))


def slot_with(slot: queries.Slot, samples: int) -> queries.Slot:
    return queries.Slot(**{**slot.__dict__, "samples_per_task": samples})


# ---------------------------------------------------------------- PostgreSQL: 8 processes


def _workers(url: str, n: int, *extra: str) -> list[subprocess.Popen]:
    env = dict(os.environ, COLBENCH_DB=url, NO_COLOR="1")
    env.pop("COLBENCH_DEBUG", None)
    command = COLBENCH + ["rollout", "--engine", "scripted:expert", "--tasks", "backend-lite:train", "--sandbox",
                          "bwrap",
                          "--grade-workers", "1", "--concurrency", "2", "--json", *extra]
    return [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for _ in range(n)
    ]


def _pending(db: Database, setting_part: str) -> int:
    with db.read() as session:
        rows = session.exec(select(Trajectory).where(Trajectory.status == "pending")).all()
    return sum(1 for t in rows if setting_part in t.setting)


def _wait_all(db: Database, processes: list[subprocess.Popen], setting_part: str,
              skip: set[int] = frozenset()) -> list[dict]:
    """Each worker's JSON summary; fails if any exits while rows are pending."""
    outputs: dict[int, dict] = {}
    deadline = time.time() + 600
    while len(outputs) < len(processes) - len(skip) and time.time() < deadline:
        for i, process in enumerate(processes):
            if i in skip or i in outputs or process.poll() is None:
                continue
            pending = _pending(db, setting_part)
            out, err = process.communicate()
            assert process.returncode == 0 and "Traceback" not in err and "error" not in err.lower(), err
            assert pending == 0, f"worker {i} exited with {pending} rows pending"
            outputs[i] = json.loads(out)
        time.sleep(0.05)
    assert len(outputs) == len(processes) - len(skip), "workers did not finish"
    return list(outputs.values())


def _exactly_once(db: Database, tasks: int, samples: int, setting_part: str) -> None:
    with db.read() as session:
        rows = [t for t in session.exec(select(Trajectory)).all() if setting_part in t.setting]
        turns = session.exec(select(Turn)).all()
    assert sorted((t.task_id, t.sample_index) for t in rows) == sorted({(t.task_id, t.sample_index) for t in rows})
    assert len(rows) == tasks * samples and all(t.status == "done" and t.graded_seq for t in rows)
    per = {}
    for turn in turns:
        per.setdefault(turn.trajectory_id, []).append(turn.index)
    assert all(sorted(v) == list(range(len(v))) for t, v in per.items() if t in {r.id for r in rows})


@pytest.mark.postgres
def test_eight_workers_on_a_fresh_then_a_used_store_with_one_killed(postgres_url):
    db = Database(postgres_url)
    # A fresh store: all eight insert the tier's tasks and the slots at once.
    outputs = _wait_all(db, _workers(postgres_url, 8, "--limit", "30", "-k", "2"), "")
    assert sum(o["finished"] for o in outputs) == 60
    _exactly_once(db, 30, 2, "")

    # The same store, a new setting; one worker is killed -9 mid-run and not reaped (a zombie).
    processes = _workers(postgres_url, 8, "--limit", "30", "-k", "2", "--max-new-tokens", "900")
    deadline = time.time() + 300
    while time.time() < deadline:
        with db.read() as session:
            victim = next((t.worker for t in session.exec(select(Trajectory).where(Trajectory.status == "running"))
                           if t.setting == "max=900"), None)
        if victim:
            break
        time.sleep(0.05)
    assert victim, "no worker claimed anything"
    pid = int(victim.split(":")[1])
    index = next(i for i, p in enumerate(processes) if p.pid == pid)
    os.kill(pid, signal.SIGKILL)
    outputs = _wait_all(db, processes, "max=900", skip={index})
    processes[index].wait()
    _exactly_once(db, 30, 2, "max=900")
    assert sum(o["finished"] for o in outputs) >= 58  # the killed one may have finished a few


def test_importing_the_same_file_at_once_stores_it_once(postgres_url, tmp_path, monkeypatch):
    """Two imports of one file that both read the stored hashes before either commits: the second
    skips what the first stored, instead of failing on the unique content hash."""
    import threading

    from colbench.official import import_trajectories
    from conftest import write_jsonl
    from officialdata import backend_task, trajectory

    db = Database(postgres_url)
    path = write_jsonl(tmp_path / "offline.jsonl",
                       [trajectory(backend_task(i), turns=2, reward=1.0) for i in range(20)])
    import_trajectories(db, path, policy="earlier")  # its tasks are stored: nothing else makes the two imports queue
    both_read = threading.Barrier(2)
    read = queries.existing_trajectory_hashes

    def read_then_wait(session, hashes):
        found = read(session, hashes)
        both_read.wait(timeout=30)
        return found

    monkeypatch.setattr(queries, "existing_trajectory_hashes", read_then_wait)
    summaries, errors = [], []

    def load() -> None:
        try:
            summaries.append(import_trajectories(db, path))
        except Exception as exc:  # noqa: BLE001 - the test reports it
            errors.append(exc)

    threads = [threading.Thread(target=load) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert sorted(s.added for s in summaries) == [0, 20] and sorted(s.skipped for s in summaries) == [0, 20]
    with db.read() as session:
        stored = session.exec(select(Trajectory).where(Trajectory.policy == "import:offline")).all()
        turns = session.exec(select(Turn).where(col(Turn.trajectory_id).in_([t.id for t in stored]))).all()
    assert len(stored) == 20 and len(turns) == 20 * 4  # each trajectory and turn once
