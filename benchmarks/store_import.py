"""Import speed of the store on an offline set shaped like the paper's (15,000 trajectories).

Generates an official-format file of 15,000 backend trajectories with 10 agent turns
each and realistic text lengths (a task description of ~600 characters, agent turns of
~250, human replies cut at 400, and every agent turn's `input` holding the whole
chat-templated prompt so far), imports it into a fresh SQLite file, and reports
trajectories per second. Then it imports 1,000 more and times the incremental read a
trainer makes of them on top of the 15,000 it has consumed.

    python benchmarks/store_import.py [--n 15000] [--db sqlite:///...]
"""
from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path

from colbench.official import import_trajectories
from colbench.store import queries
from colbench.store.db import Database

WORDS = (
    "the a price order customer weight should return when if list value total rate each item over under"
    " discount"
).split()


def sentence(rng: random.Random, chars: int) -> str:
    words, size = [], 0
    while size < chars:
        word = rng.choice(WORDS)
        words.append(word)
        size += len(word) + 1
    return " ".join(words)[:chars]


def record(rng: random.Random, i: int, turns: int = 10) -> dict:
    name = f"function_{i}"
    code = f"def {name}(a, b):\n" + "".join(f"    x{k} = a * {k} + b\n" for k in range(12)) + "    return x11\n"
    task = {
        "problem_description": sentence(rng, 560) + f" The signature of the function is: def {name}(a, b)",
        "ground_truth": code,
        "test_cases": {f"test{k}": f"{name}({k}, {k + 1})" for k in range(1, 11)},
        "hidden_information": code,
    }
    history = [{"role": "user", "content": task["problem_description"]}]
    prompt = "<|start_header_id|>system<|end_header_id|>\n\n" + sentence(rng, 700) + "<|eot_id|>"
    for t in range(turns):
        prompt += f"<|start_header_id|>{history[-1]['role']}<|end_header_id|>\n\n{history[-1]['content']}<|eot_id|>"
        content = sentence(rng, rng.randint(120, 380))
        if t == turns - 1:
            content = "I WANT TO ANSWER:\n" + code
        history.append({"role": "assistant", "content": content,
                        "input": prompt + "<|start_header_id|>assistant<|end_header_id|>\n\n", "output": content})
        prompt += f"<|start_header_id|>assistant<|end_header_id|>\n\n{content}<|eot_id|>"
        if t < turns - 1:
            history.append({"role": "user", "content": sentence(rng, rng.randint(60, 400))})
    return {"task": task, "dialogue_history": history, "answer": code, "reward": rng.choice([0.0, 0.3, 1.0])}


def write_file(path: Path, start: int, count: int, seed: int) -> int:
    rng = random.Random(seed)
    with path.open("w") as handle:
        for i in range(start, start + count):
            handle.write(json.dumps(record(rng, i)) + "\n")
    return path.stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=15_000)
    parser.add_argument("--new", type=int, default=1_000)
    parser.add_argument("--db", default=None, help="SQLAlchemy URL (default: a fresh SQLite file)")
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="colbench-bench-"))
    base, extra = folder / "offline.jsonl", folder / "more.jsonl"
    size = write_file(base, 0, args.n, seed=1)
    write_file(extra, args.n, args.new, seed=2)
    db = Database(args.db or f"sqlite:///{folder / 'bench.db'}")

    started = time.perf_counter()
    summary = import_trajectories(db, base, policy="llama-8b")
    elapsed = time.perf_counter() - started
    rate = summary.added / elapsed
    print(f"import: {summary.added} trajectories ({size / 1e6:.0f} MB, {summary.added * 19} turns) in {elapsed:.1f} s "
          f"= {rate:,.0f} trajectories/s (target >= 2,000/s: {rate / 2000:.2f}x)")

    with db.read() as session:
        watermark = max(t.graded_seq for t in queries.graded_since(session, None, limit=None))
    import_trajectories(db, extra, policy="llama-8b")
    started = time.perf_counter()
    with db.read() as session:
        fresh = queries.graded_since(session, watermark)
        turns = queries.turns_for(session, [t.id for t in fresh])
    read_time = time.perf_counter() - started
    started = time.perf_counter()
    with db.read() as session:
        everything = queries.graded_since(session, None)
    full_time = time.perf_counter() - started
    n_turns = sum(len(v) for v in turns.values())
    print(
        f"incremental read: {len(fresh)} new trajectories with {n_turns} turns on top of"
        f" {len(everything) - len(fresh)} in {read_time * 1000:.0f} ms; reading all {len(everything)} trajectory rows"
        f" takes {full_time * 1000:.0f} ms (new-rows read is {full_time / read_time:.1f}x cheaper than a full pass over"
        " rows alone)"
    )


if __name__ == "__main__":
    main()
