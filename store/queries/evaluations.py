"""Evaluations: graded outcomes grouped for the eval table, and stored evaluations."""
from __future__ import annotations

from typing import Iterable, Sequence

from sqlalchemy import exists, func
from sqlmodel import col, select, Session

from colbench.store.models import Evaluation, Task, Trajectory, Turn
from colbench.store.queries._shared import of_policies


def graded_outcomes(
    session: Session, *, family: str, split: str, policies: Sequence[str] | None = None, simulator: str | None = None,
    setting: str | None = None, grading: str | None = None, rollout_id: int | None = None,
) -> list[tuple]:
    """Per graded trajectory of a family's split: (policy, simulator, setting, metric, task id,
    sample index, reward, success, had a failed simulator reply, grading)."""
    no_reply = exists().where(Turn.trajectory_id == Trajectory.id, Turn.role == "user", col(Turn.error).is_not(None))
    query = (
        select(Trajectory.policy, Trajectory.simulator, Trajectory.setting, Trajectory.reward_metric,
               Trajectory.task_id,
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
        .where(Task.family == family, Task.split == split, col(Trajectory.graded_seq).is_not(None),
               of_policies(policies))
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


def evaluations(session: Session) -> list[Evaluation]:
    return list(session.exec(select(Evaluation).order_by(Evaluation.id)))
