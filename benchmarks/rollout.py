"""The embedded rollout's speed, per local engine: two figures from one run.

1. Engines (``--engines-only``, or the first part of a full run): generated tokens/s of bare
   batched `generate` on the same prompts (a backend rollout's: the system prompt, a
   built-in task, 0-3 earlier exchanges), at the protocol's temperature 1.0, for
   transformers `generate` itself, our transformers engine (`--engine hf`), and
   CTranslate2 in float32 and int8 (`--engine ct2`). Target: ct2 float32 >= 4x
   transformers `generate`.
2. Orchestration (a full run): generated tokens/s of a full rollout (simulated human, store
   writes of every turn, sandboxed grading) against a bare replay of the very
   conversations the policy saw, in batches of the same size, through the same engine.
   Target: rollout / bare >= 0.8 for each local engine.

Each measurement runs in a process of its own: torch's OpenMP threads, once started, keep
spinning and slow a CTranslate2 engine that runs after them in the same process. Rounds
alternate the engines, so load drift on a shared machine hits them all.

The issue's figures were taken on *loaded* cores. ``--busy 0,2`` (the default) measures
both conditions in one run: idle cores, then with two busy-looping processes beside the
engine (the grader's sandboxes and a simulator compete for the cores in a real rollout).
torch's thread pool degrades far more than CTranslate2's under such contention.

    python benchmarks/rollout.py --engines-only [--busy 0,2] [--max-new-tokens 128] [--rounds 2]
    python benchmarks/rollout.py [--engines hf,ct2-float32] [--tasks 6] [--batch-size 6] [--max-new-tokens 64]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

ENGINES = {  # name: (engine kind or "generate", options)
    "generate": ("generate", {}),
    "hf": ("hf", {}),
    "ct2-float32": ("ct2", {"compute_type": "float32"}),
    "ct2-int8": ("ct2", {"compute_type": "int8"}),
}


# ---------------------------------------------------------------------------- prompts


def benchmark_conversations(count: int) -> list[list[dict]]:
    """Backend conversations as a rollout's policy sees them, prompt lengths varying as they do."""
    from importlib import resources

    from colbench import protocol
    from colbench.families.backend import BACKEND_SYSTEM_PROMPT

    lines = resources.files("colbench.tasks.builtin").joinpath("backend_a.jsonl").read_text().splitlines()
    exchange = [
        {"role": "assistant", "content": "What should the function return when the input is empty or zero?"},
        {"role": "user", "content": "Return 0.0 in that case, and round money to two decimals."},
    ]
    system = BACKEND_SYSTEM_PROMPT.format(turns=protocol.MAX_AGENT_TURNS)
    conversations = []
    for i in range(count):
        task = json.loads(lines[i % len(lines)])
        opening = [{"role": "system", "content": system}, {"role": "user", "content": task["problem_description"]}]
        conversations.append(opening + exchange * (i % 4))
    return conversations


def replay_conversations(db, trajectory_ids) -> list[list[dict]]:
    """The exact conversations the policy saw at each of its turns, shortest first."""
    from colbench.store import queries

    with db.read() as session:
        turns = queries.turns_for(session, trajectory_ids)
    conversations = []
    for trajectory_turns in turns.values():
        for position, turn in enumerate(trajectory_turns):
            if turn.role == "assistant":
                history = [{"role": t.role, "content": t.content} for t in trajectory_turns[:position]]
                system = turn.prompt.split("<|im_start|>system\n", 1)[1].split("<|im_end|>", 1)[0]
                conversations.append([{"role": "system", "content": system}] + history)
    return sorted(conversations, key=len)


# ---------------------------------------------------------------------------- one measurement (a child process)


def make_engine(name: str, model: str, batch_size: int):
    from colbench.engines import make_engine as build

    kind, options = ENGINES[name]
    if kind == "generate":
        return TransformersGenerate(model, batch_size)
    return build(kind, model, device="cpu", max_batch_size=batch_size, **options)


class TransformersGenerate:
    """transformers' own `model.generate` (left-padded batches, scores kept for log-probs),
    the baseline the issue names."""

    def __init__(self, model: str, batch_size: int):
        from colbench.engines.hf import HFEngine

        self.inner = HFEngine(model, device="cpu", max_batch_size=batch_size)
        self.inner.tokenizer.padding_side = "left"
        self.batch_size = batch_size

    def generate(self, conversations, params):
        import torch

        from colbench.engines.base import Generation, Sample

        tokenizer, eos = self.inner.tokenizer, sorted(self.inner.eos_ids)
        results = []
        for start in range(0, len(conversations), self.batch_size):
            texts = [self.inner.render_prompt(c) for c in conversations[start : start + self.batch_size]]
            batch = tokenizer(texts, add_special_tokens=False, return_tensors="pt", padding=True)
            if params.seed is not None:
                torch.manual_seed(params.seed)
            out = self.inner.model.generate(
                **batch, do_sample=True, temperature=params.temperature, top_k=0, top_p=1.0,
                max_new_tokens=params.max_new_tokens, output_scores=True, return_dict_in_generate=True,
                pad_token_id=self.inner.pad_id, eos_token_id=eos,
            )
            for row in out.sequences[:, batch["input_ids"].shape[1] :].tolist():
                ids = row[: next((i + 1 for i, t in enumerate(row) if t in eos), len(row))]
                results.append(Generation(prompt_text="", prompt_tokens=0, samples=[Sample(text="", token_ids=ids)],
                                          latency_s=0.0))
        return results

    def close(self):
        self.inner.close()


def measure_bare(args) -> dict:
    from colbench.engines.base import SamplingParams

    conversations = benchmark_conversations(args.batch_size)
    engine = make_engine(args.one, args.model, args.batch_size)
    engine.generate(conversations[:1], SamplingParams(max_new_tokens=2, seed=0))  # warm-up
    params = SamplingParams(temperature=1.0, max_new_tokens=args.max_new_tokens, seed=args.round)
    before = time.perf_counter()
    generations = engine.generate(conversations, params)
    seconds = time.perf_counter() - before
    engine.close()
    return {"tokens": sum(len(s.token_ids) for g in generations for s in g.samples), "seconds": seconds}


def measure_rollout(args) -> dict:
    """One full rollout of args.tasks tasks, then the bare replay of its conversations."""
    from sqlmodel import select

    from colbench.engines.base import SamplingParams
    from colbench.families.backend import BackendEnv
    from colbench.grading.grader import Grader
    from colbench.rollout import Rollout
    from colbench.rollout_config import RolloutConfig
    from colbench.simulators.rulebased.backend import BuiltinSimulator
    from colbench.store.db import Database
    from colbench.store.models import Trajectory
    from colbench.wiring import select_tasks

    db = Database(f"sqlite:///{Path(tempfile.mkdtemp()) / 'bench.db'}")
    tasks = select_tasks(db, "backend:test", args.tasks)
    engine = make_engine(args.one, args.model, args.batch_size)
    config = RolloutConfig(max_new_tokens=args.max_new_tokens, batch_size=args.batch_size, seed=args.round)
    with Grader(sandbox="auto") as grader:
        before = time.perf_counter()
        stats = Rollout(db, engine, BuiltinSimulator(), BackendEnv(grader), config).run(tasks)
        rollout_s = time.perf_counter() - before
    with db.read() as session:
        conversations = replay_conversations(db, [t.id for t in session.exec(select(Trajectory))])
    params = SamplingParams(temperature=config.temperature, max_new_tokens=args.max_new_tokens, seed=args.round)
    bare_tokens, before = 0, time.perf_counter()
    for start in range(0, len(conversations), args.batch_size):
        for generation in engine.generate(conversations[start : start + args.batch_size], params):
            bare_tokens += len(generation.samples[0].token_ids)
    bare_s = time.perf_counter() - before
    engine.close()
    return {"rollout_tokens": stats.generated_tokens, "rollout_s": rollout_s, "bare_tokens": bare_tokens,
            "bare_s": bare_s}


# ---------------------------------------------------------------------------- the parent


@contextmanager
def busy_cores(count: int):
    """``count`` processes that spin on a core each, for as long as the block runs."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def child(args, name: str, round_: int, mode: str) -> dict:
    command = [sys.executable, __file__, "--one", name, "--round", str(round_), "--mode", mode, "--model", args.model,
               "--batch-size", str(args.batch_size), "--max-new-tokens", str(args.max_new_tokens), "--tasks",
               str(args.tasks)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{name} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def compare_engines(args) -> None:
    names = [n for n in args.engines.split(",") if n]
    for busy in [int(b) for b in args.busy.split(",")]:
        totals = {name: [0, 0.0] for name in names}
        with busy_cores(busy):
            for round_ in range(args.rounds):
                for name in names:
                    got = child(args, name, round_, "bare")
                    totals[name][0] += got["tokens"]
                    totals[name][1] += got["seconds"]
                    print(f"busy {busy}, round {round_}: {name:>11}: {got['tokens']} tokens in {got['seconds']:.1f} s",
                          flush=True)
        rates = {name: tokens / seconds for name, (tokens, seconds) in totals.items()}
        print(
            f"-- {busy} busy processes beside the engine; {args.batch_size} prompts, {args.max_new_tokens} new tokens"
            f" at T=1.0, {args.rounds} rounds"
        )
        for name, rate in rates.items():
            against = "".join(f", {rate / rates[b]:.1f}x {b}" for b in ("generate", "hf") if b in rates and b != name)
            print(f"{name:>11}: {rate:6.1f} tokens/s{against}")
        if "generate" in rates and "ct2-float32" in rates:
            print(
                f"ct2 float32 / transformers generate: {rates['ct2-float32'] / rates['generate']:.1f}x (target >= 4x),"
                f" {busy} busy"
            )


def compare_rollouts(args) -> None:
    names = [n for n in args.engines.split(",") if n]
    totals = {name: [0, 0.0, 0, 0.0] for name in names}
    for round_ in range(args.rounds):
        for name in names:
            got = child(args, name, round_, "rollout")
            for i, key in enumerate(("rollout_tokens", "rollout_s", "bare_tokens", "bare_s")):
                totals[name][i] += got[key]
            print(f"round {round_}: {name:>11}: rollout {got['rollout_tokens']} tokens in {got['rollout_s']:.1f} s, "
                  f"bare replay {got['bare_tokens']} in {got['bare_s']:.1f} s", flush=True)
    print(
        f"-- {args.tasks} tasks x 10 turns, batch {args.batch_size}, {args.max_new_tokens} new tokens, {args.rounds}"
        " rounds"
    )
    rollout_rates = {}
    for name, (r_tokens, r_s, b_tokens, b_s) in totals.items():
        rollout_rates[name] = r_tokens / r_s
        print(f"{name:>11}: rollout {r_tokens / r_s:6.1f} tokens/s, bare {b_tokens / b_s:6.1f} tokens/s, "
              f"ratio rollout/bare {(r_tokens / r_s) / (b_tokens / b_s):.2f} (target >= 0.8)")
    if "hf" in rollout_rates and "ct2-float32" in rollout_rates:
        print(f"full rollout, ct2 float32 / hf: {rollout_rates['ct2-float32'] / rollout_rates['hf']:.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines-only", action="store_true", help="only the bare engines (figure 1)")
    parser.add_argument("--engines", default=None, help="comma-separated, of: " + ", ".join(ENGINES))
    parser.add_argument("--busy", default="0,2", help="busy processes beside the engine, one condition each (figure 1)")
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--batch-size", type=int, default=None, help="default: 16 (engines), 6 (rollouts)")
    parser.add_argument("--max-new-tokens", type=int, default=None, help="default: 128 (engines), 64 (rollouts)")
    parser.add_argument("--tasks", type=int, default=6, help="tasks in each rollout (figure 2)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--round", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure_bare(args) if args.mode == "bare" else measure_rollout(args)))
        return
    if args.engines_only:
        args.engines = args.engines or ",".join(ENGINES)
        args.batch_size, args.max_new_tokens = args.batch_size or 16, args.max_new_tokens or 128
        compare_engines(args)
        return
    args.engines = args.engines or "hf,ct2-float32"
    args.batch_size, args.max_new_tokens = args.batch_size or 6, args.max_new_tokens or 64
    compare_rollouts(args)


if __name__ == "__main__":
    main()
