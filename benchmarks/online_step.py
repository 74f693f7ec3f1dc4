"""One online GRPO step's time split on the embedded model (SmolLM2-135M, LoRA, CPU), and the step's wall time
against its rollouts alone, measured in the same run.

A grpo run of ``--steps`` steps on backend-lite (the built-in human, the bwrap sandbox) in a scratch store; each
step's figures come from the run itself (sync, rollout with grading, grading's own wall time, the update), once per
--engines engine (hf: the model being trained; ct2: each step's weights converted for CTranslate2). Then, in
the same process, a plain `colbench rollout` of the same number of dialogues with the embedded model through the
same engine (hf) gives the rollouts-alone baseline: the ratio says what online training adds to generating.

    .venv/bin/python benchmarks/online_step.py                     # 2 steps, 2 tasks x 2 dialogues, 64 tokens a turn
    .venv/bin/colbench serve --detach && .venv/bin/python benchmarks/online_step.py --engines hf,openai \
        --base-url http://127.0.0.1:8000/v1                         # a real vLLM server (the CPU build here)
    .venv/bin/python benchmarks/online_step.py --engines ct2 --model CHECKPOINT_FOLDER --full --lr 3e-6 \
        --batch-size 4 --tasks-per-step 4 --group 4 --max-new-tokens 256 --turn-credit ref-infogain
                                                  # study 4's online step (studies/backend-lite-4/plan.md, "Budget")
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path


MISMATCH = ("mismatch_mean", "mismatch_max", "mismatch_kl", "tis_capped", "sampler_ratio")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--tasks-per-step", type=int, default=2)
    parser.add_argument("--group", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--sandbox", default="bwrap")
    parser.add_argument("--engines", default="hf,ct2", help="the online engines to run, one after the other")
    parser.add_argument("--base-url", help="the vLLM server of --engines openai (`colbench serve --detach` starts one)")
    parser.add_argument("--model", help="the policy to start from (a folder; default the embedded model)")
    parser.add_argument("--full", action="store_true", help="full fine-tuning instead of LoRA")
    parser.add_argument("--lr", type=float, help="the learning rate (default the trainer's)")
    parser.add_argument("--batch-size", type=int, help="dialogues a minibatch (default the trainer's)")
    parser.add_argument("--turn-credit", default="none", help="a turn credit (`colbench credit ls`): credit_s")
    args = parser.parse_args()

    from colbench.rollout import run as rollout
    from colbench.rollout_config import RolloutConfig
    from colbench.store import queries
    from colbench.store.db import Database
    from colbench.training.config import PolicyConfig
    from colbench.training.policy import fit_policy

    runs = {}
    with tempfile.TemporaryDirectory() as folder:
        db = Database(f"sqlite:///{Path(folder) / 'bench.db'}")
        for engine in args.engines.split(","):
            config = PolicyConfig(tasks="backend-lite:train", steps=args.steps, tasks_per_step=args.tasks_per_step,
                                  group=args.group, max_new_tokens=args.max_new_tokens, sandbox=args.sandbox,
                                  device="cpu", save_every=args.steps, engine=engine, name=f"online-{engine}",
                                  base_url=args.base_url if engine == "openai" else None, full=args.full,
                                  lr=args.lr, batch_size=args.batch_size, turn_credit=args.turn_credit)
            started = time.perf_counter()
            result = fit_policy(db, config, algo="grpo", base_model=args.model)
            wall = time.perf_counter() - started
            with db.read() as session:
                runs[engine] = wall, [s.values for s in queries.training_steps(session, result.run_id)]
        dialogues = args.steps * args.tasks_per_step * args.group
        started = time.perf_counter()
        model = {"model": args.model} if args.model else {}
        alone = rollout(db, RolloutConfig(engine="hf", tasks="backend-lite:train", limit=args.tasks_per_step, **model,
                                          samples_per_task=args.group * args.steps, max_new_tokens=args.max_new_tokens,
                                          sandbox=args.sandbox, device="cpu", seed=7))
        baseline = time.perf_counter() - started
        db.close()
    print(f"grpo, {args.steps} steps x {args.tasks_per_step} tasks x {args.group} dialogues, {args.max_new_tokens}"
          f" tokens a turn, {args.model or 'SmolLM2-135M'} {'full' if args.full else 'LoRA'} on the CPU, turn credit"
          f" {args.turn_credit}")
    keys = ("sync_s", "rollout_s", "grading_s", "credit_s", "train_s", "step_s")
    for engine, (wall, steps) in runs.items():
        print(f"--engine {engine}")
        print("step  " + "  ".join(f"{k:>10}" for k in keys) + "  tokens/turn  turns/dialogue")
        for number, values in enumerate(steps, start=1):
            print(f"{number:>4}  " + "  ".join(f"{values.get(k, 0):10.2f}" for k in keys)
                  + f"  {values['tokens_per_turn']:11.1f}  {values['agent_turns_per_dialogue']:14.1f}")
        # How far the engine's log-probs are from the trainer's on the same weights (π_sampler against π_old).
        print("step  " + "  ".join(f"{k:>14}" for k in MISMATCH))
        for number, values in enumerate(steps, start=1):
            print(f"{number:>4}  " + "  ".join(f"{values.get(k, 0):14.2e}" for k in MISMATCH))
        tokens = sum(v["tokens_per_turn"] * v["agent_turns_per_dialogue"] * dialogues / args.steps for v in steps)
        rolling = sum(v["rollout_s"] for v in steps)
        print(f"online run: {wall:.1f} s for {dialogues} dialogues (model load and sandbox start included);"
              f" {tokens / rolling:.1f} agent tokens/s while rolling out")
    print(f"rollouts alone (hf engine, same model, {alone.stats.finished} dialogues): {baseline:.1f} s")
    for engine, (wall, _) in runs.items():
        print(f"online --engine {engine} / rollouts alone: {wall / baseline:.2f}x")


if __name__ == "__main__":
    main()
