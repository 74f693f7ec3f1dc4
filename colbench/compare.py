"""Two policies or rollout runs on the tasks both were graded on: is B better than A?

Per task, each side's score is the mean over its samples (success, or the reward: share
of tests passed, page similarity). On the common tasks:

- **difference**: mean over tasks of B − A, with a 95% paired bootstrap interval (tasks
  resampled together, so the task-to-task spread that both sides share cancels);
- **p-value**: a paired sign-flip permutation test of "A and B are exchangeable on every
  task" (exact over all 2^n flips up to 16 tasks, 20,000 seeded random flips beyond);
- **flips**: tasks that every sample of one side solves and every sample of the other
  fails, each way; and how many tasks moved up, down or not at all;
- **run-to-run noise**: how far two runs of the *same* policies would differ from sampling
  alone, measured from the repeated samples: with m samples of a task whose outcomes vary
  with variance s², a side's mean over n tasks has variance Σ s²/m / n². The difference is
  said to exceed the noise when it is beyond 1.96 of its standard deviation. It needs at
  least 2 samples per task on both sides (rollout -k 2).
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from itertools import product

import numpy as np

from colbench.eval import BOOTSTRAP_SAMPLES, Interval
from colbench.errors import ColbenchError
from colbench.families import family_of_selector

EXACT_UP_TO = 16
RANDOM_FLIPS = 20_000
METRICS = ("success", "reward")


class NothingToCompare(ColbenchError, ValueError):
    pass


@dataclass
class Side:
    label: str  # what the user named, resolved: rollout:3 (name) or a policy [setting]
    tasks: str  # family:split
    samples: dict[int, list[tuple[float, float]]] = field(
        default_factory=dict
    )  # task id → per-sample (success, reward)

    def scores(self, metric: str) -> dict[int, list[float]]:
        pick = 0 if metric == "success" else 1
        return {task: [sample[pick] for sample in samples] for task, samples in self.samples.items()}


def default_metric(side: Side) -> str:
    """The family's headline: success for backend; for frontend, where a page is not solved or not, the similarity."""
    return family_of_selector(side.tasks).headline_metric


@dataclass
class Comparison:
    a: Side
    b: Side
    metric: str
    n_tasks: int
    mean_a: float
    mean_b: float
    difference: Interval  # B − A
    p_value: float
    exact: bool  # the permutation test enumerated every flip
    better: int  # tasks where B's mean is higher
    worse: int
    same: int
    gained: list[int]  # tasks B always solves and A never does
    lost: list[int]  # tasks A always solves and B never does
    noise_sd: float | None  # sd of B − A from sampling alone; None without repeated samples
    exceeds_noise: bool | None

    def as_dict(self) -> dict:
        return {
            "a": self.a.label, "b": self.b.label, "tasks": self.a.tasks, "metric": self.metric, "n_tasks": self.n_tasks,
            "mean_a": self.mean_a, "mean_b": self.mean_b, "difference": vars(self.difference), "p_value": self.p_value,
            "exact_test": self.exact, "better": self.better, "worse": self.worse, "same": self.same,
            "gained": self.gained, "lost": self.lost, "noise_sd": self.noise_sd, "exceeds_noise": self.exceeds_noise,
        }


def side_of(db, ref: str, *, tasks: str | None, setting: str) -> Side:
    """A rollout run (rollout:<id> or its name), or a policy's graded trajectories on ``tasks``
    under ``setting`` (the protocol's defaults: "")."""
    from colbench.model_refs import checkpoint_part, stored_ref
    from colbench.runs import RunNotFound, labelled, named, resolve
    from colbench.store import queries
    from colbench.wiring import parse_task_selector

    is_checkpoint = checkpoint_part(ref) is not None  # a policy here, stored by id, not the training run that made it
    if is_checkpoint:
        ref = stored_ref(db, ref)
    with db.read() as session:
        try:
            found = None if is_checkpoint else resolve(session, ref)
        except RunNotFound:
            found = None
        if found is not None and found.kind != "rollout":
            raise NothingToCompare(f"{ref} is a {found.kind} run: compare rollout runs or policies")
        if found is not None:
            ((run, _),) = queries.rollout_runs(session, run_id=found.id)
            family, split = run.tasks.split(":", 1)
            rows = queries.graded_outcomes(session, family=family, split=split, rollout_id=run.id)
            label = named(f"rollout:{run.id}", run.name)
        else:
            family, split = parse_task_selector(tasks or "backend:test")
            rows = queries.graded_outcomes(session, family=family, split=split, policies=[ref], setting=setting)
            label = labelled(ref, setting)
            if not rows:  # the usual slip: the policy's rollouts carry a setting the command did not name
                others = [
                    how
                    for fam, spl, policy, how, _ in queries.graded_groups(session)
                    if (fam, spl, policy) == (family, split, ref)
                ]
                if others:
                    raise NothingToCompare(
                        f"{label} has no graded trajectories on {family}:{split}; {ref} has some under "
                        + ", ".join(f"--setting {how!r}" for how in others)
                    )
    gradings = {row[9] for row in rows} - {None}
    if len(gradings) > 1:
        raise NothingToCompare(
            f"{label} holds grades made under {' and '.join(sorted(gradings))}: regrade one way first (colbench grade"
            " --grading)"
        )
    side = Side(label, f"{family}:{split}")
    by_task: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for *_, task_id, _index, reward, success, _failed, _grading in rows:
        by_task[task_id].append((float(bool(success)), float(reward or 0.0)))
    side.samples = dict(by_task)
    if not side.samples:
        raise NothingToCompare(f"{label} has no graded trajectories on {family}:{split}")
    return side


def compare(a: Side, b: Side, metric: str | None = None, seed: int = 0) -> Comparison:
    metric = metric or default_metric(a)
    if metric not in METRICS:
        raise NothingToCompare(f"metric must be {' or '.join(METRICS)}; got {metric!r}")
    if a.tasks != b.tasks:
        raise NothingToCompare(
            f"{a.label} ran on {a.tasks} and {b.label} on {b.tasks}: compare runs on the same task set"
        )
    common = sorted(a.samples.keys() & b.samples.keys())
    if not common:
        raise NothingToCompare(f"{a.label} and {b.label} share no graded task")
    scores_a, scores_b = a.scores(metric), b.scores(metric)
    mean_a = np.array([np.mean(scores_a[t]) for t in common])
    mean_b = np.array([np.mean(scores_b[t]) for t in common])
    diff = mean_b - mean_a
    rng = np.random.default_rng(seed)
    resampled = diff[rng.integers(0, diff.size, size=(BOOTSTRAP_SAMPLES, diff.size))].mean(axis=1)
    low, high = np.percentile(resampled, [2.5, 97.5])
    p_value, exact = sign_flip_p_value(diff, rng)
    noise = _noise_sd(scores_a, scores_b, common)
    return Comparison(
        a=a, b=b, metric=metric, n_tasks=len(common), mean_a=float(mean_a.mean()), mean_b=float(mean_b.mean()),
        difference=Interval(float(diff.mean()), float(low), float(high)), p_value=p_value, exact=exact,
        better=int((diff > 0).sum()), worse=int((diff < 0).sum()), same=int((diff == 0).sum()),
        gained=[t for t, x, y in zip(common, mean_a, mean_b) if x == 0 and y == 1 and metric == "success"],
        lost=[t for t, x, y in zip(common, mean_a, mean_b) if x == 1 and y == 0 and metric == "success"],
        noise_sd=noise, exceeds_noise=None if noise is None else bool(abs(diff.mean()) > 1.96 * noise),
    )


def sign_flip_p_value(diff: np.ndarray, rng) -> tuple[float, bool]:
    """Two-sided: the share of sign flips of the per-task differences whose mean is at least as far from 0."""
    observed = abs(diff.mean())
    if not diff.any():
        return 1.0, True
    if diff.size <= EXACT_UP_TO:
        signs = np.array(list(product((1.0, -1.0), repeat=diff.size)))
        exact = True
    else:
        signs = rng.choice((1.0, -1.0), size=(RANDOM_FLIPS, diff.size))
        exact = False
    means = np.abs((signs * diff).mean(axis=1))
    hits = int((means >= observed - 1e-12).sum())
    # A random test counts the observed assignment too, so p is never 0.
    return (hits / len(signs), True) if exact else ((hits + 1) / (len(signs) + 1), False)


def _noise_sd(a: dict[int, list[float]], b: dict[int, list[float]], common: list[int]) -> float | None:
    """sd of (mean of B − mean of A) over ``common`` tasks from sampling alone (None with one sample of some task)."""
    variance = 0.0
    for scores in (a, b):
        if any(len(scores[t]) < 2 for t in common):
            return None
        variance += sum(np.var(scores[t], ddof=1) / len(scores[t]) for t in common) / len(common) ** 2
    return float(np.sqrt(variance))
