"""Reads and writes that more than one part of colbench needs.

Recipes and commands reach the store through these functions, so each query exists
once and its indexes are chosen here.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from sqlalchemy import func, insert
from sqlmodel import Session, col, select

from colbench.store.models import (
    CriticScore,
    Screenshot,
    Lineage,
    Task,
    TestResult,
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


def add_tasks(session: Session, tasks: Sequence[dict]) -> tuple[dict[str, int], int]:
    """Insert task rows (column dicts) not stored yet. Returns (content_hash → id for all, number added)."""
    ids = existing_task_ids(session, (t["content_hash"] for t in tasks))
    new, seen = [], set(ids)
    for task in tasks:
        if task["content_hash"] not in seen:
            seen.add(task["content_hash"])
            new.append(task)
    for start in range(0, len(new), _ROWS_PER_STATEMENT):
        session.connection().execute(insert(Task.__table__), new[start : start + _ROWS_PER_STATEMENT])
    ids.update(existing_task_ids(session, (t["content_hash"] for t in new)))  # no RETURNING: SQLite runs it row by row
    return ids, len(new)


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
    trajectory's turns as tuples in TURN_IMPORT_COLUMNS order. Returns the new ids in order.
    """
    # Core executemany, not the ORM, and no RETURNING (which SQLite runs row by row):
    # the ids are read back afterwards through the unique content_hash.
    connection = session.connection()
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
    limit: int | None = 50


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
    known = set(session.exec(select(Screenshot.sha256).where(col(Screenshot.sha256).in_([r["sha256"] for r in rows]))))
    for row in rows:
        if row["sha256"] not in known:
            known.add(row["sha256"])
            session.add(Screenshot(**row))
    session.flush()


# ---------------------------------------------------------------- incremental reads and lineage


def graded_since(
    session: Session, watermark: int | None, *, family: str | None = None, limit: int | None = None
) -> list[Trajectory]:
    """Graded trajectories the reader has not seen: graded_seq above its watermark.

    A range scan on graded_seq's index, so the cost follows the number of new rows,
    not the size of the table.
    """
    query = select(Trajectory).where(Trajectory.graded_seq > (watermark or 0)).order_by(Trajectory.graded_seq)
    if family:
        query = query.join(Task, Task.id == Trajectory.task_id).where(Task.family == family)
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
         "sample_index": index, "seed": slot.seed, "status": "pending"}
        for task_id in slot.task_ids
        for index in range(slot.samples_per_task)
        if (task_id, index) not in have
    ]
    for start in range(0, len(missing), _ROWS_PER_STATEMENT):
        session.connection().execute(insert(Trajectory.__table__), missing[start : start + _ROWS_PER_STATEMENT])
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
    IMMEDIATE makes claims exclusive; on PostgreSQL, SKIP LOCKED does.
    """
    if limit <= 0:
        return []
    wanted = set(slot.task_ids)
    query = (
        select(Trajectory)
        .where(
            Trajectory.policy == slot.policy,
            Trajectory.simulator == slot.simulator,
            Trajectory.setting == slot.setting,
            Trajectory.sample_index < slot.samples_per_task,
            col(Trajectory.status).in_(("pending", "running")),
        )
        .order_by(Trajectory.task_id, Trajectory.sample_index)
        .with_for_update(skip_locked=True)
    )
    taken = []
    now = utcnow()
    for trajectory in session.exec(query):
        if trajectory.task_id not in wanted:
            continue
        if trajectory.status == "running" and not is_abandoned(trajectory):
            continue
        trajectory.status, trajectory.worker, trajectory.heartbeat_at = "running", worker, now
        trajectory.started_at = trajectory.started_at or now
        taken.append(trajectory)
        if len(taken) == limit:
            break
    session.flush()
    return taken


def release(session: Session, worker: str) -> int:
    """Hand a worker's unfinished trajectories back (e.g. on Ctrl-C); their turns stay."""
    rows = session.exec(select(Trajectory).where(Trajectory.worker == worker, Trajectory.status == "running")).all()
    for trajectory in rows:
        trajectory.status, trajectory.worker = "pending", None
    return len(rows)
