"""The store on real databases: SQLite files and the loopback PostgreSQL server."""
from __future__ import annotations

import multiprocessing
import time
from datetime import datetime, timezone

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError
from sqlmodel import select

from colbench.official import import_tasks, import_trajectories
from colbench.store import queries
from colbench.store.db import Database, StoreError
from colbench.store.migrate import current_revision, head_revision, upgrade
from colbench.store.models import Lineage, RolloutRun, Task, Trajectory, TrainingRun, Turn
from conftest import write_jsonl
from officialdata import backend_task, trajectory


def test_fresh_database_is_migrated_to_head(db):
    assert current_revision(db) == head_revision()
    with db.read() as session:
        assert session.exec(select(Task)).all() == []


def test_sqlite_pragmas_for_many_processes(sqlite_url):
    db = Database(sqlite_url)
    with db.engine.connect() as connection:
        assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert connection.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 10_000


def test_foreign_keys_are_enforced(db):
    with pytest.raises(IntegrityError):
        with db.write() as session:
            session.add(Turn(trajectory_id=12345, index=0, role="user", content="orphan"))
    with db.read() as session:
        assert session.exec(select(Turn)).all() == []


def test_write_transaction_rolls_back_on_error(db, tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl", [backend_task(1)])
    import_tasks(db, path, family="backend", split="train")
    with pytest.raises(RuntimeError):
        with db.write() as session:
            session.add(Task(family="backend", split="test", source="x", problem_description="p", ground_truth="g",
                             content_hash="h"))
            session.flush()
            raise RuntimeError("boom")
    with db.read() as session:
        assert len(session.exec(select(Task)).all()) == 1


def test_newer_database_is_refused(db):
    with db.engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = 'f00dcafe'"))
    with pytest.raises(StoreError, match="newer than this colbench"):
        Database(db.url)


def test_upgrade_from_first_revision_keeps_data(db_url):
    """A database made at the first revision, with data in it, survives upgrading to head."""
    db = Database(db_url, migrate=False)
    assert upgrade(db, "0001") == "0001"
    with db.engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO task (id, family, split, source, problem_description, ground_truth, test_cases,"
                " content_hash, created_at) VALUES (1, 'backend', 'train', 'old', 'describe', 'def f(): return 1',"
                " '{\"test1\": \"f()\"}', 'hash-1', CURRENT_TIMESTAMP)"
            )
        )
        connection.execute(
            text(
                "INSERT INTO trajectory (id, task_id, policy, simulator, setting, sample_index, status, answer, reward,"
                " success, graded_seq, created_at) VALUES (7, 1, 'pol', 'sim', '', 0, 'done', 'def f(): return 1', 1.0,"
                " TRUE, 1, CURRENT_TIMESTAMP)"
            )
        )
        connection.execute(text(
            "INSERT INTO turn (trajectory_id, \"index\", role, content, prompt, logprob_sum, created_at) "
            "VALUES (7, 1, 'assistant', 'I WANT TO ANSWER: def f(): return 1', 'the prompt', -3.5, CURRENT_TIMESTAMP)"
        ))
    assert upgrade(db, "head") == head_revision()
    reopened = Database(db_url)
    with reopened.read() as session:
        task = session.get(Task, 1)
        assert task.test_cases == {"test1": "f()"} and task.content_hash == "hash-1"
        traj = session.get(Trajectory, 7)
        assert (traj.reward, traj.success, traj.answer) == (1.0, True, "def f(): return 1")
        assert traj.reward_metric == "tests"  # filled in by revision 0002 for old backend rewards
        (turn,) = queries.turns_of(session, 7)
        assert (turn.prompt, turn.logprob_sum) == ("the prompt", -3.5)
        run = session.get(RolloutRun, traj.rollout_id)  # revision 0006: every trajectory joins a rollout run
        assert (run.policy, run.simulator, run.setting, run.tasks, run.tags) == ("pol", "sim", "", "backend:train", [])


def test_migrations_build_exactly_the_tables_in_models(db):
    """Upgrading to head gives the schema models.py declares: no column, index, key or constraint differs."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext
    from sqlmodel import SQLModel

    with db.engine.connect() as connection:
        differences = compare_metadata(MigrationContext.configure(connection), SQLModel.metadata)
    assert differences == []


def _write_turns(url: str, trajectory_id: int, worker: int, count: int, queue) -> None:
    """One rollout process appending turns to its trajectory, as fast as it can, beside others."""
    db = Database(url)
    errors = []
    for i in range(count):
        try:
            with db.write() as session:
                # Read-then-write, the pattern that deadlocks under deferred transactions.
                last = session.exec(
                    select(Turn.index).where(Turn.trajectory_id == trajectory_id).order_by(Turn.index.desc())
                ).first()
                session.add(Turn(trajectory_id=trajectory_id, index=(last or 0) + 1, role="assistant",
                                 content=f"w{worker} {i}"))
                traj = session.get(Trajectory, trajectory_id)
                traj.worker, traj.heartbeat_at = f"w{worker}", datetime.now(timezone.utc)
        except Exception as exc:  # counted, not raised: the parent asserts on them
            errors.append(f"{type(exc).__name__}: {exc}")
    queue.put(errors)


def test_four_processes_write_turns_without_lock_errors(db):
    with db.write() as session:
        task = Task(family="backend", split="train", source="t", problem_description="p", ground_truth="g",
                    content_hash="c")
        session.add(task)
        session.flush()
        trajectories = [Trajectory(task_id=task.id, policy="p", simulator="s", sample_index=w) for w in range(4)]
        session.add_all(trajectories)
        session.flush()
        ids = [t.id for t in trajectories]
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    per_worker = 60
    workers = [context.Process(target=_write_turns, args=(db.url, ids[w], w, per_worker, queue)) for w in range(4)]
    for worker in workers:
        worker.start()
    errors = [e for _ in workers for e in queue.get(timeout=300)]
    for worker in workers:
        worker.join(timeout=60)
    assert errors == []
    with db.read() as session:
        for trajectory_id in ids:  # every write landed, none lost or doubled
            assert [t.index for t in queries.turns_of(session, trajectory_id)] == list(range(1, per_worker + 1))


def _open_at_once(url: str, barrier, queue) -> None:
    barrier.wait()
    try:
        Database(url)
        queue.put(None)
    except Exception as exc:  # counted, not raised: the parent asserts on them
        queue.put(f"{type(exc).__name__}: {exc}")


def test_processes_opening_a_new_sqlite_file_at_once_all_open_it(tmp_path):
    """`colbench launch` starts its processes together on what may be a new file: each one switches it to WAL, and
    SQLite answers all but one "database is locked" at once (their busy timeout does not apply: waiting could
    deadlock). Before the retry, 7 of these 200 openings failed (and 2 of 100 rounds of 2 processes)."""
    context = multiprocessing.get_context("fork")  # the imports done once: the processes reach the file together
    failures = []
    for round_ in range(25):
        queue, barrier = context.Queue(), context.Barrier(8)
        url = f"sqlite:///{tmp_path / f'new-{round_}.db'}"
        processes = [context.Process(target=_open_at_once, args=(url, barrier, queue)) for _ in range(8)]
        for process in processes:
            process.start()
        failures += [error for _ in processes if (error := queue.get(timeout=120))]
        for process in processes:
            process.join(timeout=60)
    assert failures == []


def test_incremental_read_returns_only_new_graded_trajectories(db, tmp_path):
    first = write_jsonl(tmp_path / "a.jsonl", [trajectory(backend_task(i)) for i in range(30)])
    import_trajectories(db, first)
    with db.read() as session:
        batch = queries.graded_since(session, None)
    assert len(batch) == 30
    watermark = max(t.graded_seq for t in batch)
    with db.write() as session:
        run = TrainingRun(kind="critic", base_model="m", data_watermark=watermark)
        session.add(run)
        session.flush()
        queries.record_lineage(session, run.id, [(t.id, None) for t in batch])
    second = write_jsonl(tmp_path / "b.jsonl", [trajectory(backend_task(100 + i), reward=0.5) for i in range(7)])
    import_trajectories(db, second)
    with db.read() as session:
        fresh = queries.graded_since(session, watermark)
        consumed = session.exec(select(Lineage)).all()
    assert len(fresh) == 7 and all(t.reward == 0.5 for t in fresh)
    assert len(consumed) == 30 and not {t.id for t in fresh} & {row.trajectory_id for row in consumed}


def test_incremental_read_uses_the_index(sqlite_url):
    db = Database(sqlite_url)
    with db.read() as session:
        compiled = select(Trajectory).where(Trajectory.graded_seq > 5).order_by(Trajectory.graded_seq)
        sql = str(compiled.compile(db.engine, compile_kwargs={"literal_binds": True}))
        plan = " ".join(str(row) for row in session.exec(text("EXPLAIN QUERY PLAN " + sql)))
    assert "USING INDEX" in plan and "graded_seq" in plan and "SCAN trajectory" not in plan.replace("USING INDEX", "")


def test_graded_seq_is_unique_across_imports(db, tmp_path):
    for batch in range(3):
        records = [trajectory(backend_task(10 * batch + i), turns=2) for i in range(5)]
        import_trajectories(db, write_jsonl(tmp_path / f"{batch}.jsonl", records))
    with db.read() as session:
        seqs = [t.graded_seq for t in session.exec(select(Trajectory))]
    assert sorted(seqs) == list(range(1, 16))


def test_store_timestamps_round_trip(db, tmp_path):
    import_tasks(db, write_jsonl(tmp_path / "t.jsonl", [backend_task(3)]), family="backend", split="test")
    with db.read() as session:
        (task,) = session.exec(select(Task)).all()
    assert task.created_at is not None and abs(time.time() - task.created_at.timestamp()) < 300
