"""Re-grading stored answers: the same sandbox and rows as rollouts use."""
from __future__ import annotations

from colbench.families.backend import BackendEnv, BackendFamily
from colbench.tasks.rows import spec_of
from colbench.rollout import save_grades
from colbench.progress import Progress
from colbench.store import queries
from colbench.store.db import Database

BATCH = 64


def regrade(db: Database, grader, *, policy: str | None = None, ungraded_only: bool = False,
            on_progress: Progress | None = None) -> dict:
    """Grade every stored backend answer (or only ungraded ones), reporting progress after each batch."""
    with db.read() as session:
        work = [
            (t.id, spec_of(task), t.answer)
            for t, task in queries.answers_to_grade(
                session, family=BackendFamily.name, policy=policy, ungraded_only=ungraded_only)
        ]
    env = BackendEnv(grader)
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
    n = len(rewards)
    return {"graded": n, "mean_reward": sum(rewards) / n if n else 0.0, "success_rate": successes / n if n else 0.0}
