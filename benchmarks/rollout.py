"""Rollout overhead: generated tokens/s of a full rollout against bare batched generate.

A full rollout includes the simulated human, the store writes of every turn and the
sandboxed grading. The baseline replays the very conversations the policy saw, in
batches of the same size, through the same engine's `generate` with nothing else.
The ratio is what the orchestration keeps of the engine's speed (target >= 0.8).

    python benchmarks/rollout.py [--model smollm2] [--tasks 4] [--batch-size 4] [--max-new-tokens 24] [--rounds 2]
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from sqlmodel import select

from colbench.engines.base import SamplingParams
from colbench.envs.backend import BackendEnv
from colbench.grading.grader import Grader
from colbench.rollout import Rollout, RolloutConfig
from colbench.wiring import build_engine, select_tasks
from colbench.simulators.rulebased.backend import BuiltinSimulator
from colbench.store import queries
from colbench.store.db import Database
from colbench.store.models import Trajectory


def replay_conversations(db, trajectory_ids) -> list[list[dict]]:
    """The exact conversations the policy saw at each of its turns."""
    with db.read() as session:
        turns = queries.turns_for(session, trajectory_ids)
    conversations = []
    for trajectory_turns in turns.values():
        for position, turn in enumerate(trajectory_turns):
            if turn.role == "assistant":
                history = [{"role": t.role, "content": t.content} for t in trajectory_turns[:position]]
                system = turn.prompt.split("<|im_start|>system\n", 1)[1].split("<|im_end|>", 1)[0]
                conversations.append([{"role": "system", "content": system}] + history)
    # Turn by turn across trajectories, as the rollout batched them (all first turns, then all second ...).
    return sorted(conversations, key=len)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--tasks", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--rounds", type=int, default=2, help="rollout and bare replay alternate, so load drift hits both")
    parser.add_argument("--device", default="auto")
    args = parser.parse_args()

    db = Database(f"sqlite:///{Path(tempfile.mkdtemp()) / 'bench.db'}")
    tasks = select_tasks(db, "backend:test", args.tasks)
    engine = build_engine(db, "hf", args.model, device=args.device, max_batch_size=args.batch_size)
    totals = {"rollout": [0, 0.0], "bare": [0, 0.0]}  # tokens, seconds
    with Grader(sandbox="auto") as grader:
        for round_ in range(args.rounds):
            # One more sample per task each round: the rollout fills only the new slots.
            config = RolloutConfig(max_new_tokens=args.max_new_tokens, batch_size=args.batch_size, seed=round_, samples_per_task=round_ + 1)
            before = time.perf_counter()
            stats = Rollout(db, engine, BuiltinSimulator(), BackendEnv(grader), config).run(tasks)
            totals["rollout"][0] += stats.generated_tokens
            totals["rollout"][1] += time.perf_counter() - before
            with db.read() as session:
                ids = [t.id for t in session.exec(select(Trajectory).where(Trajectory.seed == round_))]
            conversations = replay_conversations(db, ids)
            params = SamplingParams(temperature=config.temperature, max_new_tokens=args.max_new_tokens, seed=round_)
            before = time.perf_counter()
            for start in range(0, len(conversations), args.batch_size):
                for generation in engine.generate(conversations[start : start + args.batch_size], params):
                    totals["bare"][0] += generation.samples[0].num_tokens
            totals["bare"][1] += time.perf_counter() - before

    rates = {name: tokens / seconds for name, (tokens, seconds) in totals.items()}
    for name, (tokens, seconds) in totals.items():
        print(f"{name:>7}: {tokens} generated tokens in {seconds:.1f} s = {rates[name]:.2f} tokens/s")
    print(f"ratio rollout/bare: {rates['rollout'] / rates['bare']:.2f} (target >= 0.8), over {args.rounds} alternating rounds")


if __name__ == "__main__":
    main()
