"""Grades: writing them (each takes the next graded_seq) and the graded data trainers read by watermark."""
from __future__ import annotations

from typing import Sequence

from sqlalchemy import delete, func
from sqlmodel import col, select, Session

from colbench.store.models import Task, TestResult, Trajectory
from colbench.store.queries._shared import chunks, of_policies


def next_graded_seq(session: Session) -> int:
    """The next free graded_seq number (later ones follow it). Call inside a write transaction."""
    current = session.exec(select(func.max(Trajectory.graded_seq))).one()
    return (current or 0) + 1


def graded_since(
    session: Session, watermark: int | None, *, family: str | None = None, split: str | None = None,
    limit: int | None = None,
    policies: Sequence[str] | None = None,
) -> list[Trajectory]:
    """Graded trajectories the reader has not seen: graded_seq above its watermark.

    A range scan on graded_seq's index, so the cost follows the number of new rows,
    not the size of the table.
    """
    query = select(Trajectory).where(Trajectory.graded_seq > (watermark or 0),
                                     of_policies(policies)).order_by(Trajectory.graded_seq)
    if family or split:
        query = query.join(Task, Task.id == Trajectory.task_id)
    if family:
        query = query.where(Task.family == family)
    if split:
        query = query.where(Task.split == split)
    if limit:
        query = query.limit(limit)
    return list(session.exec(query))


def newest_graded_seq(session: Session, *, family: str, split: str,
                      policies: Sequence[str] | None = None) -> int | None:
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
    for chunk in chunks(list(task_ids)):
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


def answers_to_grade(session: Session, *, family: str, policy: str | None = None,
                     ungraded_only: bool = False) -> list[tuple[Trajectory, Task]]:
    """Finished trajectories of ``family``'s tasks with an answer (optionally only ungraded ones), by id."""
    query = (
        select(Trajectory, Task)
        .join(Task, Task.id == Trajectory.task_id)
        .where(Task.family == family, Trajectory.status == "done", col(Trajectory.answer).is_not(None))
        .order_by(Trajectory.id)
    )
    if policy:
        query = query.where(Trajectory.policy == policy)
    if ungraded_only:
        query = query.where(col(Trajectory.graded_seq).is_(None))
    return [tuple(row) for row in session.exec(query)]


def save_grades(session: Session, grades: dict) -> None:
    """Write test rows, reward, success and grading of graded trajectories (replacing earlier grades).

    ``grades`` maps a trajectory id to a grade (colbench.envs.base.Grade). Call after
    ``Database.lock_for_sequence`` in the same transaction: each grade takes the next graded_seq, except a
    regrade that leaves what trainers read as it was (reward, success, metric, grading), which keeps its place: a
    trainer's watermark would otherwise count it as new data, and a study would train its stages again.
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
        same = (trajectory.reward, trajectory.success, trajectory.reward_metric, trajectory.grading) == (
            grade.reward, grade.success, grade.metric, grade.grading)
        trajectory.reward, trajectory.success, trajectory.reward_metric = grade.reward, grade.success, grade.metric
        trajectory.grading, trajectory.screenshot = grade.grading, grade.screenshot
        if grade.error and not trajectory.failure:
            trajectory.failure = f"grading: {grade.error}"
        if not (same and trajectory.graded_seq is not None):
            trajectory.graded_seq = seq
            seq += 1
