"""Training under `accelerate launch` with 2 CPU processes (gloo): one run, one checkpoint,
one printed result, figures over both processes, and the lineage one process writes.
And a run whose process was killed is marked failed rather than left running."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlmodel import select

from colbench.store.db import Database
from colbench.store.models import Checkpoint, Lineage, TrainingRun
from colbench.training.checkpoints import fail_stale_runs, list_checkpoints
from conftest import graded_store

COLBENCH = [sys.executable, "-m", "colbench.cli.app"]


def launch() -> list[str]:
    """accelerate launch of 2 processes; on a machine without GPUs they train on the CPU over gloo."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return [str(Path(sys.executable).parent / "accelerate"), "launch", "--multi_gpu", "--num_processes", "2",
            "--num_machines", "1",
            "--mixed_precision", "no", "--main_process_port", str(port), "-m", "colbench.cli.app"]


TINY = ["--device", "cpu", "--lora-rank", "4", "--max-len", "160", "--batch-size", "2", "--lr", "1e-3", "--json"]


def run(command: list[str], url: str, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, NO_COLOR="1", OMP_NUM_THREADS="1")
    env.pop("COLBENCH_DEBUG", None)
    return subprocess.run(command + ["--db", url, *args], capture_output=True, text=True, env=env, timeout=600)


def running_runs(db: Database, timeout_s: float = 180) -> list[TrainingRun]:
    """The training runs marked running, once there is one (or [] after ``timeout_s``)."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        with db.read() as session:
            running = session.exec(select(TrainingRun).where(TrainingRun.status == "running")).all()
        if running:
            return running
        time.sleep(0.1)
    return []


def lineage_of(db: Database, run_id: int) -> list[tuple[int, int | None]]:
    with db.read() as session:
        return sorted(
            (l.trajectory_id, l.turn_id) for l in session.exec(select(Lineage).where(Lineage.run_id == run_id))
        )


def launched_long_fit(url: str, model: Path, epochs: int) -> subprocess.Popen:
    """`colbench launch -n 2 policy fit` of rejection fine-tuning for ``epochs`` epochs, started, not awaited."""
    env = dict(os.environ, NO_COLOR="1", OMP_NUM_THREADS="1")
    env.pop("COLBENCH_DEBUG", None)
    return subprocess.Popen(
        COLBENCH + ["--db", url, "launch", "-n", "2", "policy", "fit", "--algo", "rft", "--model", str(model),
                    "--epochs", str(epochs), *TINY],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )


@pytest.fixture(scope="module")
def store(tiny_model_dir, tmp_path_factory):
    return graded_store(tmp_path_factory.mktemp("multiprocess"))


def test_two_processes_train_each_recipe_as_one_does(store, tiny_model_dir):
    db, url = store
    model = str(tiny_model_dir)
    commands = {
        "critic": ["critic", "fit", "--model", model, "--epochs", "1", "--heldout", "0", "--from-scratch"],
        "rft": ["policy", "fit", "--algo", "rft", "--model", model, "--epochs", "1"],
        "mtdpo": ["policy", "fit", "--algo", "mtdpo", "--model", model],
    }
    for name, command in commands.items():
        two = run(launch(), url, *command, *TINY)
        assert two.returncode == 0, (name, two.stderr[-3000:])
        summary = json.loads(two.stdout)  # one document: rank 1 prints nothing
        one = json.loads(run(COLBENCH, url, *command, *TINY).stdout)
        assert summary["checkpoint"].startswith("ckpt:") and summary["checkpoint"] != one["checkpoint"]
        assert lineage_of(db, summary["run_id"]) == lineage_of(db, one["run_id"]) != []
        metrics = summary["metrics"]
        # Figures over both processes, not rank 0's share: every token trained, a loss near one process's.
        assert metrics["train_tokens"] == one["metrics"]["train_tokens"] > 0
        assert metrics["train_loss"] == pytest.approx(one["metrics"]["train_loss"], rel=0.5)
    critic = json.loads(run(COLBENCH, url, "critic", "fit", "--model", model, "--epochs", "1", "--heldout", "0",
                            "--from-scratch", *TINY).stdout)["checkpoint"]
    sweet = ["policy", "fit", "--algo", "sweet", "--model", model, "--critic", critic, "--fraction", "1",
             "--candidates", "4",
             "--max-new-tokens", "4", "--sample-batch-size", "8"]
    two = run(COLBENCH, url, "launch", "--processes", "2", *sweet, *TINY)  # colbench's own front to accelerate launch
    assert two.returncode == 0, two.stderr[-3000:]
    summary = json.loads(two.stdout)
    one = json.loads(run(COLBENCH, url, *sweet, *TINY).stdout)  # reuses the candidates the two sampled
    assert one["metrics"]["turns_sampled"] == 0, [
        (k, summary["metrics"].get(k), one["metrics"].get(k))
        for k in ("sampling_key", "sampler", "turns_sampled", "turns_reused", "selected_turns")
    ]
    assert lineage_of(db, summary["run_id"]) == lineage_of(db, one["run_id"]) != []
    with db.read() as session:
        runs = session.exec(select(TrainingRun)).all()
        checkpoints = session.exec(select(Checkpoint)).all()
    assert (
        all(r.status == "done" for r in runs) and len(checkpoints) == len(runs) == 9
    )  # one run and checkpoint per launch


def test_a_run_whose_process_was_killed_is_marked_failed(store, tiny_model_dir):
    db, url = store
    env = dict(os.environ, NO_COLOR="1")
    process = subprocess.Popen(COLBENCH + ["--db", url, "policy", "fit", "--algo", "rft", "--model",
                                           str(tiny_model_dir), "--epochs", "200", *TINY],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    running = running_runs(db)
    assert running and running[0].worker.split(":")[1] == str(process.pid)
    assert fail_stale_runs(db) == []  # alive: left alone
    process.send_signal(signal.SIGKILL)
    process.wait()
    list_checkpoints(db)  # any look at the runs notices
    with db.read() as session:
        run_row = session.get(TrainingRun, running[0].id)
    assert run_row.status == "failed" and "stopped without finishing" in run_row.error


def test_launch_stops_every_process_on_ctrl_c_in_one_line(store, tiny_model_dir):
    db, url = store
    process = launched_long_fit(url, tiny_model_dir, epochs=500)
    running = running_runs(db)
    assert running
    time.sleep(3)  # into training
    process.send_signal(signal.SIGINT)  # a terminal's Ctrl-C reaches colbench; the launcher has a session of its own
    out, err = process.communicate(timeout=120)
    lines = [line for line in err.splitlines() if line.strip()]
    assert process.returncode == 130 and lines[-1].startswith("error: interrupted") and "Traceback" not in err, err[
        -3000:
    ]
    with db.read() as session:
        assert session.get(TrainingRun, running[0].id).status == "failed"
    time.sleep(1)
    trainers = subprocess.run(["pgrep", "-f",
                               f"colbench.cli.app policy fit --algo rft --model {tiny_model_dir} --epochs 500"],
                              capture_output=True, text=True).stdout.split()
    assert trainers == []  # none left behind


def test_launch_runs_only_training_commands(store):
    _, url = store
    result = run(COLBENCH, url, "launch", "-n", "2", "rollout", "--model", "smollm2")
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode != 0 and len(lines) == 1 and "critic fit" in lines[0]


def test_a_taken_name_under_launch_is_refused_by_every_process_in_one_line(store, tiny_model_dir):
    """The name is checked on the main process alone and its refusal handed to the others: every process stops
    (none left waiting at the broadcast, which would hang the launch), with one line, and no run is added."""
    db, url = store
    command = ["policy", "fit", "--algo", "rft", "--model", str(tiny_model_dir), "--epochs", "1", *TINY]
    first = run(COLBENCH, url, *command, "--name", "taken-under-launch")
    assert first.returncode == 0, first.stderr[-3000:]
    with db.read() as session:
        before = len(session.exec(select(TrainingRun)).all())
    two = run(COLBENCH, url, "launch", "-n", "2", *command, "--name", "taken-under-launch")
    lines = [line for line in two.stderr.splitlines() if line.strip()]
    assert two.returncode != 0 and "Traceback" not in two.stderr, two.stderr[-3000:]
    assert len(lines) == 1 and "'taken-under-launch' is taken" in lines[0], lines
    with db.read() as session:
        assert len(session.exec(select(TrainingRun)).all()) == before


def test_a_trainer_killed_under_launch_is_reported_in_one_line(store, tiny_model_dir):
    """kill -9 of one trainer: the launcher stops the other and reports with a traceback; colbench says which
    process died and how, in one line, and the run does not stay running."""
    db, url = store
    process = launched_long_fit(url, tiny_model_dir, epochs=400)
    running = running_runs(db)
    assert running
    launcher = subprocess.run(["pgrep", "-P", str(process.pid)], capture_output=True, text=True).stdout.split()
    trainers = subprocess.run(["pgrep", "-P", launcher[0]], capture_output=True, text=True).stdout.split()
    assert len(trainers) == 2
    os.kill(int(trainers[1]), signal.SIGKILL)
    out, err = process.communicate(timeout=120)
    lines = [line for line in err.splitlines() if line.strip()]
    assert process.returncode not in (0, 130) and "Traceback" not in err and "torch/distributed" not in err, err
    assert lines[-1].startswith("error: training process") and "SIGKILL" in lines[-1], lines[-3:]
    list_checkpoints(db)  # any look at the runs notices a dead worker
    with db.read() as session:
        assert session.get(TrainingRun, running[0].id).status == "failed"
