"""A rollout through ``--engine vllm-serve`` (vLLM's CPU build behind a server the command starts and stops) against
the same rollout through ct2, in one run: wall time, dialogues a minute, and the ratio.

Each engine rolls the same model out on the same backend-lite tasks (the built-in simulated human, the bwrap sandbox,
a fresh store each), sampling seed 1, as a study's read does. vllm-serve's wall time includes starting its server
(40-60 s on 2 cores), which a long read pays once.

    python benchmarks/vllm_serve_rollout.py [--model smollm2|FOLDER] [--tasks 24] [-k 1] [--max-new-tokens 256]
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time


def rollout(engine: str, args) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "colbench.cli.app", "--db", f"sqlite:///{folder}/b.db", "rollout", "--engine",
             engine, "--model", args.model, "--tasks", args.tasks_from, "--limit", str(args.tasks), "-k", str(args.k),
             "--max-new-tokens", str(args.max_new_tokens), "--seed", "1", "--sandbox", "bwrap", "--json"],
            check=True, capture_output=True, text=True)
        seconds = time.perf_counter() - started
    stats = json.loads(done.stdout)
    ready = re.search(r"^vllm-serve: .* ready in (\d+) s", done.stderr, re.M)
    start = float(ready.group(1)) if ready else 0.0
    return {"engine": engine, "seconds": seconds, "start_s": start, "dialogues": stats["finished"],
            "agent_turns": stats["agent_turns"], "success": stats["success_rate"],
            "per_minute": stats["finished"] / seconds * 60,
            "per_minute_served": stats["finished"] / (seconds - start) * 60}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2", help="what --model takes: smollm2, a folder")
    parser.add_argument("--tasks-from", default="backend-lite:train")
    parser.add_argument("--tasks", type=int, default=24)
    parser.add_argument("-k", type=int, default=1)
    parser.add_argument("--max-new-tokens", type=int, default=256)
    args = parser.parse_args()
    rows = [rollout(engine, args) for engine in ("ct2", "vllm-serve")]
    for row in rows:
        print(json.dumps(row), file=sys.stderr)
    base = rows[0]["seconds"]
    print(f"| engine | rollout of {args.tasks} x {args.k} {args.tasks_from}, s | of which starting a server, s |"
          " dialogues/min | once served | agent turns | success | speed-up over ct2 | once served |"
          "\n|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        served = base / (row["seconds"] - row["start_s"])
        print(f"| {row['engine']} | {row['seconds']:.0f} | {row['start_s']:.0f} | {row['per_minute']:.1f} |"
              f" {row['per_minute_served']:.1f} | {row['agent_turns']} | {row['success']:.0%} |"
              f" {base / row['seconds']:.2f}x | {served:.2f}x |")


if __name__ == "__main__":
    main()
