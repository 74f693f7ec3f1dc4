"""A served rollout: how close the wall time comes to the slowest trajectory's own latency.

Policy and simulated human are models behind an OpenAI-compatible server (here
benchmarks/latency_server.py: lognormal latencies, median 1 s; replies that never
answer early, so every trajectory runs 10 agent turns and 9 human replies). A
trajectory is a chain of 19 requests that cannot overlap; trajectories can. With
unbounded concurrency the rollout could finish as soon as its slowest chain does:

    ideal = max over trajectories of the sum of that trajectory's request latencies

using the latencies the server drew (each reply is tagged with its request, and the
tag is in the stored turn), not the client-side `Turn.latency_s`: those add the
client's own overhead and queueing, which is what the benchmark measures. Their
version of the ideal is printed beside it. `wall / ideal` is the figure (target <=
1.2). The wall time is `colbench.rollout.run` from call to return: setup, requests,
grading and store writes included (the built-in tasks are imported before the clock).

The server runs in a process of its own, as a real one would: its threads neither
take this process's GIL nor count in its RSS.

    .venv/bin/python benchmarks/served_rollout.py                  # 100 trajectories, median 1 s
    .venv/bin/python benchmarks/served_rollout.py --median 0.2     # quicker, same shape
    .venv/bin/python benchmarks/served_rollout.py --memory         # 1,000 trajectories, peak RSS

The CPU line says whether this process kept up: near 100% of the wall time, the
rollout's own work per request (not the latencies) sets the pace, and the ratio
measures the machine's cores rather than the orchestration.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import resource
import statistics
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import defaultdict
from pathlib import Path

from sqlmodel import select

from colbench.rollout import run
from colbench.rollout_config import RolloutConfig
from colbench.store.db import Database
from colbench.store.models import Trajectory, Turn
from colbench.wiring import select_tasks

sys.path.insert(0, str(Path(__file__).resolve().parent))
from latency_server import REF  # noqa: E402  (a sibling script, not a package)

TASKS = "backend:test"
MEMORY_TRAJECTORIES = 1000
MEMORY_TARGET_MB = 2048


def start_server(median: float, sigma: float, seed: int) -> tuple[subprocess.Popen, str]:
    command = [sys.executable, str(Path(__file__).with_name("latency_server.py")), "--port", "0",
               "--median", str(median), "--sigma", str(sigma), "--seed", str(seed)]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    first = server.stdout.readline().strip()  # "serving <url>"
    if not first.startswith("serving "):
        server.kill()
        raise RuntimeError(f"latency server did not start: {first!r}")
    return server, first.split(" ", 1)[1]


def server_stats(base_url: str) -> dict:
    with urllib.request.urlopen(base_url.removesuffix("/v1") + "/stats", timeout=60) as response:
        return json.load(response)


def plan(trajectories: int, available: int) -> tuple[int, int]:
    """(tasks, samples per task) giving at least `trajectories`, spread over as many tasks as there are."""
    k = math.ceil(trajectories / available)
    return math.ceil(trajectories / k), k


def rollout_config(args, url: str, limit: int, k: int) -> tuple[RolloutConfig, str]:
    """The config, and which setting bounds the episodes in flight (the rollout may or may not have `concurrency`)."""
    fields = {f.name for f in dataclasses.fields(RolloutConfig)}
    options = dict(model="policy", engine="openai", base_url=url, simulator=f"endpoint:{url}#human", tasks=TASKS,
                   limit=limit, samples_per_task=k, seed=args.seed, sandbox=args.sandbox,
                   grade_workers=args.grade_workers)
    if args.batch_size:
        options["batch_size"] = args.batch_size
    if "sim_guard" in fields:  # the leak guard judges every human reply (colbench/simulators/guard.py)
        options["sim_guard"] = args.sim_guard
    if "concurrency" in fields:
        options["concurrency"] = args.concurrency or limit * k
        setting = f"RolloutConfig.concurrency={options['concurrency']}"
    else:
        setting = "RolloutConfig has no `concurrency` field"
    config = RolloutConfig(**options)
    if "batch_size" in fields:
        setting += f", batch_size={config.batch_size}"
    return config, setting


def trajectory_latencies(db: Database, drawn: dict[str, float]) -> tuple[dict[int, float], dict[int, float], int, int]:
    """Per trajectory: the sum of its requests' drawn latencies (found by the reply's tag),
    and the sum of its turns' stored latency_s; and how many turns had no tag / no latency."""
    by_server: dict[int, float] = defaultdict(float)
    by_client: dict[int, float] = defaultdict(float)
    untagged = missing = 0
    with db.read() as session:
        rows = session.exec(select(Turn.trajectory_id, Turn.raw, Turn.latency_s).where(Turn.index > 0)).all()
    for trajectory_id, raw, latency_s in rows:
        found = REF.search(raw or "")
        if found and found.group(1) in drawn:
            by_server[trajectory_id] += drawn[found.group(1)]
        else:
            untagged += 1  # a failed request ("No response."): its latency is not counted
        if latency_s is None:
            missing += 1
        else:
            by_client[trajectory_id] += latency_s
    return by_server, by_client, untagged, missing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trajectories", type=int, default=100, help="at least this many (tasks x samples per task)")
    parser.add_argument("--memory", action="store_true",
                        help=f"{MEMORY_TRAJECTORIES:,} trajectories; report the peak RSS")
    parser.add_argument("--median", type=float, default=1.0,
                        help="median request latency, seconds (0.2 for quick runs)")
    parser.add_argument("--sigma", type=float, default=0.5, help="lognormal spread of the latencies")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--concurrency", type=int, default=None,
                        help="RolloutConfig.concurrency, where it exists (default: every trajectory at once)")
    parser.add_argument("--batch-size", type=int, default=None, help="RolloutConfig.batch_size (default: its own)")
    parser.add_argument("--sandbox", default="auto", help="grading sandbox (answers are short text: grading is cheap)")
    parser.add_argument("--grade-workers", type=int, default=4)
    parser.add_argument("--sim-guard", default="flag", help="RolloutConfig.sim_guard (off: no leak check; the default"
                        " flag: every reply checked)")
    parser.add_argument("--keep", action="store_true", help="keep the database and print where it is")
    args = parser.parse_args()
    wanted = MEMORY_TRAJECTORIES if args.memory else args.trajectories

    folder = Path(tempfile.mkdtemp(prefix="served-rollout-"))
    db = Database(f"sqlite:///{folder / 'colbench.db'}")
    available = len(select_tasks(db, TASKS, None))  # imports the built-in tasks, before the clock starts
    limit, k = plan(wanted, available)
    server, url = start_server(args.median, args.sigma, args.seed)
    try:
        config, setting = rollout_config(args, url, limit, k)
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # MB (Linux reports KB)
        print((
            f"{limit * k} trajectories ({limit} tasks x k={k}), latency median {args.median:g} s sigma {args.sigma:g};"
            f" {setting}"
        ), flush=True)
        started_at, started, cpu_before = time.time(), time.perf_counter(), time.process_time()
        run(db, config)
        wall = time.perf_counter() - started
        cpu = time.process_time() - cpu_before
        stats = server_stats(url)
    finally:
        server.terminate()
        server.wait(timeout=30)

    drawn = {r["ref"]: r["latency_s"] for r in stats["requests"]}
    by_server, by_client, untagged, missing = trajectory_latencies(db, drawn)
    with db.read() as session:  # what happened, from the store alone
        trajectories = session.exec(select(Trajectory.status, Trajectory.graded_seq, Trajectory.success)).all()
        roles = session.exec(select(Turn.role).where(Turn.index > 0)).all()
    statuses = [status for status, _, _ in trajectories]
    graded = [success for _, seq, success in trajectories if seq is not None]
    ideal = max(by_server.values(), default=float("nan"))
    ideal_client = max(by_client.values()) if by_client else float("nan")
    first = min(r["arrived"] for r in stats["requests"])
    last = max(r["replied"] for r in stats["requests"])

    print(f"trajectories: {statuses.count('done')} done, {statuses.count('failed')} failed; "
          f"{len(graded)} graded ({sum(map(bool, graded))} passed)")
    print(f"requests: {len(stats['requests'])} ({len(roles)} stored turns, {untagged} without a server tag, "
          f"{missing} without latency_s); drawn latency median {statistics.median(drawn.values()):.3f} s")
    print(f"wall: {wall:.1f} s (before the first request {first - started_at:.1f} s, requests {last - first:.1f} s, "
          f"after the last reply {started_at + wall - last:.1f} s)")
    print(f"ideal: {ideal:.1f} s = the slowest trajectory's own request latencies, as the server drew them "
          f"(mean trajectory {statistics.mean(by_server.values()):.1f} s; from stored latency_s: {ideal_client:.1f} s)")
    print(f"wall / ideal: {wall / ideal:.2f} (target <= 1.2)")
    print(f"peak in flight at the server: {stats['in_flight_peak']} requests")
    print(
        f"turns/s: {roles.count('assistant') / wall:.1f} agent turns, {len(roles) / wall:.1f} turns (agent and human)"
    )
    print(f"CPU during the run: {cpu:.1f} s in this process ({cpu / wall:.0%} of the wall time: near 100% means "
          f"the rollout itself is the bottleneck), {stats['cpu_s']:.1f} s in the latency server")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    target = f" (target < {MEMORY_TARGET_MB / 1024:g} GB)" if args.memory else ""
    print(f"peak RSS of this process: {rss:.0f} MB{target}; {rss_before:.0f} MB before the rollout")
    db.close()
    if args.keep:
        print(f"database: {folder / 'colbench.db'}")
    else:
        shutil.rmtree(folder)


if __name__ == "__main__":
    main()
