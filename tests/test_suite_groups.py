"""The suite's one-worker groups hold: `make test` runs `--dist loadgroup`, and tests/conftest.py marks each
once-per-machine service's tests (a private dockerd, the vLLM server) with one xdist_group. A pytest that xdist
cannot group under (9.2 with xdist 3.8) spreads them over both workers without a word: two dockerds fight for one
bridge, two vLLM servers double the suite's largest process."""
from __future__ import annotations

import subprocess
import sys

MODULE = '''
import os, pathlib, pytest

pytestmark = pytest.mark.xdist_group("service")


@pytest.mark.parametrize("i", range(8))
def test_records_its_worker(i):
    pathlib.Path(f"ran-{i}").write_text(os.environ["PYTEST_XDIST_WORKER"])
'''


def test_a_groups_tests_all_run_on_one_worker(tmp_path):
    (tmp_path / "test_grouped.py").write_text(MODULE)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup",
         "test_grouped.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    workers = {(tmp_path / f"ran-{i}").read_text() for i in range(8)}
    assert len(workers) == 1, f"one group's tests ran on {sorted(workers)}"
