"""colbench/openmp.py: importing colbench tells GNU OpenMP to spin briefly before torch loads, unless the user chose
(what it buys on shared cores is benchmarks/shared_cores.py's figure)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

# What OpenMP itself will read: the variable as the process holds it once torch, after colbench, has loaded.
PROBE = "import colbench, torch, os; print(os.environ.get('GOMP_SPINCOUNT'), os.environ.get('OMP_WAIT_POLICY'))"


@pytest.mark.parametrize(("given", "seen"), [
    ({}, "1000 None"),
    ({"GOMP_SPINCOUNT": "5"}, "5 None"),
    ({"OMP_WAIT_POLICY": "ACTIVE"}, "None ACTIVE"),
])
def test_colbench_sets_a_short_spin_only_where_the_user_chose_none(given, seen):
    env = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")} | given
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-1000:]
    assert done.stdout.split("\n")[0] == seen
