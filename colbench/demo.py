"""`make demo`'s last words: what its rollout did, and where to go next, one line each.

    python -m colbench.demo [--run demo] [--db URL]

reads the demo's rollout run from the store (``$COLBENCH_DB``, else ``colbench.db`` here)
and names its trajectories for `colbench inspect`, the viewer, and the way to a model that
learns: backend-lite, the warm start's commands and the study's script.
"""
from __future__ import annotations

import argparse
import os

DEMO_RUN = "demo"

WARM_START = (
    "colbench rollout --engine scripted:expert --tasks backend-lite:train --offset 200 --limit 160 --name demos && "
    "colbench policy fit --algo sft --split lite-train --full --lr 1e-4 --epochs 3 --name warm"
)


def next_steps(db, run: str = DEMO_RUN) -> list[str]:
    """The lines to print after the demo: what its rollout run ``run`` did, then where to go next."""
    from colbench.model_refs import EMBEDDED_REF
    from colbench.runs import details, named
    from colbench.store import queries

    row = details(db, run)
    with db.read() as session:
        ids = sorted(queries.rollout_trajectory_ids(session, int(row["ref"].partition(":")[2])))
        found = queries.trajectories_by_id(session, ids)
    graded = [found[i] for i in ids if found[i].reward is not None]
    tasks = len({found[i].task_id for i in ids})
    solved = sum(bool(t.success) for t in graded)
    passed = sum(t.reward for t in graded) / len(graded) if graded else 0.0
    shown = [str(i) for i in ids]
    others = f" (the others: {', '.join(shown[1:9])}{', …' if len(shown) > 9 else ''})" if len(shown) > 1 else ""
    width = 34
    embedded = row["policy"] == EMBEDDED_REF
    who = "SmolLM2-135M-Instruct, the embedded model, on this CPU," if embedded else row["policy"]
    lines = [
        "",
        f"What you just saw: {who} held {len(ids)} dialogues with the built-in simulated human on"
        f" {tasks} {row['tasks']} tasks, and the sandbox ran each final answer against the task's hidden tests:"
        f" {solved} of {len(graded)} solved, {passed:.1%} of the tests passed ({named(row['ref'], row['name'])})."
        + (" These tasks are beyond a 135M model: backend-lite, below, is a setting it can learn." if embedded else ""),
        "Where to go next:",
    ]
    if shown:
        lines.append(
            f"  {'colbench inspect ' + shown[0]:<{width}} one dialogue turn by turn, with its answer and tests{others}"
        )
    lines += [
        f"  {'colbench view':<{width}} the whole store in a browser, at http://127.0.0.1:8765/",
        (
            f"  {'backend-lite':<{width}} tasks a small model can learn: README.md, \"A setting a small model can"
            " learn: backend-lite\""
        ),
        f"  {'the warm start (about 8 min)':<{width}} {WARM_START}",
        (
            f"  {'bash scripts/lite_study.sh base':<{width}} the study's first stage (the same two, in its own store);"
            " then validate, final"
        ),
    ]
    return lines


def main(argv: list[str] | None = None) -> None:
    from colbench.store.db import Database

    parser = argparse.ArgumentParser(prog="python -m colbench.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--run", default=DEMO_RUN, help="the demo's rollout run (a name or rollout:<id>)")
    parser.add_argument("--db", default=os.environ.get("COLBENCH_DB"),
                        help="the store (default: $COLBENCH_DB, else colbench.db here)")
    args = parser.parse_args(argv)
    for line in next_steps(Database(args.db), args.run):
        print(line)


if __name__ == "__main__":
    main()
