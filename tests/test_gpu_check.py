"""scripts/gpu_check.sh, the CUDA check a user runs on a GPU machine, runs its same five checks on
the CPU here (--device cpu), so it cannot rot between the rare runs on a GPU. Opt-in
(COLBENCH_SLOW=1): its checks repeat what test_training_signs and test_sharded_training cover,
and the suite has a time budget. Its grpo step (check 5) is cheap and new, so it runs alone in every suite."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(os.environ.get("COLBENCH_SLOW") != "1",
                    reason="runs the whole GPU check on the CPU: set COLBENCH_SLOW=1")
def test_the_gpu_check_passes_every_check_on_the_cpu():
    env = dict(os.environ, PYTHON=sys.executable)
    done = subprocess.run(["bash", "scripts/gpu_check.sh", "--device", "cpu"], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=900)
    lines = [line for line in done.stdout.splitlines() if line.split(" ", 1)[0] in ("PASS", "FAIL", "SKIP")]
    assert done.returncode == 0, done.stdout + done.stderr
    assert [line.split()[:2] for line in lines] == [["PASS", "1"], ["PASS", "2"], ["PASS", "3"], ["PASS", "5"],
                                                    ["PASS", "4"]], lines
    assert "world 2 (gloo)" in lines[4] and "gpu_check: 0 failed" in done.stdout


def test_the_gpu_checks_grpo_step_passes_on_the_cpu():
    """Check 5 alone (one online GRPO step: rollout, stored log-probs, update, checkpoint), in every suite run."""
    env = dict(os.environ, PYTHON=sys.executable)
    done = subprocess.run(["bash", "scripts/gpu_check.sh", "--device", "cpu", "--only", "grpo"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [line.split()[:2] for line in done.stdout.splitlines() if line.startswith(("PASS", "FAIL"))] == [
        ["PASS", "5"]], done.stdout
