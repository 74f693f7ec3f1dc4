"""Trajectories and their turns, test results and screenshots: bulk imports, the rollout's writes, reads."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Iterable, Sequence

from sqlalchemy import func, insert
from sqlmodel import col, select, Session

from colbench.store.models import Screenshot, Task, TestResult, Trajectory, Turn, utcnow
from colbench.store.queries._shared import ROWS_PER_STATEMENT, chunks, insert_new


def bulk_insert_trajectories(session: Session, trajectories: list[dict], turns: list[list[tuple]],
                             turn_ids: list[list[int]] | None = None) -> list[int]:
    """Insert imported trajectories and their turns with a few large statements.

    `trajectories[i]` is a column dict with a unique content_hash (and its id, when restored
    under the ids it had); `turns[i]` holds that trajectory's turns as tuples in
    TURN_IMPORT_COLUMNS order, and `turn_ids[i]`, when given, their ids. Returns the ids of the
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
        for start in range(0, len(trajectories), ROWS_PER_STATEMENT):
            created.update(connection.execute(statement, trajectories[start : start + ROWS_PER_STATEMENT]).scalars())
        kept = [k for k, t in enumerate(trajectories) if t["content_hash"] in created]
        trajectories, turns = [trajectories[k] for k in kept], [turns[k] for k in kept]
    else:
        for start in range(0, len(trajectories), ROWS_PER_STATEMENT):
            connection.execute(insert(Trajectory.__table__), trajectories[start : start + ROWS_PER_STATEMENT])
    hashes = [t["content_hash"] for t in trajectories]
    by_hash: dict[str, int] = {}
    for start in range(0, len(hashes), ROWS_PER_STATEMENT):
        chunk = hashes[start : start + ROWS_PER_STATEMENT]
        by_hash.update(session.exec(select(Trajectory.content_hash,
                                           Trajectory.id).where(col(Trajectory.content_hash).in_(chunk))).all())
    ids = [by_hash[h] for h in hashes]
    # Turns are the bulk of an import (hundreds of thousands of rows): hand them to the
    # driver's executemany as tuples, skipping SQLAlchemy's per-row parameter processing.
    marker = "?" if connection.dialect.paramstyle == "qmark" else "%s"
    # A plain import has no sampler fields: its turns go in with the text columns alone, as fast as before them.
    base = len(TURN_IMPORT_COLUMNS) - len(TURN_SAMPLER_COLUMNS)
    unsampled = (None,) * len(TURN_SAMPLER_COLUMNS)
    width = len(TURN_IMPORT_COLUMNS) if any(turn[base:] != unsampled for its in turns for turn in its) else base
    names = ("trajectory_id",) + TURN_IMPORT_COLUMNS[:width]
    json_at = [k for k, name in enumerate(TURN_IMPORT_COLUMNS[:width]) if name in TURN_JSON_COLUMNS]

    def encoded(turn: tuple) -> tuple:  # the driver takes JSON as its text (PostgreSQL casts it, below)
        if all(turn[k] is None for k in json_at):  # most turns (every human one, every plain import's): as they are
            return turn[:width]
        return tuple(json.dumps(v) if k in json_at and v is not None else v for k, v in enumerate(turn[:width]))

    if turn_ids is None:
        rows = [(trajectory_id, *encoded(turn)) for trajectory_id, its_turns in zip(ids, turns) for turn in its_turns]
    else:
        names = ("id",) + names
        rows = [(turn_id, trajectory_id, *encoded(turn))
                for trajectory_id, its_turns, its_ids in zip(ids, turns, turn_ids)
                for turn, turn_id in zip(its_turns, its_ids)]
    cast = connection.dialect.name == "postgresql"
    values = ", ".join(f"CAST({marker} AS JSON)" if cast and n in TURN_JSON_COLUMNS else marker for n in names)
    columns = ", ".join(_quoted(connection, n) for n in names)
    statement = f"INSERT INTO turn ({columns}) VALUES ({values})"
    for start in range(0, len(rows), ROWS_PER_STATEMENT * 4):
        connection.exec_driver_sql(statement, rows[start : start + ROWS_PER_STATEMENT * 4])
    if turn_ids is not None and connection.dialect.name == "postgresql":
        # Rows given their ids leave PostgreSQL's sequences behind; the next plain insert would take a used id.
        for table in ("trajectory", "turn"):
            connection.exec_driver_sql(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'),"
                                       f" (SELECT max(id) FROM {table}))")
    return ids


def taken(session: Session, column, values: Sequence[int]) -> set[int]:
    """Which of these values a unique column (Trajectory.id, Turn.id, Trajectory.graded_seq) holds already."""
    found: set[int] = set()
    for chunk in chunks(list(values)):
        found.update(session.exec(select(column).where(col(column).in_(chunk))))
    return found


# What an agent turn's sampler stored beside its text: an export with ids carries them, so that a restored store
# trains on the very tokens that were sampled (and their log-probs), not the text encoded again.
TURN_SAMPLER_COLUMNS = ("token_ids", "token_logprobs", "prompt_tokens", "completion_tokens", "logprob_sum",
                        "logprob_mean", "latency_s", "error", "leak")
TURN_JSON_COLUMNS = ("token_ids", "token_logprobs", "leak")
TURN_IMPORT_COLUMNS = ("index", "role", "content", "raw", "prompt", "prompt_shared") + TURN_SAMPLER_COLUMNS


def _quoted(connection, name: str) -> str:
    return connection.dialect.identifier_preparer.quote(name)


def existing_trajectory_hashes(session: Session, hashes: Iterable[str]) -> set[str]:
    found: set[str] = set()
    hashes = list(set(hashes))
    for start in range(0, len(hashes), ROWS_PER_STATEMENT):
        chunk = hashes[start : start + ROWS_PER_STATEMENT]
        found.update(session.exec(select(Trajectory.content_hash).where(col(Trajectory.content_hash).in_(chunk))))
    return found


def sample_counts(session: Session, policy: str, task_ids: Iterable[int]) -> dict[int, int]:
    """How many trajectories of `policy` each task already has (the next sample index)."""
    counts: dict[int, int] = {}
    task_ids = list(set(task_ids))
    for start in range(0, len(task_ids), ROWS_PER_STATEMENT):
        chunk = task_ids[start : start + ROWS_PER_STATEMENT]
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


def turns_for(session: Session, trajectory_ids: Sequence[int]) -> dict[int, list[Turn]]:
    """trajectory_id → its turns in order (full prompts), for many trajectories in few queries."""
    by_trajectory: dict[int, list[Turn]] = {i: [] for i in trajectory_ids}
    ids = list(trajectory_ids)
    for start in range(0, len(ids), ROWS_PER_STATEMENT):
        chunk = ids[start : start + ROWS_PER_STATEMENT]
        rows = session.exec(select(Turn).where(col(Turn.trajectory_id).in_(chunk)).order_by(Turn.trajectory_id,
                                                                                            Turn.index))
        for turn in rows:
            by_trajectory[turn.trajectory_id].append(turn)
    for turns in by_trajectory.values():
        _with_full_prompts(session, turns)
    return by_trajectory


def leak_actions(session: Session, trajectory_ids: Sequence[int]) -> dict[int, list[str]]:
    """trajectory_id → the simulator guard's action on each of its leaking human replies (flagged, redacted,
    resampled), for those with any."""
    found: dict[int, list[str]] = {}
    ids = list(trajectory_ids)
    for start in range(0, len(ids), ROWS_PER_STATEMENT):
        rows = session.exec(select(Turn.trajectory_id, Turn.leak).where(
            col(Turn.trajectory_id).in_(ids[start : start + ROWS_PER_STATEMENT]), col(Turn.leak).is_not(None)))
        for trajectory_id, leak in rows:
            if leak:
                found.setdefault(trajectory_id, []).append(leak.get("action", "flagged"))
    return found


def trajectories_by_id(session: Session, ids: Sequence[int]) -> dict[int, Trajectory]:
    found: dict[int, Trajectory] = {}
    for chunk in chunks(list(ids)):
        found.update({t.id: t for t in session.exec(select(Trajectory).where(col(Trajectory.id).in_(chunk)))})
    return found


def finished_trajectory_ids(session: Session, *, family: str | None = None, policy: str | None = None,
                            limit: int | None = None) -> list[int]:
    """Finished trajectories, newest first."""
    query = select(Trajectory.id).where(Trajectory.status == "done").order_by(col(Trajectory.id).desc())
    if family:
        query = query.join(Task, Task.id == Trajectory.task_id).where(Task.family == family)
    if policy:
        query = query.where(Trajectory.policy == policy)
    if limit:
        query = query.limit(limit)
    return list(session.exec(query))


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


def trajectory_with_task(session: Session, trajectory_id: int) -> tuple[Trajectory, Task] | None:
    trajectory = session.get(Trajectory, trajectory_id)
    return (trajectory, session.get(Task, trajectory.task_id)) if trajectory else None


def screenshot_paths(session: Session, shas: Iterable[str]) -> dict[str, str]:
    """sha256 → stored path of those screenshots."""
    wanted = list(set(shas))
    found: dict[str, str] = {}
    for chunk in chunks(wanted):
        found.update(
            {row.sha256: row.path for row in session.exec(select(Screenshot).where(col(Screenshot.sha256).in_(chunk)))}
        )
    return found


def trajectories_of_turns(session: Session, turn_ids: Sequence[int]) -> dict[int, int]:
    """turn id → the id of the trajectory it belongs to."""
    found: dict[int, int] = {}
    for chunk in chunks(list(turn_ids)):
        found.update(session.exec(select(Turn.id, Turn.trajectory_id).where(col(Turn.id).in_(chunk))).all())
    return found
