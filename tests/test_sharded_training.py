"""--shard full (PyTorch FSDP2) under `colbench launch -n 2`, on CPU processes over gloo, against one
process on the same data: the same per-step losses, learning rates and gradient norms, the same final
weights, a checkpoint in the same folder format that the other engines load, and each process holding
about half of the parameters and optimiser state, as measured from its local shards.

The same data means the same effective batch: the launched run's two processes each take B examples
per step (accelerate deals the loader's batches out in turn), one process takes 2B, or B twice with
--grad-accum 2. Each process's loss is its batch's mean and the gradients are averaged over the
processes, so with equal halves the step is the one-process step. The preference losses' NLL term is a
mean over each process's own tokens (the halves differ in length), so the SWEET comparison runs with
--nll-weight 0. --autocast off keeps the products float32, where the two runs differ only in the order of
float sums: WEIGHT_TOLERANCE bounds that, and so does 5% of how far training moved the weights (observed:
1e-5 after 4 full fine-tuning steps that moved them by 2.5e-3).
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from safetensors.torch import load_file
from sqlmodel import select

from colbench.store.db import Database
from colbench.store.models import TrainingRun, TrainingStep
from conftest import graded_store

COLBENCH = [sys.executable, "-m", "colbench.cli.app"]
WEIGHT_TOLERANCE = 1e-4  # max |Δw| between the checkpoints (float32, weights up to ~3)
LOSS_TOLERANCE = 1e-5  # relative, per optimiser step
TINY = ["--device", "cpu", "--max-len", "160", "--lr", "1e-3", "--autocast", "off", "--json"]


def launch(processes: int = 2) -> list[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return [str(Path(sys.executable).parent / "accelerate"), "launch", "--multi_gpu", "--num_processes", str(processes),
            "--num_machines", "1", "--mixed_precision", "no", "--main_process_port", str(port), "-m",
            "colbench.cli.app"]


def fit(command: list[str], url: str, *args: str) -> dict:
    env = dict(os.environ, NO_COLOR="1", OMP_NUM_THREADS="1")
    env.pop("COLBENCH_DEBUG", None)
    done = subprocess.run(command + ["--db", url, *args], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)  # one document: rank 1 prints nothing


def steps(db: Database, run_id: int) -> list[dict]:
    with db.read() as session:
        rows = session.exec(select(TrainingStep).where(TrainingStep.run_id == run_id).order_by(TrainingStep.step)).all()
    return [row.values for row in rows]


def weights(folder: str) -> dict:
    files = sorted(Path(folder).glob("*.safetensors"))
    assert files, f"no weights in {folder}"
    return {k: v for f in files for k, v in load_file(f).items()}


def assert_same_training(db: Database, one: dict, two: dict) -> float:
    """The two runs took the same steps to the same weights; returns the largest weight difference."""
    a, b = steps(db, one["run_id"]), steps(db, two["run_id"])
    assert len(a) == len(b) == one["metrics"]["steps"] > 1
    for x, y in zip(a, b):
        assert y["loss"] == pytest.approx(x["loss"], rel=LOSS_TOLERANCE)
        assert y["lr"] == pytest.approx(x["lr"], rel=1e-9)  # the schedule advances once per optimiser step
        assert y["grad_norm"] == pytest.approx(x["grad_norm"], rel=1e-4)  # the global norm, over every shard
    assert two["metrics"]["train_loss"] == pytest.approx(one["metrics"]["train_loss"], rel=LOSS_TOLERANCE)
    wa, wb = weights(one["path"]), weights(two["path"])
    assert sorted(wa) == sorted(wb)  # the same files and tensors: tied weights saved once, adapters as peft writes them
    worst = max(float((wa[k].float() - wb[k].float()).abs().max()) for k in wa)
    moved = max(float((wa[k].float() - w.float()).abs().max()) for k, w in weights_before(one).items() if k in wa)
    assert worst <= WEIGHT_TOLERANCE and worst <= 0.05 * moved, (worst, moved)  # far less than training moved them
    return worst


def weights_before(run: dict) -> dict:
    """What the weights were before training: the tiny model's (full), or zero LoRA B matrices."""
    path = Path(run["path"])
    if (path / "adapter_config.json").exists():
        return {k: v * 0 for k, v in weights(run["path"]).items() if "lora_B" in k}
    return weights(run["base"])


def assert_halved(sharded: dict, whole: dict) -> None:
    """Each of the two processes holds about half of the one process's parameters and optimiser state
    (a shard is a row range of each tensor, rounded up on rank 0)."""
    for key in ("parameter_bytes", "trainable_parameter_bytes", "optimizer_bytes"):
        full = whole["held"][key][0]
        ranks = sharded["held"][key]
        assert full > 0 and len(ranks) == 2, (key, ranks, full)
        for held in ranks:
            assert abs(held - full / 2) <= 0.02 * full, (key, ranks, full)


@pytest.fixture(scope="module")
def store(tiny_model_dir, tmp_path_factory):
    return graded_store(tmp_path_factory.mktemp("sharded"))


def test_sharded_critic_full_fine_tune_matches_one_process(store, tiny_model_dir):
    db, url = store
    critic = ["critic", "fit", "--model", str(tiny_model_dir), "--full", "--epochs", "2", "--heldout", "0",
              "--from-scratch", *TINY]
    one = fit(COLBENCH, url, *critic, "--batch-size", "4")
    ddp = fit(launch(), url, *critic, "--batch-size", "2", "--shard", "none")
    fsdp = fit(launch(), url, *critic, "--batch-size", "2", "--shard", "full", "--gradient-checkpointing")
    for run in (one, ddp, fsdp):
        run["base"] = str(tiny_model_dir)
    assert (one["metrics"]["sharded"], ddp["metrics"]["sharded"], fsdp["metrics"]["sharded"]) == (False, False, True)
    assert_same_training(db, one, ddp)
    assert_same_training(db, one, fsdp)
    assert_halved(fsdp["metrics"], one["metrics"])
    assert (
        ddp["metrics"]["held"]["parameter_bytes"] == one["metrics"]["held"]["parameter_bytes"] * 2
    )  # DDP: a whole copy each
    # The gathered checkpoint is an ordinary one: its files as the one-process run writes them, its
    # checksum checked on load, and the engines load it (CTranslate2 converts it, as SWEET's CPU sampler does).
    assert sorted(p.name for p in Path(fsdp["path"]).iterdir()) == sorted(p.name for p in Path(one["path"]).iterdir())
    from colbench.engines import SamplingParams, make_engine
    from colbench.model_refs import checkpoint_lookup

    samples = []
    for run in (one, fsdp):
        with make_engine("ct2", run["checkpoint"], checkpoint_lookup=checkpoint_lookup(db), max_batch_size=2) as engine:
            generation = engine.generate([[{"role": "user", "content": "What unit is the weight in?"}]],
                                         SamplingParams(temperature=0, max_new_tokens=6))
            samples.append(generation[0].samples[0])
    assert samples[0].token_ids == samples[1].token_ids and len(samples[0].token_ids) > 0


def test_sharded_policies_match_one_process(store, tiny_model_dir):
    """SWEET (LoRA, candidates from the ct2 sampler on the stored weights, reference log-probs from the
    sharded model, activation checkpointing inside the sharded layers, the adapter gathered) and rejection fine-tuning
    (full fine-tuning): one process with
    --grad-accum 2 takes the two processes' step."""
    db, url = store
    model = str(tiny_model_dir)
    critic = fit(COLBENCH, url, "critic", "fit", "--model", model, "--epochs", "1", "--heldout", "0", "--from-scratch",
                 "--lora-rank", "4", "--batch-size", "2", *TINY)["checkpoint"]
    sweet = ["policy", "fit", "--algo", "sweet", "--model", model, "--critic", critic, "--fraction", "1",
             "--candidates", "4",
             "--max-new-tokens", "4", "--sample-batch-size", "8", "--lora-rank", "4", "--nll-weight", "0", *TINY]
    two = fit(launch(), url, *sweet, "--batch-size", "2", "--shard", "full", "--gradient-checkpointing")
    one = fit(COLBENCH, url, *sweet, "--batch-size", "2", "--grad-accum", "2")
    assert (
        two["metrics"]["turns_sampled"] == 24 and one["metrics"]["turns_sampled"] == 0
    )  # the same candidates, so the same pairs
    assert two["metrics"]["sampler"] == "ct2" and two["metrics"]["pairs"] == one["metrics"]["pairs"] > 0
    worst_sweet = assert_same_training(db, one, two)
    assert_halved(two["metrics"], one["metrics"])

    rft = ["policy", "fit", "--algo", "rft", "--model", model, "--full", "--epochs", "2", *TINY]
    two = fit(launch(), url, *rft, "--batch-size", "1", "--shard", "full")
    one = fit(COLBENCH, url, *rft, "--batch-size", "2")
    for run in (one, two):
        run["base"] = model
    worst_rft = assert_same_training(db, one, two)
    assert_halved(two["metrics"], one["metrics"])
    print(f"max |Δw|: sweet {worst_sweet:.2e}, rft {worst_rft:.2e}")


def test_a_stopped_sharded_run_continues_to_the_uninterrupted_weights(store, tiny_model_dir):
    """Ctrl-C to a `launch -n 2 --shard full` full fine-tune after a few snapshots (each process wrote its own
    shards of the weights and AdamW state), then the same command again: the run continues under its own id, and
    its steps and weights are an uninterrupted sharded run's."""
    import signal
    import time

    from colbench.training.snapshots import latest, snapshot_folder

    db, url = store
    model = str(tiny_model_dir)
    rft = ["policy", "fit", "--algo", "rft", "--model", model, "--full", "--epochs", "8", "--batch-size", "1",
           "--shard", "full", *TINY]
    named = ["--name", "stopped-sharded", "--snapshot-minutes", "1e-9"]
    env = dict(os.environ, NO_COLOR="1", OMP_NUM_THREADS="1")
    env.pop("COLBENCH_DEBUG", None)
    process = subprocess.Popen(launch() + ["--db", url, *rft, *named], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    saved, deadline = None, time.monotonic() + 300
    while process.poll() is None and time.monotonic() < deadline:
        with db.read() as session:
            run = session.exec(select(TrainingRun).where(TrainingRun.name == "stopped-sharded")).first()
        if run is not None and (saved := latest(snapshot_folder(db, run.kind, run.id, None))) and saved["step"] >= 3:
            break
        time.sleep(0.1)
    assert process.poll() is None, process.stderr.read().decode()[-3000:]
    os.killpg(process.pid, signal.SIGINT)  # Ctrl-C in the terminal: every process of the group
    process.wait(timeout=120)
    with db.read() as session:
        assert session.get(TrainingRun, run.id).status == "failed"

    resumed = fit(launch(), url, *rft, *named)
    assert resumed["run_id"] == run.id and resumed["metrics"]["resumed_at_step"] >= 3
    whole = fit(launch(), url, *rft, "--snapshot-minutes", "0")
    for one in (resumed, whole):
        one["base"] = model
    assert whole["run_id"] != run.id and "resumed_at_step" not in whole["metrics"]
    assert_same_training(db, whole, resumed)
