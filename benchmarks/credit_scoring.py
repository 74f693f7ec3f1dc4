"""What a model credit costs per same-state candidate on the embedded model (SmolLM2-135M, CPU): each candidate's
turn read alone, its sequences batched over their shared prefix (ChatScorer.contrasts), against the plain way, every
turn of the candidate's dialogue scored one sequence at a time, measured in the same run on the same candidates.

The candidates are backend-lite's own: at every agent turn of scripted dialogues (an agent that asks for facts and
skips some, `scripted:mixed@0.6`), the task's fact questions and its reference answer, each with the built-in human's
reply, as `colbench credit eval --pairs-from` scores a candidates run. Both ways must give the same values (within
float tolerance); the ratio is the plain way's seconds over the batched way's.

    .venv/bin/python benchmarks/credit_scoring.py                    # ref-infogain, 6 dialogues
    .venv/bin/python benchmarks/credit_scoring.py --credit infogain --dialogues 4
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path


def candidate_states(db, dialogues: int, sandbox: str) -> list:
    """backend-lite's own candidates in ``db``: ``dialogues`` scripted dialogues, and at each of their agent turns the
    task's first three fact questions and its reference answer (the states `credit eval --pairs-from` scores)."""
    from colbench.engines.scripted import answer_text
    from colbench.rollout import run as rollout
    from colbench.rollout_config import RolloutConfig
    from colbench.store import queries
    from colbench.tasks.lite import facts_of
    from colbench.training.credit import State, stored_dialogues

    rollout(db, RolloutConfig(engine="scripted:mixed@0.6", tasks="backend-lite:train", limit=dialogues,
                              sandbox=sandbox))
    with db.read() as session:
        ids = [i for i, _ in queries.graded_trajectory_ids(session, family="backend", split="lite-train")]
    return [State(d, k, [f.question for f in facts_of(d.task)[:3]] + [answer_text(d.task.ground_truth)])
            for d in stored_dialogues(db, ids) for k in range(len(d.agent_turns))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--credit", default="ref-infogain", choices=("ref-infogain", "infogain"))
    parser.add_argument("--dialogues", type=int, default=6)
    parser.add_argument("--batch-size", type=int, default=8)
    args = parser.parse_args()

    from colbench.store.db import Database
    from colbench.training.credit import CreditConfig, candidate_values, make_credit

    with tempfile.TemporaryDirectory() as folder:
        db = Database(f"sqlite:///{Path(folder) / 'bench.db'}")
        states = candidate_states(db, args.dialogues, sandbox="none")
        candidates = sum(len(s.candidates) for s in states)

        class EveryTurnAlone:
            """The plain way: the candidate's whole dialogue scored (its last turn kept), a sequence at a time."""

            def __init__(self, credit):
                self.credit = credit

            def last_values(self, dialogues):
                return [row[-1] if row else None for row in self.credit.values(dialogues)]

        timings, values = {}, {}
        for way, batch in (("plain", 1), ("batched", args.batch_size)):
            credit = make_credit(args.credit, db, CreditConfig(device="cpu", batch_size=batch))
            try:
                scorer = EveryTurnAlone(credit) if way == "plain" else credit
                started = time.perf_counter()
                values[way] = [v for row in candidate_values(scorer, states) for v in row]
                timings[way] = time.perf_counter() - started
            finally:
                credit.close()
        worst = max(abs(a - b) for a, b in zip(values["plain"], values["batched"]))
        print(f"{args.credit}: {len(states)} states, {candidates} candidates "
              f"(the built-in human's replies included in both)")
        for way in ("plain", "batched"):
            print(f"  {way:8s} {timings[way]:7.1f} s  {timings[way] / candidates:.3f} s a candidate")
        print(f"  ratio plain/batched {timings['plain'] / timings['batched']:.2f}x; largest value difference "
              f"{worst:.2e}")


if __name__ == "__main__":
    main()
