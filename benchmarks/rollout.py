"""Rollout overhead: generated tokens/s of a full rollout against bare batched generate.

A full rollout includes the simulated human, the store writes of every turn and the
sandboxed grading. The baseline replays the very conversations the policy saw, in
batches of the same size, through the same engine's `generate` with nothing else.
The ratio is what the orchestration keeps of the engine's speed (target >= 0.8).

    python benchmarks/rollout.py [--model smollm2] [--tasks 8] [--batch-size 8] [--max-new-tokens 48]
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
from colbench.runner import build_engine, select_tasks
from colbench.simulators.builtin import BuiltinSimulator
from colbench.store import queries
from colbench.store.db import Database
from colbench.store.models import Trajectory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--device", default="auto")
    args = parser.parse_args()

    db = Database(f"sqlite:///{Path(tempfile.mkdtemp()) / 'bench.db'}")
    tasks = select_tasks(db, "backend:test", args.tasks)
    engine = build_engine(db, "hf", args.model, device=args.device, max_batch_size=args.batch_size)
    config = RolloutConfig(max_new_tokens=args.max_new_tokens, batch_size=args.batch_size)
    with Grader(sandbox="auto") as grader:
        started = time.perf_counter()
        stats = Rollout(db, engine, BuiltinSimulator(), BackendEnv(grader), config).run(tasks)
        rollout_time = time.perf_counter() - started
    rollout_rate = stats.generated_tokens / rollout_time

    with db.read() as session:
        ids = [t.id for t in session.exec(select(Trajectory))]
        turns = queries.turns_for(session, ids)
    conversations = []
    for trajectory_turns in turns.values():
        for position, turn in enumerate(trajectory_turns):
            if turn.role == "assistant":
                history = [{"role": t.role, "content": t.content} for t in trajectory_turns[:position]]
                system = turn.prompt.split("<|im_start|>system\n", 1)[1].split("<|im_end|>", 1)[0]
                conversations.append([{"role": "system", "content": system}] + history)
    params = SamplingParams(temperature=config.temperature, max_new_tokens=args.max_new_tokens, seed=1)
    generated, started = 0, time.perf_counter()
    for start in range(0, len(conversations), args.batch_size):
        for generation in engine.generate(conversations[start : start + args.batch_size], params):
            generated += generation.samples[0].num_tokens
    bare_time = time.perf_counter() - started
    bare_rate = generated / bare_time

    print(f"full rollout: {stats.generated_tokens} tokens in {rollout_time:.1f} s = {rollout_rate:.1f} tokens/s "
          f"({stats.agent_turns} agent turns, {stats.graded} graded, success {stats.success_rate or 0:.0%})")
    print(f"bare generate on the same {len(conversations)} prompts: {generated} tokens in {bare_time:.1f} s = {bare_rate:.1f} tokens/s")
    print(f"ratio rollout/bare: {rollout_rate / bare_rate:.2f} (target >= 0.8)")


if __name__ == "__main__":
    main()
