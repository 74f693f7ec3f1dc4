"""A stopped offline run continues from its last snapshot (colbench/training/snapshots.py): the critic and a SWEET
policy stopped mid-epoch (Ctrl-C, in-process) and the critic killed with SIGKILL (a real process) each reach, on a
rerun of the same command, the run's own id and the weights an uninterrupted run reaches; a rerun on other data
starts a new run instead."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from sqlmodel import select

from colbench.store.models import SweetPair, TrainingRun, TrainingStep
from colbench.training.critic import CriticConfig, fit_critic
from colbench.training.policy import fit_policy
from colbench.training.snapshots import latest, snapshot_folder
from colbench.training.trainer import PolicyConfig
from conftest import graded_store, write_jsonl
from officialdata import backend_task, trajectory

EVERY_STEP = 1e-9  # --snapshot-minutes: a snapshot after every optimiser step
CRITIC = dict(epochs=2, batch_size=2, max_len=160, heldout_fraction=0.0, lora_rank=4, device="cpu", lr=1e-3)
SWEET = dict(batch_size=4, max_len=192, lora_rank=4, device="cpu", lr=1e-3, epochs=2, fraction=1.0, candidates=4,
             pairs_per_turn=2, max_new_tokens=6, sample_batch_size=8)


class Stop(KeyboardInterrupt):
    """Ctrl-C, at a chosen optimiser step."""


def stopping_at(step: int, seen: list, stages: list | None = None):
    def progress(stage, done, total, figures):
        if stages is not None:
            stages.append(stage)
        if stage == "train":
            seen.append(done)
            if done == step:
                raise Stop
    return progress


def weights(folder: str) -> dict[str, torch.Tensor]:
    return load_file(str(Path(folder) / "adapter_model.safetensors"))


def assert_same_weights(resumed: str, uninterrupted: str) -> None:
    a, b = weights(resumed), weights(uninterrupted)
    assert a.keys() == b.keys()
    for name in a:
        assert torch.allclose(a[name], b[name], atol=1e-6, rtol=0), name


def run_row(db, run_id: int) -> TrainingRun:
    with db.read() as session:
        return session.get(TrainingRun, run_id)


def stored_steps(db, run_id: int) -> list[int]:
    with db.read() as session:
        rows = session.exec(select(TrainingStep).where(TrainingStep.run_id == run_id)).all()
    return sorted(row.step for row in rows)


def stopped(db, kind: str) -> TrainingRun:
    with db.read() as session:
        runs = session.exec(select(TrainingRun).where(TrainingRun.kind == kind)).all()
    assert len(runs) == 1 and runs[0].status == "failed", [(r.id, r.status) for r in runs]
    return runs[0]


def stopped_critic(tmp_path, tiny_model_dir, at: int):
    """A store whose critic fit (a snapshot after every step) Ctrl-C stopped at step ``at``: (db, config, the run)."""
    db, _ = graded_store(tmp_path)
    config = CriticConfig(**CRITIC, snapshot_minutes=EVERY_STEP)
    with pytest.raises(Stop):
        fit_critic(db, config, base_model=str(tiny_model_dir), on_progress=stopping_at(at, []))
    return db, config, stopped(db, "critic")


def test_a_stopped_critic_continues_to_the_uninterrupted_weights(tmp_path, tiny_model_dir):
    db, config, failed = stopped_critic(tmp_path, tiny_model_dir, at=5)
    saved = latest(snapshot_folder(db, "critic", failed.id, None))
    assert saved["step"] == 4 and saved["epoch"] == 0 and saved["batches"] == 4  # the first epoch's last step

    second: list[int] = []
    resumed = fit_critic(db, config, base_model=str(tiny_model_dir), on_progress=stopping_at(0, second))
    assert resumed.run_id == failed.id and run_row(db, failed.id).status == "done"
    assert second[0] == 5 and second[-1] == 8 and resumed.metrics["resumed_at_step"] == 4
    assert stored_steps(db, failed.id) == list(range(1, 9))
    assert len(resumed.metrics["epochs"]) == 2 and not snapshot_folder(db, "critic", failed.id, None).exists()

    whole = fit_critic(db, CriticConfig(**CRITIC, snapshot_minutes=0), base_model=str(tiny_model_dir))
    assert whole.run_id != failed.id and "resumed_at_step" not in whole.metrics
    assert_same_weights(resumed.path, whole.path)
    assert len(resumed.metrics["epochs"]) == len(whole.metrics["epochs"])
    for mine, theirs in zip(resumed.metrics["epochs"], whole.metrics["epochs"]):
        assert mine == pytest.approx(theirs)


def test_a_stopped_sweet_policy_continues_to_the_uninterrupted_weights(tmp_path, tiny_model_dir):
    db, _ = graded_store(tmp_path)
    critic = fit_critic(db, CriticConfig(**CRITIC), base_model=str(tiny_model_dir)).checkpoint_id
    config = PolicyConfig(**SWEET, snapshot_minutes=EVERY_STEP)
    first: list[int] = []
    first_stages: list[str] = []
    with pytest.raises(Stop):
        fit_policy(db, config, "sweet", base_model=str(tiny_model_dir), critic_checkpoint=critic,
                   on_progress=stopping_at(4, first, first_stages))
    failed = stopped(db, "policy:sweet")
    assert latest(snapshot_folder(db, "policy", failed.id, None))["step"] == 3

    second: list[int] = []
    second_stages: list[str] = []
    resumed = fit_policy(db, config, "sweet", base_model=str(tiny_model_dir), critic_checkpoint=critic,
                         on_progress=stopping_at(0, second, second_stages))
    assert resumed.run_id == failed.id and run_row(db, failed.id).status == "done"
    # The reference log-probs came back from the snapshot: no second pass over the pairs (the weights below
    # show they are the uninterrupted run's).
    assert "reference" in first_stages and "reference" not in second_stages
    assert second[0] == 4 and resumed.metrics["resumed_at_step"] == 3
    assert resumed.metrics["turns_sampled"] == 0  # its candidates were stored before it stopped
    with db.read() as session:
        pairs = session.exec(select(SweetPair).where(SweetPair.run_id == failed.id)).all()
    assert len(pairs) == resumed.metrics["pairs"]  # built again, not added twice
    assert stored_steps(db, failed.id) == list(range(1, resumed.metrics["steps"] + 1))

    whole = fit_policy(db, PolicyConfig(**SWEET, snapshot_minutes=0), "sweet", base_model=str(tiny_model_dir),
                       critic_checkpoint=critic)
    assert whole.run_id != failed.id and whole.metrics["steps"] == resumed.metrics["steps"]
    assert_same_weights(resumed.path, whole.path)
    assert resumed.metrics["train_loss"] == pytest.approx(whole.metrics["train_loss"])


def test_a_rerun_on_other_data_starts_a_new_run(tmp_path, tiny_model_dir):
    from colbench.official import import_trajectories

    db, config, failed = stopped_critic(tmp_path, tiny_model_dir, at=3)
    task = backend_task(9)
    import_trajectories(db, write_jsonl(tmp_path / "more.jsonl", [trajectory(task, 2, 1.0), trajectory(task, 3, 0.0)]))
    fresh = fit_critic(db, config, base_model=str(tiny_model_dir))
    assert fresh.run_id != failed.id and "resumed_at_step" not in fresh.metrics
    assert run_row(db, failed.id).status == "failed"


def test_a_critic_killed_mid_run_continues_under_its_own_id(tmp_path, tiny_model_dir):
    db, url = graded_store(tmp_path)
    command = [sys.executable, "-m", "colbench.cli.app", "--db", url, "critic", "fit", "--model", str(tiny_model_dir),
               "--epochs", "30", "--batch-size", "1", "--max-len", "160", "--heldout", "0", "--lora-rank", "4",
               "--device", "cpu", "--lr", "1e-3", "--snapshot-minutes", "1e-9", "--json"]
    env = dict(os.environ, NO_COLOR="1", OMP_NUM_THREADS="1")
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    folder = None
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None:
        with db.read() as session:
            run = session.exec(select(TrainingRun)).first()
        if run is not None:
            folder = snapshot_folder(db, "critic", run.id, None)
            if (saved := latest(folder)) is not None and saved["step"] >= 3:
                break
        time.sleep(0.05)
    assert process.poll() is None, process.stderr.read().decode()[-2000:]
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert run_row(db, run.id).status == "running"  # nothing marked it: the process is gone

    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["run_id"] == run.id and run_row(db, run.id).status == "done"
    assert result["metrics"]["resumed_at_step"] >= 3 and not folder.exists()
    assert stored_steps(db, run.id) == list(range(1, 30 * 8 + 1))


def test_a_damaged_snapshot_is_refused_in_one_line_and_the_run_kept(tmp_path, tiny_model_dir):
    from colbench.training.config import DataError

    db, config, failed = stopped_critic(tmp_path, tiny_model_dir, at=3)
    folder = snapshot_folder(db, "critic", failed.id, None)
    for shard in (folder / latest(folder)["folder"]).glob("*.distcp"):
        shard.write_bytes(b"")  # e.g. a disk that filled as it was written
    refusal = rf"run {failed.id}'s snapshot .* cannot be loaded \(EOFError\); remove"
    with pytest.raises(DataError, match=refusal) as refused:
        fit_critic(db, config, base_model=str(tiny_model_dir))
    assert "\n" not in str(refused.value) and run_row(db, failed.id).status == "failed"
