"""GNU OpenMP's threads, told to spin briefly: set when colbench is imported, before torch or CTranslate2 load.

Between parallel regions GNU OpenMP threads spin (300,000 times by default) before they sleep. Where the cores are
shared (the grader's sandboxes, a simulator, another job), a spinning thread holds the core its peer needs, and a
2-thread step waits for a descheduled thread. Measured on 2 cores beside a rollout at the same priority
(`benchmarks/shared_cores.py`): one training pass of SmolLM2-135M over 1,100 tokens took 40.4 s, 14.7 s with 1,000
spins, and 7.1 s either way on idle cores; CTranslate2's decoding was 3-7x faster under that load and kept ~85% of its
idle speed. The libraries read the variable when they load, so it is set at colbench's import (unless the user set
GOMP_SPINCOUNT or OMP_WAIT_POLICY): whoever imports torch before colbench keeps the default.
"""
from __future__ import annotations

import os

SPINS = "1000"


def spin_briefly() -> None:
    if "GOMP_SPINCOUNT" not in os.environ and "OMP_WAIT_POLICY" not in os.environ:
        os.environ["GOMP_SPINCOUNT"] = SPINS
