"""Re-grading stored answers: the family's environment grades them again (the sandbox and rows rollouts use).

A family re-grades when its grade reads the answer alone (TaskFamily.regrades); another is refused in one line."""
from __future__ import annotations

from colbench.families import family as family_named, registry
from colbench.tasks.rows import spec_of
from colbench.rollout import save_grades
from colbench.progress import Progress
from colbench.store import queries
from colbench.store.db import Database

BATCH = 64


def regrading_families(name: str | None = None) -> list[str]:
    """The families `colbench grade` grades: ``name``'s (refused where it does not re-grade), else every one that
    re-grades."""
    if name is None:
        return [f.name for f in registry().values() if f.regrades]
    if not family_named(name).regrades:
        raise ValueError(f"the {name} family does not re-grade stored answers: its grade reads more of the dialogue"
                         " than the answer (TaskFamily.regrades)")
    return [name]


def regrade(db: Database, env, *, policy: str | None = None, ungraded_only: bool = False,
            on_progress: Progress | None = None) -> dict:
    """Grade every stored answer of ``env``'s family (or only ungraded ones) in ``env`` (its family's, as
    colbench.wiring.build_env makes it), reporting progress after each batch."""
    regrading_families(env.family)
    with db.read() as session:
        work = [
            (t.id, spec_of(task), t.answer)
            for t, task in queries.answers_to_grade(
                session, family=env.family, policy=policy, ungraded_only=ungraded_only)
        ]
    rewards, successes = [], 0
    for start in range(0, len(work), BATCH):
        chunk = work[start : start + BATCH]
        grades = [future.result() for future in [env.grade(spec, answer) for _, spec, answer in chunk]]
        with db.write() as session:
            save_grades(db, session, {trajectory_id: grade for (trajectory_id, _, _), grade in zip(chunk, grades)})
        rewards += [g.reward for g in grades]
        successes += sum(bool(g.success) for g in grades)
        if on_progress:
            on_progress("grade", start + len(chunk), len(work), {})
    return summary(len(rewards), sum(rewards), successes)


def summary(graded: int, reward_sum: float, successes: float) -> dict:
    return {"graded": graded, "mean_reward": reward_sum / graded if graded else 0.0,
            "success_rate": successes / graded if graded else 0.0}


def combined(summaries) -> dict:
    """One summary of several families' (each weighted by how many it graded)."""
    summaries = list(summaries)
    return summary(sum(s["graded"] for s in summaries), sum(s["mean_reward"] * s["graded"] for s in summaries),
                   sum(s["success_rate"] * s["graded"] for s in summaries))
