"""Metrics over stored, graded trajectories: the paper's two backend numbers, with intervals.

"% tests passed" is the mean fraction of a task's tests passed, and "success" the share
of tasks with every test passed. With several samples per task, each task's samples
are averaged first, so every task weighs the same; intervals are 95% percentile
bootstraps over tasks (fixed seed, so the same data gives the same interval).
Best-of-k counts a task solved when any of its first k samples is.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
from sqlmodel import select

from colbench.store.db import Database
from colbench.store.models import Evaluation, Task, Trajectory

BOOTSTRAP_SAMPLES = 2000


@dataclass
class Interval:
    mean: float
    low: float
    high: float


@dataclass
class PolicyEval:
    policy: str
    simulator: str
    n_tasks: int
    n_trajectories: int
    tests_passed: Interval
    success: Interval
    best_of_k: dict[int, float] = field(default_factory=dict)


def bootstrap(values: list[float], seed: int = 0) -> Interval:
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return Interval(float("nan"), float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, data.size, size=(BOOTSTRAP_SAMPLES, data.size))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return Interval(float(data.mean()), float(low), float(high))


def evaluate(
    db: Database,
    family: str,
    split: str,
    *,
    policies: list[str] | None = None,
    simulator: str | None = None,
    max_k: int | None = None,
    record: bool = True,
) -> list[PolicyEval]:
    query = (
        select(Trajectory.policy, Trajectory.simulator, Trajectory.task_id, Trajectory.sample_index, Trajectory.reward, Trajectory.success)
        .join(Task, Task.id == Trajectory.task_id)
        .where(Task.family == family, Task.split == split, Trajectory.graded_seq.is_not(None))
    )
    if policies:
        query = query.where(Trajectory.policy.in_(policies))
    if simulator:
        query = query.where(Trajectory.simulator == simulator)
    grouped: dict[tuple[str, str], dict[int, list[tuple[int, float, bool]]]] = defaultdict(lambda: defaultdict(list))
    with db.read() as session:
        for policy, sim, task_id, index, reward, success in session.exec(query):
            grouped[(policy, sim)][task_id].append((index, reward or 0.0, bool(success)))

    results = []
    for (policy, sim), tasks in sorted(grouped.items()):
        samples = {task_id: sorted(rows) for task_id, rows in tasks.items()}
        rewards = [float(np.mean([r for _, r, _ in rows])) for rows in samples.values()]
        successes = [float(np.mean([s for _, _, s in rows])) for rows in samples.values()]
        most = max(len(rows) for rows in samples.values())
        best = {
            k: float(np.mean([any(s for _, _, s in rows[:k]) for rows in samples.values()]))
            for k in range(1, min(most, max_k or most) + 1)
        }
        results.append(
            PolicyEval(
                policy=policy,
                simulator=sim,
                n_tasks=len(samples),
                n_trajectories=sum(len(rows) for rows in samples.values()),
                tests_passed=bootstrap(rewards),
                success=bootstrap(successes),
                best_of_k=best,
            )
        )
    if record and results:
        with db.write() as session:
            for result in results:
                session.add(
                    Evaluation(
                        policy=result.policy,
                        family=family,
                        split=split,
                        simulator=result.simulator,
                        n_tasks=result.n_tasks,
                        n_trajectories=result.n_trajectories,
                        metrics=as_dict(result),
                    )
                )
    return results


def as_dict(result: PolicyEval) -> dict:
    return {
        "policy": result.policy,
        "simulator": result.simulator,
        "n_tasks": result.n_tasks,
        "n_trajectories": result.n_trajectories,
        "tests_passed": vars(result.tests_passed),
        "success": vars(result.success),
        "best_of_k": {str(k): v for k, v in result.best_of_k.items()},
    }
