"""Rollout claims: the slots of a rollout, which workers claim, beat and release."""
from __future__ import annotations

from dataclasses import dataclass

from sqlmodel import col, select, Session

from colbench.store.models import Trajectory, utcnow
from colbench.store.queries._shared import ROWS_PER_STATEMENT, insert_new


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
    for start in range(0, len(ids), ROWS_PER_STATEMENT):
        chunk = ids[start : start + ROWS_PER_STATEMENT]
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
    rows = session.exec(select(Trajectory.task_id, Trajectory.status, Trajectory.worker,
                               Trajectory.heartbeat_at).where(*_unfinished(slot)))
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
