"""Page load times of `colbench view` on a 10,000-trajectory store against a 100-trajectory one.

Both stores are filled the same way (benchmarks/store_import.py's paper-shaped records: 10
agent turns each, imported in 10 policies' names so the runs page has rows to list), then
each page is fetched over HTTP from the viewer's own server, best of 5. Prints milliseconds
per page and the ratio large/small: how a page's cost grows with the store.

    .venv/bin/python benchmarks/viewer.py [--n 10000]
"""
from __future__ import annotations

import argparse
import random
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from store_import import record  # noqa: E402  (the same paper-shaped records)

from colbench.official import import_trajectories  # noqa: E402
from colbench.store.db import Database  # noqa: E402
from colbench.viewer import make_server  # noqa: E402

PAGES = ("/", "/trajectories", "/trajectories?policy=policy-3&min_reward=0.5", "/trajectory/{middle}", "/run/rollout:1")


def filled_store(folder: Path, n: int) -> Database:
    import json

    db = Database(f"sqlite:///{folder / 'colbench.db'}")
    rng = random.Random(0)
    policies = 10
    for p in range(policies):
        path = folder / f"policy-{p}.jsonl"
        with path.open("w") as handle:
            for i in range(n // policies):
                handle.write(json.dumps(record(rng, i)) + "\n")
        import_trajectories(db, path, policy=f"policy-{p}", split="test")
    return db


def timings(db: Database, n: int) -> dict[str, float]:
    server = make_server(db, 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    found = {}
    for page in PAGES:
        url = base + page.format(middle=n // 2)
        best = float("inf")
        for _ in range(5):
            started = time.perf_counter()
            with urllib.request.urlopen(url) as response:
                response.read()
            best = min(best, time.perf_counter() - started)
        found[page] = best * 1000
    server.shutdown()
    server.server_close()
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--small", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as small_dir, tempfile.TemporaryDirectory() as large_dir:
        started = time.perf_counter()
        small = timings(filled_store(Path(small_dir), args.small), args.small)
        large = timings(filled_store(Path(large_dir), args.n), args.n)
        print(f"stores filled and timed in {time.perf_counter() - started:.0f} s")
    print(f"{'page':<48} {args.small:>7} traj.  {args.n:>7} traj.  ratio")
    for page in PAGES:
        print(f"{page:<48} {small[page]:>9.1f} ms {large[page]:>9.1f} ms  {large[page] / small[page]:5.1f}")


if __name__ == "__main__":
    main()
