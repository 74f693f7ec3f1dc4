"""Every read and write of the store: the only module that speaks SQL.

Recipes, the rollout and the commands reach the store through these functions, so
each query exists once and its indexes are chosen here. Each takes the session of a
``Database.read()`` or ``Database.write()`` block, so the caller decides what one
transaction holds.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable, Sequence

from sqlalchemy import case, delete, exists, func, insert, or_, true, update
from sqlmodel import Session, col, select

from colbench.store.models import (
    Checkpoint,
    CriticScore,
    Evaluation,
    Lineage,
    RolloutRun,
    Screenshot,
    SweetCandidate,
    SweetPair,
    Task,
    TestResult,
    TrainingRun,
    TrainingStep,
    Trajectory,
    Turn,
    utcnow,
)

# SQLite allows 32,766 bound parameters per statement; stay well under it.
_ROWS_PER_STATEMENT = 500


# ---------------------------------------------------------------- tasks


def existing_task_ids(session: Session, hashes: Iterable[str]) -> dict[str, int]:
    """content_hash → id for those of `hashes` already stored."""
    found: dict[str, int] = {}
    hashes = list(set(hashes))
    for start in range(0, len(hashes), _ROWS_PER_STATEMENT):
        chunk = hashes[start : start + _ROWS_PER_STATEMENT]
        rows = session.exec(select(Task.content_hash, Task.id).where(col(Task.content_hash).in_(chunk)))
        found.update({h: i for h, i in rows})
    return found


def insert_new(session: Session, table, rows: Sequence[dict]) -> None:
    """Insert rows, skipping any that a unique constraint says are stored already.

    Several workers may insert the same rows at once (the built-in tasks on a fresh
    store, a rollout's pending slots): checking first and inserting after races on
    PostgreSQL, whose transactions do not queue like SQLite's BEGIN IMMEDIATE ones.
    """
    if not rows:
        return
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as dialect_insert
    elif dialect == "sqlite":
        from sqlalchemy.dialects.sqlite import insert as dialect_insert
    else:
        raise NotImplementedError(f"colbench stores run on SQLite or PostgreSQL, not {dialect}")
    statement = dialect_insert(table).on_conflict_do_nothing()
    for start in range(0, len(rows), _ROWS_PER_STATEMENT):
        session.connection().execute(statement, list(rows[start : start + _ROWS_PER_STATEMENT]))


def add_tasks(session: Session, tasks: Sequence[dict]) -> tuple[dict[str, int], int]:
    """Insert task rows (column dicts) not stored yet. Returns (content_hash → id for all, number added)."""
    ids = existing_task_ids(session, (t["content_hash"] for t in tasks))
    new, seen = [], set(ids)
    for task in tasks:
        if task["content_hash"] not in seen:
            seen.add(task["content_hash"])
            new.append(task)
    insert_new(session, Task.__table__, new)
    ids.update(existing_task_ids(session, (t["content_hash"] for t in new)))  # no RETURNING: SQLite runs it row by row
    return ids, len(new)


def move_tasks(session: Session, content_hashes: Sequence[str], split: str) -> int:
    """Put the stored tasks with these content hashes in ``split``; returns how many moved."""
    moved = 0
    for chunk in _chunks(list(content_hashes)):
        statement = update(Task).where(col(Task.content_hash).in_(chunk), Task.split != split).values(split=split)
        result = session.connection().execute(statement)
        moved += result.rowcount or 0
    return moved


def tasks_by_id(session: Session, ids: Iterable[int]) -> dict[int, Task]:
    found: dict[int, Task] = {}
    for chunk in _chunks(sorted(set(ids))):
        found.update({t.id: t for t in session.exec(select(Task).where(col(Task.id).in_(chunk)))})
    return found


def tasks_in(session: Session, family: str | None = None, split: str | None = None) -> list[Task]:
    query = select(Task).order_by(Task.id)
    if family:
        query = query.where(Task.family == family)
    if split:
        query = query.where(Task.split == split)
    return list(session.exec(query))


# ---------------------------------------------------------------- trajectories


def next_graded_seq(session: Session) -> int:
    """The next free graded_seq number (later ones follow it). Call inside a write transaction."""
    current = session.exec(select(func.max(Trajectory.graded_seq))).one()
    return (current or 0) + 1


def bulk_insert_trajectories(session: Session, trajectories: list[dict], turns: list[list[tuple]]) -> list[int]:
    """Insert imported trajectories and their turns with a few large statements.

    `trajectories[i]` is a column dict with a unique content_hash; `turns[i]` holds that
    trajectory's turns as tuples in TURN_IMPORT_COLUMNS order. Returns the ids of the
    trajectories this call created, in order: on PostgreSQL another process importing
    the same file at the same moment may have stored some first, and those are skipped
    (SQLite's BEGIN IMMEDIATE already serialises imports, so there it is all of them).
    """
    # Core executemany, not the ORM, and no RETURNING on SQLite (which runs it row by row):
    # the ids are read back afterwards through the unique content_hash.
    connection = session.connection()
    if connection.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        statement = pg_insert(Trajectory.__table__).on_conflict_do_nothing(index_elements=["content_hash"]).returning(
            Trajectory.__table__.c.content_hash)
        created: set[str] = set()
        for start in range(0, len(trajectories), _ROWS_PER_STATEMENT):
            created.update(connection.execute(statement, trajectories[start : start + _ROWS_PER_STATEMENT]).scalars())
        kept = [k for k, t in enumerate(trajectories) if t["content_hash"] in created]
        trajectories, turns = [trajectories[k] for k in kept], [turns[k] for k in kept]
    else:
        for start in range(0, len(trajectories), _ROWS_PER_STATEMENT):
            connection.execute(insert(Trajectory.__table__), trajectories[start : start + _ROWS_PER_STATEMENT])
    hashes = [t["content_hash"] for t in trajectories]
    by_hash: dict[str, int] = {}
    for start in range(0, len(hashes), _ROWS_PER_STATEMENT):
        chunk = hashes[start : start + _ROWS_PER_STATEMENT]
        by_hash.update(session.exec(select(Trajectory.content_hash, Trajectory.id).where(col(Trajectory.content_hash).in_(chunk))).all())
    ids = [by_hash[h] for h in hashes]
    # Turns are the bulk of an import (hundreds of thousands of rows): hand them to the
    # driver's executemany as tuples, skipping SQLAlchemy's per-row parameter processing.
    marker = "?" if connection.dialect.paramstyle == "qmark" else "%s"
    columns = ", ".join(_quoted(connection, n) for n in ("trajectory_id",) + TURN_IMPORT_COLUMNS)
    statement = f"INSERT INTO turn ({columns}) VALUES ({', '.join([marker] * (len(TURN_IMPORT_COLUMNS) + 1))})"
    rows = [(trajectory_id, *turn) for trajectory_id, its_turns in zip(ids, turns) for turn in its_turns]
    for start in range(0, len(rows), _ROWS_PER_STATEMENT * 4):
        connection.exec_driver_sql(statement, rows[start : start + _ROWS_PER_STATEMENT * 4])
    return ids


TURN_IMPORT_COLUMNS = ("index", "role", "content", "raw", "prompt", "prompt_shared")


def _quoted(connection, name: str) -> str:
    return connection.dialect.identifier_preparer.quote(name)


def existing_trajectory_hashes(session: Session, hashes: Iterable[str]) -> set[str]:
    found: set[str] = set()
    hashes = list(set(hashes))
    for start in range(0, len(hashes), _ROWS_PER_STATEMENT):
        chunk = hashes[start : start + _ROWS_PER_STATEMENT]
        found.update(session.exec(select(Trajectory.content_hash).where(col(Trajectory.content_hash).in_(chunk))))
    return found


def sample_counts(session: Session, policy: str, task_ids: Iterable[int]) -> dict[int, int]:
    """How many trajectories of `policy` each task already has (the next sample index)."""
    counts: dict[int, int] = {}
    task_ids = list(set(task_ids))
    for start in range(0, len(task_ids), _ROWS_PER_STATEMENT):
        chunk = task_ids[start : start + _ROWS_PER_STATEMENT]
        rows = session.exec(
            select(Trajectory.task_id, func.count())
            .where(Trajectory.policy == policy, col(Trajectory.task_id).in_(chunk))
            .group_by(Trajectory.task_id)
        )
        counts.update({task_id: n for task_id, n in rows})
    return counts


@dataclass
class TrajectoryFilter:
    task_id: int | None = None
    policy: str | None = None
    status: str | None = None
    family: str | None = None
    split: str | None = None
    min_reward: float | None = None
    max_reward: float | None = None
    rollout_id: int | None = None
    limit: int | None = 50
    offset: int = 0  # skip this many of the newest first (a page of the viewer)


def find_trajectories(session: Session, flt: TrajectoryFilter) -> list[tuple[Trajectory, Task, int]]:
    """Trajectories matching the filter, newest first, with their task and agent-turn count."""
    agent_turns = (
        select(func.count())
        .where(Turn.trajectory_id == Trajectory.id, Turn.role == "assistant")
        .correlate(Trajectory)
        .scalar_subquery()
    )
    query = (
        select(Trajectory, Task, agent_turns)
        .join(Task, Task.id == Trajectory.task_id)
        .order_by(col(Trajectory.id).desc())
    )
    if flt.task_id is not None:
        query = query.where(Trajectory.task_id == flt.task_id)
    if flt.policy:
        query = query.where(Trajectory.policy == flt.policy)
    if flt.rollout_id is not None:
        query = query.where(Trajectory.rollout_id == flt.rollout_id)
    if flt.status:
        query = query.where(Trajectory.status == flt.status)
    if flt.family:
        query = query.where(Task.family == flt.family)
    if flt.split:
        query = query.where(Task.split == flt.split)
    if flt.min_reward is not None:
        query = query.where(Trajectory.reward >= flt.min_reward)
    if flt.max_reward is not None:
        query = query.where(Trajectory.reward <= flt.max_reward)
    if flt.offset:
        query = query.offset(flt.offset)
    if flt.limit:
        query = query.limit(flt.limit)
    return [tuple(row) for row in session.exec(query)]


def compact_prompt(previous: str | None, prompt: str | None) -> tuple[int | None, str | None]:
    """(shared length, tail) to store for `prompt`, given the previous agent turn's full prompt."""
    if prompt is not None and previous and prompt.startswith(previous):
        return len(previous), prompt[len(previous) :]
    return None, prompt


def _with_full_prompts(session: Session, turns: list[Turn]) -> list[Turn]:
    """Detach the turns (so nothing below is ever written back) and expand compacted prompts."""
    previous: str | None = None
    for turn in turns:
        session.expunge(turn)
        if turn.prompt_shared is not None:
            turn.prompt = (previous or "")[: turn.prompt_shared] + (turn.prompt or "")
            turn.prompt_shared = None
        if turn.role == "assistant" and turn.prompt is not None:
            previous = turn.prompt
    return turns


def turns_of(session: Session, trajectory_id: int) -> list[Turn]:
    """A trajectory's turns in order, with full prompts."""
    turns = list(session.exec(select(Turn).where(Turn.trajectory_id == trajectory_id).order_by(Turn.index)))
    return _with_full_prompts(session, turns)


def test_results_of(session: Session, trajectory_id: int) -> list[TestResult]:
    rows = session.exec(select(TestResult).where(TestResult.trajectory_id == trajectory_id))
    return sorted(rows, key=lambda r: _natural(r.name))


def critic_scores_of(session: Session, trajectory_id: int) -> dict[int, list[tuple[int, float]]]:
    """turn_id → [(checkpoint_id, score)] for every scored turn of the trajectory."""
    rows = session.exec(
        select(CriticScore.turn_id, CriticScore.checkpoint_id, CriticScore.score)
        .join(Turn, Turn.id == CriticScore.turn_id)
        .where(Turn.trajectory_id == trajectory_id)
        .order_by(CriticScore.checkpoint_id)
    )
    scores: dict[int, list[tuple[int, float]]] = {}
    for turn_id, checkpoint_id, score in rows:
        scores.setdefault(turn_id, []).append((checkpoint_id, score))
    return scores


def _natural(name: str) -> tuple:
    digits = "".join(ch for ch in name if ch.isdigit())
    return (name.rstrip("0123456789"), int(digits) if digits else -1, name)


def add_screenshots(session: Session, rows: list[dict]) -> None:
    """Record rendered pages (sha256, path, width, height) not recorded yet."""
    if not rows:
        return
    unique = {r["sha256"]: r for r in rows}
    known = set(session.exec(select(Screenshot.sha256).where(col(Screenshot.sha256).in_(list(unique)))))
    insert_new(session, Screenshot.__table__, [r for sha, r in unique.items() if sha not in known])


# ---------------------------------------------------------------- incremental reads and lineage


def of_policies(policies: Sequence[str] | None):
    """A condition on Trajectory.policy: any of ``policies``, where a trailing * matches a
    prefix ("scripted:*"); None or empty: every policy."""
    if not policies:
        return true()
    exact = [p for p in policies if not p.endswith("*")]
    prefixes = [p[:-1] for p in policies if p.endswith("*")]
    escaped = [p.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") for p in prefixes]
    return or_(col(Trajectory.policy).in_(exact), *(col(Trajectory.policy).like(p + "%", escape="\\") for p in escaped))


def graded_since(
    session: Session, watermark: int | None, *, family: str | None = None, split: str | None = None, limit: int | None = None,
    policies: Sequence[str] | None = None,
) -> list[Trajectory]:
    """Graded trajectories the reader has not seen: graded_seq above its watermark.

    A range scan on graded_seq's index, so the cost follows the number of new rows,
    not the size of the table.
    """
    query = select(Trajectory).where(Trajectory.graded_seq > (watermark or 0), of_policies(policies)).order_by(Trajectory.graded_seq)
    if family or split:
        query = query.join(Task, Task.id == Trajectory.task_id)
    if family:
        query = query.where(Task.family == family)
    if split:
        query = query.where(Task.split == split)
    if limit:
        query = query.limit(limit)
    return list(session.exec(query))


def turns_for(session: Session, trajectory_ids: Sequence[int]) -> dict[int, list[Turn]]:
    """trajectory_id → its turns in order (full prompts), for many trajectories in few queries."""
    by_trajectory: dict[int, list[Turn]] = {i: [] for i in trajectory_ids}
    ids = list(trajectory_ids)
    for start in range(0, len(ids), _ROWS_PER_STATEMENT):
        chunk = ids[start : start + _ROWS_PER_STATEMENT]
        rows = session.exec(select(Turn).where(col(Turn.trajectory_id).in_(chunk)).order_by(Turn.trajectory_id, Turn.index))
        for turn in rows:
            by_trajectory[turn.trajectory_id].append(turn)
    for turns in by_trajectory.values():
        _with_full_prompts(session, turns)
    return by_trajectory


def record_lineage(session: Session, run_id: int, items: Iterable[tuple[int, int | None]]) -> int:
    """Record (trajectory_id, turn_id or None) pairs as consumed by a run."""
    rows = [{"run_id": run_id, "trajectory_id": t, "turn_id": u} for t, u in items]
    for start in range(0, len(rows), _ROWS_PER_STATEMENT * 4):
        session.connection().execute(insert(Lineage.__table__), rows[start : start + _ROWS_PER_STATEMENT * 4])
    return len(rows)



# ---------------------------------------------------------------- rollout claims


@dataclass(frozen=True)
class Slot:
    """Which rollouts a command asks for: every (task, sample index) under one policy setting."""

    policy: str
    simulator: str
    setting: str
    task_ids: tuple[int, ...]
    samples_per_task: int
    seed: int | None = None
    rollout_id: int | None = None  # the run new slots join


def ensure_slots(session: Session, slot: Slot) -> int:
    """Create the pending trajectory rows a rollout needs and does not have. Returns how many."""
    have: set[tuple[int, int]] = set()
    ids = list(slot.task_ids)
    for start in range(0, len(ids), _ROWS_PER_STATEMENT):
        chunk = ids[start : start + _ROWS_PER_STATEMENT]
        have.update(
            session.exec(
                select(Trajectory.task_id, Trajectory.sample_index).where(
                    Trajectory.policy == slot.policy,
                    Trajectory.simulator == slot.simulator,
                    Trajectory.setting == slot.setting,
                    col(Trajectory.task_id).in_(chunk),
                )
            )
        )
    missing = [
        {"task_id": task_id, "policy": slot.policy, "simulator": slot.simulator, "setting": slot.setting,
         "sample_index": index, "seed": slot.seed, "status": "pending", "rollout_id": slot.rollout_id}
        for task_id in slot.task_ids
        for index in range(slot.samples_per_task)
        if (task_id, index) not in have
    ]
    insert_new(session, Trajectory.__table__, missing)
    return len(missing)


def slot_trajectories(session: Session, slot: Slot) -> list[Trajectory]:
    """Every trajectory row of the slot set, whatever its status."""
    wanted = set(slot.task_ids)
    rows = session.exec(
        select(Trajectory).where(
            Trajectory.policy == slot.policy,
            Trajectory.simulator == slot.simulator,
            Trajectory.setting == slot.setting,
            Trajectory.sample_index < slot.samples_per_task,
        )
    )
    return [t for t in rows if t.task_id in wanted]


def claim(session: Session, slot: Slot, worker: str, limit: int, is_abandoned) -> list[Trajectory]:
    """Take up to `limit` unfinished trajectories of the slot set for `worker`.

    Pending rows are free; a running row is taken over only when `is_abandoned(row)`
    says its worker is gone. Call inside a write transaction: on SQLite, BEGIN
    IMMEDIATE makes claims exclusive; on PostgreSQL, row locks do. The candidates are
    read without locks and then locked `limit` at a time (SKIP LOCKED): locking every
    match would hold rows this worker never takes, and the other workers, skipping
    them, would find nothing to do.
    """
    if limit <= 0:
        return []
    unfinished = _unfinished(slot)
    wanted = set(slot.task_ids)
    free = [
        row.id
        for row in session.exec(
            select(Trajectory.id, Trajectory.task_id, Trajectory.status, Trajectory.worker, Trajectory.heartbeat_at)
            .where(*unfinished)
            .order_by(Trajectory.task_id, Trajectory.sample_index)
        )
        if row.task_id in wanted and (row.status == "pending" or is_abandoned(row))
    ]
    taken: list[Trajectory] = []
    now = utcnow()
    for start in range(0, len(free), limit):
        locked = session.exec(
            select(Trajectory)
            .where(col(Trajectory.id).in_(free[start : start + limit]), *unfinished)
            .order_by(Trajectory.task_id, Trajectory.sample_index)
            .with_for_update(skip_locked=True)
            .execution_options(populate_existing=True)
        )
        for trajectory in locked:
            if trajectory.status == "running" and not is_abandoned(trajectory):
                continue  # claimed by a live worker since the unlocked read
            trajectory.status, trajectory.worker, trajectory.heartbeat_at = "running", worker, now
            trajectory.started_at = trajectory.started_at or now
            taken.append(trajectory)
            if len(taken) == limit:
                break
        if len(taken) == limit:
            break
    session.flush()
    return taken


def claimable(session: Session, slot: Slot, is_abandoned) -> int:
    """How many trajectories of the slot set a worker could still take: pending, or
    running for a worker that is gone (a worker stops only when this is 0)."""
    wanted = set(slot.task_ids)
    rows = session.exec(select(Trajectory.task_id, Trajectory.status, Trajectory.worker, Trajectory.heartbeat_at).where(*_unfinished(slot)))
    return sum(1 for row in rows if row.task_id in wanted and (row.status == "pending" or is_abandoned(row)))


def _unfinished(slot: Slot) -> tuple:
    return (
        Trajectory.policy == slot.policy,
        Trajectory.simulator == slot.simulator,
        Trajectory.setting == slot.setting,
        Trajectory.sample_index < slot.samples_per_task,
        col(Trajectory.status).in_(("pending", "running")),
    )


def release(session: Session, worker: str) -> int:
    """Hand a worker's unfinished trajectories back (e.g. on Ctrl-C); their turns stay."""
    rows = session.exec(select(Trajectory).where(Trajectory.worker == worker, Trajectory.status == "running")).all()
    for trajectory in rows:
        trajectory.status, trajectory.worker = "pending", None
    return len(rows)


def newest_graded_seq(session: Session, *, family: str, split: str, policies: Sequence[str] | None = None) -> int | None:
    """The highest graded_seq among a family's split, of ``policies`` (None when nothing is graded)."""
    query = (
        select(func.max(Trajectory.graded_seq)).join(Task, Task.id == Trajectory.task_id)
        .where(Task.family == family, Task.split == split, of_policies(policies))
    )
    return session.exec(query).one()


def trained_data(
    session: Session, *, family: str, split: str, watermark: int | None, policies: Sequence[str] | None = None
) -> tuple[list[Trajectory], int | None]:
    """What a trainer continuing from ``watermark`` reads: graded, finished trajectories of the
    family's split above it (with a reward), of ``policies`` (see of_policies), and the new watermark."""
    fresh = [
        t for t in graded_since(session, watermark, family=family, split=split, policies=policies)
        if t.reward is not None and t.status == "done"
    ]
    return fresh, max((t.graded_seq for t in fresh), default=watermark)


def graded_rewards(
    session: Session, task_ids: Sequence[int], up_to_seq: int, policies: Sequence[str] | None = None
) -> list[tuple[int, int, float]]:
    """(trajectory id, task id, reward) of every finished, graded trajectory of the tasks (and
    ``policies``, see of_policies), up to a graded_seq."""
    found: list[tuple[int, int, float]] = []
    for chunk in _chunks(list(task_ids)):
        rows = session.exec(
            select(Trajectory.id, Trajectory.task_id, Trajectory.reward).where(
                col(Trajectory.task_id).in_(chunk),
                col(Trajectory.graded_seq).is_not(None),
                Trajectory.graded_seq <= up_to_seq,
                col(Trajectory.reward).is_not(None),
                Trajectory.status == "done",
                of_policies(policies),
            )
        )
        found.extend((i, task, float(reward)) for i, task, reward in rows)
    return found


def trajectories_by_id(session: Session, ids: Sequence[int]) -> dict[int, Trajectory]:
    found: dict[int, Trajectory] = {}
    for chunk in _chunks(list(ids)):
        found.update({t.id: t for t in session.exec(select(Trajectory).where(col(Trajectory.id).in_(chunk)))})
    return found


def task_references(session: Session, task_ids: Sequence[int]) -> dict[int, tuple[str, str]]:
    """task id → (family, reference solution)."""
    found: dict[int, tuple[str, str]] = {}
    for chunk in _chunks(list(task_ids)):
        query = select(Task.id, Task.family, Task.ground_truth).where(col(Task.id).in_(chunk))
        found.update({i: (family, truth) for i, family, truth in session.exec(query)})
    return found


def finished_trajectory_ids(session: Session, *, family: str | None = None, policy: str | None = None, limit: int | None = None) -> list[int]:
    """Finished trajectories, newest first."""
    query = select(Trajectory.id).where(Trajectory.status == "done").order_by(col(Trajectory.id).desc())
    if family:
        query = query.join(Task, Task.id == Trajectory.task_id).where(Task.family == family)
    if policy:
        query = query.where(Trajectory.policy == policy)
    if limit:
        query = query.limit(limit)
    return list(session.exec(query))


def answers_to_grade(session: Session, *, policy: str | None = None, ungraded_only: bool = False) -> list[tuple[Trajectory, Task]]:
    """Finished backend trajectories with an answer (optionally only ungraded ones), by id."""
    query = (
        select(Trajectory, Task)
        .join(Task, Task.id == Trajectory.task_id)
        .where(Task.family == "backend", Trajectory.status == "done", col(Trajectory.answer).is_not(None))
        .order_by(Trajectory.id)
    )
    if policy:
        query = query.where(Trajectory.policy == policy)
    if ungraded_only:
        query = query.where(col(Trajectory.graded_seq).is_(None))
    return [tuple(row) for row in session.exec(query)]


def _chunks(items: list, size: int = _ROWS_PER_STATEMENT):
    for start in range(0, len(items), size):
        yield items[start : start + size]


# ---------------------------------------------------------------- rollout writes


def add_rows(session: Session, rows: Iterable) -> None:
    """New rows (turns, test results) of this transaction."""
    session.add_all(list(rows))


def beat(session: Session, trajectory_ids: Iterable[int]) -> None:
    """The claiming worker is alive: refresh the trajectories' heartbeat."""
    now = utcnow()
    for trajectory_id in trajectory_ids:
        session.get(Trajectory, trajectory_id).heartbeat_at = now


def finish(session: Session, answers: dict[int, str | None]) -> None:
    """Trajectories whose dialogue ended, with their answers."""
    now = utcnow()
    for trajectory_id, answer in answers.items():
        trajectory = session.get(Trajectory, trajectory_id)
        trajectory.status, trajectory.answer, trajectory.finished_at = "done", answer, now


def save_grades(session: Session, grades: dict) -> None:
    """Write test rows, reward, success and grading of graded trajectories (replacing earlier grades).

    ``grades`` maps a trajectory id to a grade (colbench.envs.base.Grade). Call after
    ``Database.lock_for_sequence`` in the same transaction: each grade takes the next graded_seq.
    """
    seq = next_graded_seq(session)
    for trajectory_id, grade in grades.items():
        session.exec(delete(TestResult).where(TestResult.trajectory_id == trajectory_id))
        session.add_all(
            TestResult(
                trajectory_id=trajectory_id, name=test.name, call=test.call, expected=test.expected, actual=test.actual,
                passed=test.passed, error=test.error, duration_s=test.duration_s,
            )
            for test in grade.tests
        )
        trajectory = session.get(Trajectory, trajectory_id)
        trajectory.reward, trajectory.success, trajectory.reward_metric = grade.reward, grade.success, grade.metric
        trajectory.grading, trajectory.screenshot = grade.grading, grade.screenshot
        if grade.error and not trajectory.failure:
            trajectory.failure = f"grading: {grade.error}"
        trajectory.graded_seq = seq
        seq += 1


# ---------------------------------------------------------------- training runs and checkpoints


def start_run(session: Session, *, kind: str, base_model: str, parent_checkpoint_id: int | None, config: dict, worker: str | None = None,
              name: str | None = None, tags: Sequence[str] = ()) -> int:
    if name is not None and (holder := name_holder(session, name)) is not None:
        raise ValueError(f"the name {name!r} is taken by {holder}")
    run = TrainingRun(kind=kind, base_model=base_model, parent_checkpoint_id=parent_checkpoint_id, config=config, status="running",
                      worker=worker, heartbeat_at=utcnow(), name=name, tags=list(dict.fromkeys(tags)))
    session.add(run)
    session.flush()
    return run.id


def beat_run(session: Session, run_id: int) -> None:
    session.connection().execute(
        TrainingRun.__table__.update().where(TrainingRun.__table__.c.id == run_id).values(heartbeat_at=utcnow())
    )


def fail_stale_runs(session: Session, is_gone) -> list[int]:
    """Mark failed the running training runs whose process is gone (``is_gone(run)``):
    a kill -9 or a lost machine leaves no other trace. Returns their ids."""
    stale = [run for run in session.exec(select(TrainingRun).where(TrainingRun.status == "running")) if is_gone(run)]
    for run in stale:
        run.status, run.finished_at = "failed", utcnow()
        run.error = f"its process ({run.worker or 'unknown'}) stopped without finishing it (killed, or its machine lost)"
        session.add(run)
    return [run.id for run in stale]


def finish_run(
    session: Session, run_id: int, *, kind: str, base_model: str, path: str, adapter: bool, sha256: str | None,
    metrics: dict, watermark: int | None, lineage: Iterable[tuple[int, int | None]],
) -> int:
    """The run is done: its checkpoint, metrics, data watermark and lineage, in one transaction. Returns the checkpoint id."""
    checkpoint = Checkpoint(
        run_id=run_id, kind=kind, base_model=base_model, path=path, adapter=adapter,
        step=int(metrics.get("steps", 0)), sha256=sha256, metrics=metrics,
    )
    session.add(checkpoint)
    run = session.get(TrainingRun, run_id)
    run.status, run.metrics, run.finished_at, run.data_watermark = "done", metrics, utcnow(), watermark
    session.add(run)
    record_lineage(session, run_id, lineage)
    session.flush()
    return checkpoint.id


def add_run_metrics(session: Session, run_id: int, extra: dict) -> None:
    """Figures measured after a run finished (a critic's evaluation), added to its metrics."""
    run = session.get(TrainingRun, run_id)
    run.metrics = dict(run.metrics or {}) | extra  # a new dict: the JSON column sees the change
    session.add(run)


def fail_run(session: Session, run_id: int, reason: str) -> None:
    run = session.get(TrainingRun, run_id)
    if run is not None:
        run.status, run.error, run.finished_at = "failed", reason, utcnow()
        session.add(run)


def checkpoint_and_run(session: Session, checkpoint_id: int) -> tuple[Checkpoint, TrainingRun] | None:
    row = session.get(Checkpoint, checkpoint_id)
    run = session.get(TrainingRun, row.run_id) if row else None
    return (row, run) if row and run else None


def checkpoints_with_runs(session: Session) -> list[tuple[Checkpoint, TrainingRun]]:
    query = select(Checkpoint, TrainingRun).join(TrainingRun, TrainingRun.id == Checkpoint.run_id).order_by(Checkpoint.id)
    return [tuple(row) for row in session.exec(query)]


def same_run(
    session: Session, kind: str, settings: dict, *, base_model: str | None = None, ignored: Iterable[str] = (),
) -> tuple[Checkpoint, TrainingRun] | None:
    """The newest finished run of ``kind`` (with its checkpoint) whose recorded config agrees with
    ``settings`` on every key not in ``ignored``, of ``base_model`` when one is named.

    The one rule for "the same run" (continuing the latest critic, a study's resumable
    stages): a run is the same when it was made with the same settings.
    """
    skip = set(ignored)
    query = (
        select(Checkpoint, TrainingRun)
        .join(TrainingRun, TrainingRun.id == Checkpoint.run_id)
        .where(TrainingRun.kind == kind, TrainingRun.status == "done")
        .order_by(col(Checkpoint.id).desc())
    )
    for checkpoint, run in session.exec(query):
        if base_model is not None and checkpoint.base_model != base_model:
            continue
        config = run.config or {}
        if all(config.get(key) == value for key, value in settings.items() if key not in skip):
            return checkpoint, run
    return None


def replace_critic_scores(session: Session, checkpoint_id: int, rows: list[dict]) -> None:
    """Scores of turns by one critic checkpoint, replacing the ones those turns had from it."""
    turn_ids = [r["turn_id"] for r in rows]
    for chunk in _chunks(turn_ids):
        session.connection().execute(delete(CriticScore).where(CriticScore.checkpoint_id == checkpoint_id, col(CriticScore.turn_id).in_(chunk)))
    for chunk in _chunks(rows):
        session.connection().execute(insert(CriticScore.__table__), chunk)


def sweet_candidates(session: Session, key: str, turn_ids: Sequence[int]) -> dict[int, list[SweetCandidate]]:
    """turn id → its stored candidates under a sampling key, by index."""
    found: dict[int, list[SweetCandidate]] = {}
    for chunk in _chunks(list(turn_ids)):
        query = (
            select(SweetCandidate)
            .where(SweetCandidate.sampling_key == key, col(SweetCandidate.turn_id).in_(chunk))
            .order_by(SweetCandidate.turn_id, SweetCandidate.index)
        )
        for row in session.exec(query):
            found.setdefault(row.turn_id, []).append(row)
    return found


def replace_sweet_candidates(session: Session, key: str, turn_ids: Sequence[int], rows: list[dict]) -> None:
    """The candidates of these turns under a key (a crashed run may have left some half-scored)."""
    for chunk in _chunks(list(turn_ids)):
        session.connection().execute(delete(SweetCandidate).where(SweetCandidate.sampling_key == key, col(SweetCandidate.turn_id).in_(chunk)))
    for chunk in _chunks(rows):
        session.connection().execute(insert(SweetCandidate.__table__), chunk)


def add_sweet_pairs(session: Session, rows: list[dict]) -> None:
    for chunk in _chunks(rows):
        session.connection().execute(insert(SweetPair.__table__), chunk)


def sweet_pairs_of(session: Session, run_id: int) -> list[tuple[SweetCandidate, SweetCandidate, Turn]]:
    """(chosen, rejected, the stored agent turn both continue the history of) of each pair a SWEET run trained on."""
    pairs = list(session.exec(select(SweetPair).where(SweetPair.run_id == run_id).order_by(SweetPair.id)))
    candidates: dict[int, SweetCandidate] = {}
    turns: dict[int, Turn] = {}
    for chunk in _chunks([i for p in pairs for i in (p.chosen_id, p.rejected_id)]):
        candidates.update((c.id, c) for c in session.exec(select(SweetCandidate).where(col(SweetCandidate.id).in_(chunk))))
    for chunk in _chunks(sorted({p.turn_id for p in pairs})):
        turns.update((t.id, t) for t in session.exec(select(Turn).where(col(Turn.id).in_(chunk))))
    return [(candidates[p.chosen_id], candidates[p.rejected_id], turns[p.turn_id]) for p in pairs]


# ---------------------------------------------------------------- evaluation


def graded_outcomes(
    session: Session, *, family: str, split: str, policies: Sequence[str] | None = None, simulator: str | None = None,
    setting: str | None = None, grading: str | None = None, rollout_id: int | None = None,
) -> list[tuple]:
    """Per graded trajectory of a family's split: (policy, simulator, setting, metric, task id,
    sample index, reward, success, had a failed simulator reply, grading)."""
    no_reply = exists().where(Turn.trajectory_id == Trajectory.id, Turn.role == "user", col(Turn.error).is_not(None))
    query = (
        select(Trajectory.policy, Trajectory.simulator, Trajectory.setting, Trajectory.reward_metric, Trajectory.task_id,
               Trajectory.sample_index, Trajectory.reward, Trajectory.success, no_reply, Trajectory.grading)
        .join(Task, Task.id == Trajectory.task_id)
        .where(Task.family == family, Task.split == split, col(Trajectory.graded_seq).is_not(None))
    )
    if policies:
        query = query.where(col(Trajectory.policy).in_(policies))
    if simulator:
        query = query.where(Trajectory.simulator == simulator)
    if setting is not None:
        query = query.where(Trajectory.setting == setting)
    if grading is not None:
        query = query.where(Trajectory.grading == grading)
    if rollout_id is not None:
        query = query.where(Trajectory.rollout_id == rollout_id)
    return [tuple(row) for row in session.exec(query)]


def graded_trajectory_ids(
    session: Session, *, family: str, split: str, policies: Sequence[str] | None = None, simulator: str | None = None,
    setting: str | None = None,
) -> list[tuple[int, tuple[str, str, str]]]:
    """(id, (policy, simulator, setting)) of every graded trajectory of a family's split, oldest first."""
    query = (
        select(Trajectory.id, Trajectory.policy, Trajectory.simulator, Trajectory.setting)
        .join(Task, Task.id == Trajectory.task_id)
        .where(Task.family == family, Task.split == split, col(Trajectory.graded_seq).is_not(None), of_policies(policies))
        .order_by(Trajectory.id)
    )
    if simulator:
        query = query.where(Trajectory.simulator == simulator)
    if setting is not None:
        query = query.where(Trajectory.setting == setting)
    return [(row[0], (row[1], row[2], row[3] or "")) for row in session.exec(query)]


def graded_groups(session: Session) -> list[tuple[str, str, str, str, int]]:
    """(family, split, policy, setting, trajectories) of every graded group: what an empty filter could have named."""
    query = (
        select(Task.family, Task.split, Trajectory.policy, Trajectory.setting, func.count())
        .join(Task, Task.id == Trajectory.task_id).where(col(Trajectory.graded_seq).is_not(None))
        .group_by(Task.family, Task.split, Trajectory.policy, Trajectory.setting)
        .order_by(Task.family, Task.split, Trajectory.policy, Trajectory.setting)
    )
    return [tuple(row) for row in session.exec(query)]


def add_evaluations(session: Session, rows: Iterable[dict]) -> int:
    """Record evaluations; one that repeats the newest of its policy, task set and simulator figure for
    figure (the same `eval` run again on the same data) is not written twice. Returns how many were written."""
    def kind(metrics: dict) -> tuple:  # a row of `eval`: one setting, metric and grading of the policy
        return tuple((metrics or {}).get(k) for k in ("setting", "metric", "grading"))

    written = 0
    for row in rows:
        earlier = session.exec(
            select(Evaluation).where(Evaluation.policy == row["policy"], Evaluation.family == row["family"],
                                     Evaluation.split == row["split"], Evaluation.simulator == row["simulator"])
            .order_by(col(Evaluation.id).desc())
        )
        newest = next((e for e in earlier if kind(e.metrics) == kind(row["metrics"])), None)
        if newest is None or newest.metrics != row["metrics"] or newest.n_trajectories != row["n_trajectories"]:
            session.add(Evaluation(**row))
            written += 1
    return written


def trajectory_with_task(session: Session, trajectory_id: int) -> tuple[Trajectory, Task] | None:
    trajectory = session.get(Trajectory, trajectory_id)
    return (trajectory, session.get(Task, trajectory.task_id)) if trajectory else None


def screenshot_paths(session: Session, shas: Iterable[str]) -> dict[str, str]:
    """sha256 → stored path of those screenshots."""
    wanted = list(set(shas))
    found: dict[str, str] = {}
    for chunk in _chunks(wanted):
        found.update({row.sha256: row.path for row in session.exec(select(Screenshot).where(col(Screenshot.sha256).in_(chunk)))})
    return found


# ---------------------------------------------------------------- runs: rollouts, training runs, evaluations by name


def open_rollout_run(session: Session, *, policy: str, simulator: str, setting: str, tasks: str, config: dict,
                     name: str | None = None, tags: Sequence[str] = ()) -> RolloutRun:
    """The rollout run of (policy, simulator, setting, task set), made on first use; a rerun
    continues it, takes its latest config, adds its tags and, when given, its name."""
    identity = {"policy": policy, "simulator": simulator, "setting": setting, "tasks": tasks}
    same = [getattr(RolloutRun, k) == v for k, v in identity.items()]
    run = session.exec(select(RolloutRun).where(*same)).first()
    if run is None:  # insert_new: another worker may be making it at this moment (PostgreSQL spends an id on a conflict)
        insert_new(session, RolloutRun.__table__, [identity | {"tags": [], "config": {}, "created_at": utcnow()}])
        run = session.exec(select(RolloutRun).where(*same)).one()
    if name and run.name != name:
        holder = name_holder(session, name)
        if holder is not None:
            raise ValueError(f"the name {name!r} is taken by {holder}")
        run.name = name
    run.tags = list(dict.fromkeys([*(run.tags or []), *tags]))
    run.config, run.updated_at = config, utcnow()
    session.add(run)
    session.flush()
    return run


def name_holder(session: Session, name: str) -> str | None:
    """The reference (rollout:<id> or train:<id>) of the run called ``name``, if any."""
    rollout = session.exec(select(RolloutRun.id).where(RolloutRun.name == name)).first()
    if rollout is not None:
        return f"rollout:{rollout}"
    run = session.exec(select(TrainingRun.id).where(TrainingRun.name == name)).first()
    return None if run is None else f"train:{run}"


def rollout_runs(session: Session, *, tag: str | None = None, run_id: int | None = None) -> list[tuple[RolloutRun, dict]]:
    """Rollout runs (every one, or one) with their trajectories' figures: counts by status, graded, successes, reward sum."""
    figures: dict[int, dict] = defaultdict(lambda: {"pending": 0, "running": 0, "done": 0, "failed": 0, "graded": 0, "successes": 0, "reward_sum": 0.0})
    query = select(
        Trajectory.rollout_id, Trajectory.status, func.count(), func.count(Trajectory.graded_seq),
        func.sum(case((Trajectory.success == true(), 1), else_=0)), func.sum(Trajectory.reward),
    ).group_by(Trajectory.rollout_id, Trajectory.status)
    if run_id is not None:
        query = query.where(Trajectory.rollout_id == run_id)
    for rollout_id, status, count, graded, successes, reward_sum in session.exec(query):
        row = figures[rollout_id]
        row[status] = row.get(status, 0) + count
        row["graded"] += graded
        row["successes"] += successes or 0
        row["reward_sum"] += reward_sum or 0.0
    runs = session.exec(select(RolloutRun).where(true() if run_id is None else RolloutRun.id == run_id).order_by(RolloutRun.id)).all()
    return [(run, dict(figures[run.id])) for run in runs if tag is None or tag in (run.tags or [])]


def rollout_run_names(session: Session) -> dict[int, str | None]:
    return dict(session.exec(select(RolloutRun.id, RolloutRun.name)).all())


def training_runs(session: Session, *, tag: str | None = None, run_id: int | None = None) -> list[tuple[TrainingRun, list[Checkpoint]]]:
    """Training runs (every one, or one) with their checkpoints."""
    checkpoints: dict[int, list[Checkpoint]] = defaultdict(list)
    chosen = true() if run_id is None else Checkpoint.run_id == run_id
    for checkpoint in session.exec(select(Checkpoint).where(chosen).order_by(Checkpoint.id)):
        checkpoints[checkpoint.run_id].append(checkpoint)
    runs = session.exec(select(TrainingRun).where(true() if run_id is None else TrainingRun.id == run_id).order_by(TrainingRun.id)).all()
    return [(run, checkpoints[run.id]) for run in runs if tag is None or tag in (run.tags or [])]


def evaluations(session: Session) -> list[Evaluation]:
    return list(session.exec(select(Evaluation).order_by(Evaluation.id)))


def training_steps(session: Session, run_id: int) -> list[TrainingStep]:
    return list(session.exec(select(TrainingStep).where(TrainingStep.run_id == run_id).order_by(TrainingStep.step)))


def add_training_steps(session: Session, run_id: int, rows: Sequence[tuple[int, int, dict]]) -> None:
    """(step, epoch, values) rows of a run; a step already stored (a resumed write) is kept."""
    insert_new(session, TrainingStep.__table__,
               [{"run_id": run_id, "step": s, "epoch": e, "values": v, "created_at": utcnow()} for s, e, v in rows])


def consumers_of_rollout(session: Session, rollout_id: int) -> list[int]:
    """Training runs that trained on any trajectory of the rollout run."""
    query = (
        select(Lineage.run_id).distinct().join(Trajectory, Trajectory.id == Lineage.trajectory_id)
        .where(Trajectory.rollout_id == rollout_id).order_by(Lineage.run_id)
    )
    return list(session.exec(query))


def data_of_run(session: Session, run_id: int) -> list[tuple[int | None, int]]:
    """(rollout run id, trajectories) the training run consumed, per rollout run."""
    query = (
        select(Trajectory.rollout_id, func.count(func.distinct(Lineage.trajectory_id)))
        .join(Trajectory, Trajectory.id == Lineage.trajectory_id)
        .where(Lineage.run_id == run_id).group_by(Trajectory.rollout_id).order_by(Trajectory.rollout_id)
    )
    return [tuple(row) for row in session.exec(query)]


def rollouts_of(session: Session, trajectory_ids: Sequence[int]) -> list[tuple[int | None, str | None, int]]:
    """(rollout run id, its name, how many) of these trajectories, per rollout run."""
    counts: dict[int | None, int] = defaultdict(int)
    for chunk in _chunks(sorted(set(trajectory_ids))):
        for rollout_id, n in session.exec(select(Trajectory.rollout_id, func.count()).where(col(Trajectory.id).in_(chunk)).group_by(Trajectory.rollout_id)):
            counts[rollout_id] += n
    names = rollout_run_names(session)
    return [(rid, names.get(rid), n) for rid, n in sorted(counts.items(), key=lambda item: item[0] or 0)]


def users_of_checkpoints(session: Session, checkpoint_ids: Sequence[int]) -> list[str]:
    """What would break without these checkpoints: rollout runs whose policy or best-of-N critic
    they are, training runs that continued them, started from them or were scored by them."""
    if not checkpoint_ids:
        return []
    refs = {f"ckpt:{i}" for i in checkpoint_ids}
    users = []
    for run in session.exec(select(RolloutRun).order_by(RolloutRun.id)):
        critics = {part.split(":", 1)[1] for part in run.setting.split(",") if part.startswith("best-of-")}
        if run.policy in refs or critics & refs:
            users.append(f"rollout:{run.id}")
    for run in session.exec(select(TrainingRun).order_by(TrainingRun.id)):
        critic = (run.config or {}).get("critic_checkpoint_id")
        if run.parent_checkpoint_id in checkpoint_ids or run.base_model in refs or critic in checkpoint_ids:
            users.append(f"train:{run.id}")
    return users


def reusers_of_candidates(session: Session, run_id: int) -> list[int]:
    """Other training runs that trained on SWEET candidates this run sampled (same sampling key)."""
    query = (
        select(SweetPair.run_id).distinct().join(SweetCandidate, SweetCandidate.id == SweetPair.chosen_id)
        .where(SweetCandidate.run_id == run_id, SweetPair.run_id != run_id).order_by(SweetPair.run_id)
    )
    return list(session.exec(query))


def delete_trajectories(session: Session, trajectory_ids: Sequence[int]) -> None:
    """Trajectories with their turns, test results, critic scores and SWEET candidates of their turns."""
    connection = session.connection()
    for chunk in _chunks(list(trajectory_ids)):
        turns = select(Turn.id).where(col(Turn.trajectory_id).in_(chunk)).scalar_subquery()
        connection.execute(delete(SweetPair).where(col(SweetPair.turn_id).in_(turns)))
        connection.execute(delete(SweetCandidate).where(col(SweetCandidate.turn_id).in_(turns)))
        connection.execute(delete(CriticScore).where(col(CriticScore.turn_id).in_(turns)))
        connection.execute(delete(Lineage).where(col(Lineage.trajectory_id).in_(chunk)))
        connection.execute(delete(TestResult).where(col(TestResult.trajectory_id).in_(chunk)))
        connection.execute(delete(Turn).where(col(Turn.trajectory_id).in_(chunk)))
        connection.execute(delete(Trajectory).where(col(Trajectory.id).in_(chunk)))


def rollout_trajectory_ids(session: Session, rollout_id: int, *, unfinished_only: bool = False) -> list[int]:
    query = select(Trajectory.id).where(Trajectory.rollout_id == rollout_id)
    if unfinished_only:
        query = query.where(col(Trajectory.status).in_(("pending", "running", "failed")))
    return list(session.exec(query))


def delete_training_run(session: Session, run_id: int) -> None:
    """A training run and everything only it made: steps, lineage, SWEET pairs and candidates,
    its checkpoints' critic scores, its checkpoints."""
    connection = session.connection()
    checkpoints = select(Checkpoint.id).where(Checkpoint.run_id == run_id).scalar_subquery()
    connection.execute(delete(TrainingStep).where(TrainingStep.run_id == run_id))
    connection.execute(delete(Lineage).where(Lineage.run_id == run_id))
    connection.execute(delete(SweetPair).where(SweetPair.run_id == run_id))
    connection.execute(delete(SweetCandidate).where(SweetCandidate.run_id == run_id))
    connection.execute(delete(CriticScore).where(col(CriticScore.checkpoint_id).in_(checkpoints)))
    connection.execute(delete(Checkpoint).where(Checkpoint.run_id == run_id))
    connection.execute(delete(TrainingRun).where(TrainingRun.id == run_id))


def find_rollout_run(session: Session, *, policy: str, simulator: str, setting: str, tasks: str) -> RolloutRun | None:
    """The rollout run of (policy, simulator, setting, task set), if one was made: what a rollout
    with them continues (open_rollout_run makes it otherwise)."""
    identity = {"policy": policy, "simulator": simulator, "setting": setting, "tasks": tasks}
    return session.exec(select(RolloutRun).where(*(getattr(RolloutRun, k) == v for k, v in identity.items()))).first()
