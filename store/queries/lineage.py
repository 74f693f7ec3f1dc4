"""Lineage reads: which run read which trajectories, who uses which checkpoint or rollout, and deleting what nothing
uses."""
from __future__ import annotations

from collections import defaultdict
from typing import Sequence

from sqlalchemy import delete, func
from sqlmodel import col, select, Session

from colbench.store.models import (
    Checkpoint,
    CreditValue,
    CriticScore,
    Lineage,
    RolloutRun,
    SweetCandidate,
    SweetPair,
    TestResult,
    TrainingRun,
    TrainingStep,
    Trajectory,
    Turn,
)
from colbench.store.queries._shared import chunks
from colbench.store.queries.runs import rollout_run_names


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
    for chunk in chunks(sorted(set(trajectory_ids))):
        for rollout_id, n in session.exec(
            select(Trajectory.rollout_id, func.count())
            .where(col(Trajectory.id).in_(chunk))
            .group_by(Trajectory.rollout_id)
        ):
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
    """Trajectories with their turns, test results, critic scores, credit values and SWEET candidates of their
    turns."""
    connection = session.connection()
    for chunk in chunks(list(trajectory_ids)):
        turns = select(Turn.id).where(col(Turn.trajectory_id).in_(chunk)).scalar_subquery()
        connection.execute(delete(SweetPair).where(col(SweetPair.turn_id).in_(turns)))
        connection.execute(delete(SweetCandidate).where(col(SweetCandidate.turn_id).in_(turns)))
        connection.execute(delete(CriticScore).where(col(CriticScore.turn_id).in_(turns)))
        connection.execute(delete(CreditValue).where(col(CreditValue.turn_id).in_(turns)))
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
