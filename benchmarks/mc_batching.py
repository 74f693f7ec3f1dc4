"""What `mc` costs per same-state candidate on the embedded model (SmolLM2-135M, CTranslate2 on the CPU): the
continuations of a chunk's candidates played together, one engine call per round (MonteCarloCredit.fill), against
one candidate's dialogue at a time (K continuations per call), measured in the same run on the same candidates.

The candidates are benchmarks/credit_scoring.py's: at every agent turn of scripted backend-lite dialogues, the task's
fact questions and its reference answer, each with the built-in human's reply. The values are samples, so the two
ways differ in them; each way's mean value is printed beside its seconds.

    .venv/bin/python benchmarks/mc_batching.py                       # 4 states' candidates, K = 2, 32 tokens a turn
    .venv/bin/python benchmarks/mc_batching.py --states 8 --mc-samples 4 --max-new-tokens 256
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from credit_scoring import candidate_states  # noqa: E402  (the same candidates as the model credits' benchmark)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--states", type=int, default=4, help="agent turns whose candidates are valued")
    parser.add_argument("--mc-samples", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    args = parser.parse_args()

    from colbench.store.db import Database
    from colbench.training.credit import CreditConfig, candidate_values, make_credit

    with tempfile.TemporaryDirectory() as folder:
        db = Database(f"sqlite:///{Path(folder) / 'bench.db'}")
        states = candidate_states(db, args.states, sandbox="bwrap")[: args.states]
        candidates = sum(len(s.candidates) for s in states)

        class OneDialogueAtATime:
            """The unbatched way: each candidate's dialogue continued alone."""

            def __init__(self, credit):
                self.credit = credit

            def last_values(self, dialogues):
                return [row[-1] if row else None for d in dialogues for row in self.credit.values([d])]

        print(f"mc (K = {args.mc_samples}, {args.max_new_tokens} tokens a turn): {len(states)} states, "
              f"{candidates} candidates", flush=True)
        timings = {}
        config = CreditConfig(device="cpu", engine="ct2", mc_samples=args.mc_samples,
                              mc_max_new_tokens=args.max_new_tokens, sandbox="bwrap")
        for way in ("alone", "together"):
            credit = make_credit("mc", db, config)
            try:
                scorer = OneDialogueAtATime(credit) if way == "alone" else credit
                started = time.perf_counter()
                values = [v for row in candidate_values(scorer, states) for v in row]
                timings[way] = time.perf_counter() - started
            finally:
                credit.close()
            print(f"  {way:9s} {timings[way]:7.1f} s  {timings[way] / candidates:.3f} s a candidate  "
                  f"mean value {sum(values) / len(values):+.3f}", flush=True)
        print(f"  ratio alone/together {timings['alone'] / timings['together']:.2f}x")


if __name__ == "__main__":
    main()
