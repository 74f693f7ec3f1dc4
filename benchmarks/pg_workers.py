"""Several `colbench rollout` workers on one PostgreSQL store, against one worker.

A private PostgreSQL server (Debian's initdb and pg_ctl in a temporary folder) holds a
fresh database per trial. Each trial starts N workers of the same command at once on a
fresh store (they all insert the lite tier's tasks and the rollout's slots), the scripted
expert on the first T lite-train tasks, k=2, two episodes in flight per worker, graded in
bwrap. Reported per N: wall time, workers that failed (non-zero exit), workers that left
while rows were still pending (idle exits), and whether every (task, sample) was rolled out
exactly once. The figure is wall(N) / wall(1), measured in the same run.

    .venv/bin/python benchmarks/pg_workers.py                 # N = 1 and 8, 100 tasks
    .venv/bin/python benchmarks/pg_workers.py --workers 4 --tasks 50

The scripted agent costs nothing, so the trial measures the store and the grading: on a
2-core machine 8 workers share 2 cores, and the ratio says how much of the rollout's time
the coordination (claims, inserts) adds, not a speed-up.
"""
from __future__ import annotations

import argparse
import glob
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import contextmanager

COLBENCH = [sys.executable, "-m", "colbench.cli.app"]


@contextmanager
def postgres_server():
    binaries = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not binaries:
        sys.exit("no PostgreSQL under /usr/lib/postgresql: run `make install`")
    bindir = os.path.dirname(binaries[-1])
    folder = tempfile.mkdtemp(prefix="colbench-pg-bench-")
    run_as: list[str] = []
    if os.geteuid() == 0:  # initdb refuses root
        pwd.getpwnam("postgres")
        shutil.chown(folder, "postgres", "postgres")
        run_as = ["runuser", "-u", "postgres", "--"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    data = os.path.join(folder, "data")
    subprocess.run(run_as + [f"{bindir}/initdb", "-D", data, "-A", "trust", "-U", "postgres", "--no-sync"], check=True,
                   capture_output=True)
    options = f"-c listen_addresses=127.0.0.1 -p {port} -k {folder} -c fsync=off -c max_connections=200"
    subprocess.run(run_as + [f"{bindir}/pg_ctl", "-D", data, "-o", options, "-w", "-l", os.path.join(folder, "log"),
                             "start"], check=True, capture_output=True)
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}"
    finally:
        subprocess.run(run_as + [f"{bindir}/pg_ctl", "-D", data, "-m", "immediate", "stop"], capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)


def fresh_database(server: str) -> str:
    from sqlalchemy import create_engine, text

    name = "b_" + uuid.uuid4().hex[:10]
    admin = create_engine(f"{server}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return f"{server}/{name}"


def pending(url: str) -> int:
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            return connection.execute(text("SELECT count(*) FROM trajectory WHERE status = 'pending'")).scalar() or 0
    except Exception:  # no tables yet
        return 0
    finally:
        engine.dispose()


def trial(server: str, workers: int, tasks: int) -> dict:
    url = fresh_database(server)
    env = dict(os.environ, COLBENCH_DB=url, NO_COLOR="1")
    command = COLBENCH + ["rollout", "--engine", "scripted:expert", "--tasks", "backend-lite:train", "--limit",
                          str(tasks), "-k", "2",
                          "--sandbox", "bwrap", "--grade-workers", "1", "--concurrency", "2", "--json"]
    started = time.perf_counter()
    processes = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        for _ in range(workers)
    ]
    failed = idle = 0
    left = set(range(workers))
    while left:
        for i in sorted(left):
            if processes[i].poll() is None:
                continue
            left.discard(i)
            if pending(url):
                idle += 1
            processes[i].communicate()
            failed += processes[i].returncode != 0
        time.sleep(0.05)
    wall = time.perf_counter() - started
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    with engine.connect() as connection:
        rows = connection.execute(text("SELECT count(*), count(DISTINCT (task_id, sample_index)), "
                                       "sum(CASE WHEN status = 'done' THEN 1 ELSE 0 END) FROM trajectory")).one()
    engine.dispose()
    return {"workers": workers, "wall_s": wall, "failed": failed, "idle_exits": idle,
            "exactly_once": rows[0] == rows[1] == rows[2] == 2 * tasks}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--tasks", type=int, default=100)
    args = parser.parse_args()
    with postgres_server() as server:
        results = [trial(server, n, args.tasks) for n in (1, args.workers)]
    for r in results:
        print(f"{r['workers']} worker(s): {r['wall_s']:.1f} s, {r['failed']} failed, {r['idle_exits']} idle exits, "
              f"every (task, sample) exactly once: {r['exactly_once']}")
    print(
        f"wall({args.workers}) / wall(1) = {results[1]['wall_s'] / results[0]['wall_s']:.2f} ({2 * args.tasks}"
        " trajectories)"
    )


if __name__ == "__main__":
    main()
