"""Metrics over stored, graded trajectories, with intervals.

Backend: "% tests passed" is the mean fraction of a task's tests passed, and "success"
the share of tasks with every test passed. Frontend: the mean similarity of the final
page to the reference, under the metric it was graded with (named in every output:
CLIP only when CLIP weights were used), and the win rate against each other policy on
the tasks both have: per task, the page closer to the reference wins, ties count half.

One row per policy, simulator, rollout setting (e.g. a shorter turn limit, best-of-N),
reward metric and, for backend, grading (official or strict, see grading/semantics.py):
rollouts made or graded differently are never pooled.

With several samples per task, each task's samples are averaged first, so every task
weighs the same; intervals are 95% percentile bootstraps over tasks (fixed seed, so the
same data gives the same interval).

pass@k and pass^k (backend) use every sample, not the first k: with n samples of a task
of which c succeed, pass@k = 1 - C(n-c, k)/C(n, k) is the unbiased estimate of the chance
that at least one of k fresh samples succeeds (Chen et al., 2021), and pass^k = C(c, k)/C(n, k)
that all k do (tau-bench's reliability); both are averaged over tasks, for k up to the
fewest samples any task has. pass@1 = pass^1 = success.

Every graded trajectory counts, including those where the simulated human failed to
reply on some turn (as officially, the dialogue went on with "No response."); each row
says how many of its trajectories had such a turn.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from math import comb

import numpy as np
from colbench.families import family as family_named
from colbench.runs import labelled
from colbench.store import queries
from colbench.store.db import Database

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
    setting: str  # what else shaped the rollouts (e.g. max=128, best-of-16:ckpt:3); "" for the protocol's defaults
    metric: str  # "tests" (reward = fraction of tests passed) or the page similarity's name
    grading: str | None  # backend: the grading semantics ("official" | "strict"); None for frontend
    n_tasks: int
    n_trajectories: int
    reward: Interval  # % tests passed (backend) or mean similarity (frontend)
    success: Interval | None = None  # backend only
    pass_at_k: dict[int, float] = field(default_factory=dict)  # backend only: at least one of k samples succeeds
    pass_hat_k: dict[int, float] = field(default_factory=dict)  # backend only: all k samples succeed
    win_rate: dict[str, float] = field(default_factory=dict)  # frontend: other policy → share of tasks won
    simulator_failures: int = 0  # trajectories with a human turn the simulator failed to write ("No response.")
    task_rewards: dict[int, float] = field(default_factory=dict, repr=False)

    @property
    def label(self) -> str:
        """The policy, with its setting when it has one: rollouts under different settings are different rows."""
        return labelled(self.policy, self.setting)


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
    setting: str | None = None,
    max_k: int | None = None,
    grading: str | None = None,
    record: bool = True,
) -> list[PolicyEval]:
    owner = family_named(family)
    grouped: dict[tuple, dict[int, list[tuple[int, float, bool]]]] = defaultdict(lambda: defaultdict(list))
    no_replies: dict[tuple, int] = defaultdict(int)
    with db.read() as session:
        outcomes = queries.graded_outcomes(
            session, family=family, split=split, policies=policies, simulator=simulator, setting=setting,
            grading=grading
        )
        for policy, sim, how, metric, task_id, index, reward, success, failed, graded_by in outcomes:
            key = (policy, sim, how or "", metric or "unnamed", graded_by or "")
            grouped[key][task_id].append((index, reward or 0.0, None if success is None else bool(success)))
            no_replies[key] += bool(failed)

    results = []
    for key, tasks in sorted(grouped.items()):
        policy, sim, how, metric, graded_by = key
        samples = {task_id: sorted(rows) for task_id, rows in tasks.items()}
        rewards = {task_id: float(np.mean([r for _, r, _ in rows])) for task_id, rows in samples.items()}
        result = PolicyEval(
            policy=policy,
            simulator=sim,
            setting=how,
            metric=metric,
            grading=graded_by or None,
            n_tasks=len(samples),
            n_trajectories=sum(len(rows) for rows in samples.values()),
            reward=bootstrap(list(rewards.values())),
            simulator_failures=no_replies[key],
            task_rewards=rewards,
        )
        # Success, pass@k and pass^k exist where every trajectory was solved or not (not where a page is graded by
        # its likeness alone).
        if all(s is not None for rows in samples.values() for _, _, s in rows):
            result.success = bootstrap([float(np.mean([s for _, _, s in rows])) for rows in samples.values()])
            counts = [(len(rows), sum(s for _, _, s in rows)) for rows in samples.values()]
            fewest = min(n for n, _ in counts)
            for k in range(1, min(fewest, max_k or fewest) + 1):
                result.pass_at_k[k] = float(np.mean([pass_at_k(n, c, k) for n, c in counts]))
                result.pass_hat_k[k] = float(np.mean([pass_hat_k(n, c, k) for n, c in counts]))
        results.append(result)
    if owner.headline_metric == "reward":  # no task is solved or not: policies are compared task by task
        for result in results:
            for other in results:
                if other is not result and other.metric == result.metric:
                    rate = win_rate(result.task_rewards, other.task_rewards)
                    if rate is not None:
                        result.win_rate[other.label] = rate
    if record and results and not db.read_only:  # a read-only store is evaluated, not recorded to
        with db.write() as session:
            queries.add_evaluations(session, (
                {"policy": r.policy, "family": family, "split": split, "simulator": r.simulator,
                 "n_tasks": r.n_tasks, "n_trajectories": r.n_trajectories, "metrics": as_dict(r)}
                for r in results
            ))
    return results


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased chance that at least one of k samples (of n drawn, c successful) succeeds."""
    return 1.0 - comb(n - c, k) / comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Unbiased chance that all k samples (of n drawn, c successful) succeed."""
    return comb(c, k) / comb(n, k)


def win_rate(mine: dict[int, float], theirs: dict[int, float]) -> float | None:
    """Share of common tasks where my page is closer to the reference; a tie counts half."""
    common = mine.keys() & theirs.keys()
    if not common:
        return None
    return sum(1.0 if mine[t] > theirs[t] else 0.5 if mine[t] == theirs[t] else 0.0 for t in common) / len(common)


def as_dict(result: PolicyEval) -> dict:
    return {
        "policy": result.policy,
        "simulator": result.simulator,
        "setting": result.setting,
        "metric": result.metric,
        "grading": result.grading,
        "n_tasks": result.n_tasks,
        "n_trajectories": result.n_trajectories,
        "reward": vars(result.reward),
        "success": vars(result.success) if result.success else None,
        "pass_at_k": {str(k): v for k, v in result.pass_at_k.items()},
        "pass_hat_k": {str(k): v for k, v in result.pass_hat_k.items()},
        "win_rate": result.win_rate,
        "simulator_failures": result.simulator_failures,
    }
