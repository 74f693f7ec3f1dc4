"""GRPO on ColBench with TRL: the policy talks with colbench's simulated human through one tool and is rewarded by
colbench's grader (hidden tests in the sandbox, official metric), every dialogue recorded into a colbench store.

    pip install 'colbench[integrations]'
    python examples/trl_grpo_colbench.py --model ./my-model --tasks backend-lite:train --steps 50
    colbench --db sqlite:///trl-run.db eval --tasks backend-lite:train     # each step's dialogues, as a run

The model's chat template must be one TRL parses tool calls of (Qwen2.5/Qwen3, Llama 3.1/3.2, ...): see
docs/integrations.md.
"""
from __future__ import annotations

import argparse
import sys


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="a local model folder (or a hub id, where a hub is reachable)")
    parser.add_argument("--tasks", default="backend-lite:train", help="a colbench task selector")
    parser.add_argument("--simulator", default="builtin", help="builtin, or endpoint:<base_url>#<model>")
    parser.add_argument("--db", default="sqlite:///trl-run.db", help="the store: tasks and recorded dialogues")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--group", type=int, default=4, help="GRPO's num_generations: dialogues per task per step")
    parser.add_argument("--output", default="trl-grpo-colbench")
    args = parser.parse_args()

    from colbench.errors import ColbenchError

    try:
        from colbench.integrations.trl import ColBenchTRL
    except ColbenchError as err:  # TRL missing: one line naming the extra that installs it
        print(f"error: {err}", file=sys.stderr)
        return 1
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    colbench = ColBenchTRL(args.tasks, group_size=args.group, simulator=args.simulator, db=args.db, record=True,
                           policy=f"trl:{args.output}")
    try:
        trainer = GRPOTrainer(
            model=AutoModelForCausalLM.from_pretrained(args.model),
            processing_class=AutoTokenizer.from_pretrained(args.model),
            reward_funcs=colbench.reward,  # colbench's grade of each finished dialogue
            environment_factory=colbench.environment,  # one dialogue per rollout; the environment draws the tasks
            args=GRPOConfig(output_dir=args.output, max_steps=args.steps, num_generations=args.group,
                            per_device_train_batch_size=args.group, max_completion_length=2048,
                            max_tool_calling_iterations=10, logging_steps=1),  # 10: the protocol's turn limit
        )
        trainer.train()
    finally:
        colbench.close()  # waits until every dialogue is in the store
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
