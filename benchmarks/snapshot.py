"""What a resume snapshot (colbench/training/snapshots.py) costs against the training it protects.

SmolLM2-135M-Instruct (the embedded model) on this machine, full fine-tuning and LoRA (rank 16): one optimiser step
on a batch of one 1,024-token row (the study's dialogues are ~1,100 tokens), then a snapshot written and loaded back
through the trainers' own Snapshots class, timed in the same run. Printed: each one's seconds, the snapshot's size
on disk, and the snapshot's time as a share of the --snapshot-minutes default (10 minutes of training it protects).

    python benchmarks/snapshot.py [--tokens 1024] [--steps 3]
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def measure(full: bool, tokens: int, steps: int, root: Path) -> dict:
    from colbench.model_refs import DEFAULT_MODEL, model_source
    from colbench.store.db import Database
    from colbench.training.config import PolicyConfig
    from colbench.training.lifecycle import LiveRun
    from colbench.training.modeling import accelerator_for, model_to_train, optimizer_step, prepare_training
    from colbench.training.snapshots import Snapshots, latest

    db = Database(f"sqlite:///{root / ('full' if full else 'lora')}.db")
    config = PolicyConfig(full=full, device="cpu", batch_size=1, autocast="off").for_algo("rft")
    accelerator = accelerator_for(config)
    model = model_to_train(model_source(db, DEFAULT_MODEL), None, replace(config, dtype=None), "cpu",
                           lora_over_full=True)
    scorer, optimizer, _, scheduler, _ = prepare_training(accelerator, model, config, 8, 1)
    ids = torch.randint(0, 49152, (1, tokens))
    mask = torch.ones_like(ids)
    trained = torch.ones_like(ids, dtype=torch.bool)
    step_s = []
    for _ in range(steps):
        started = time.perf_counter()
        loss = -scorer(ids, mask, trained).sum() / tokens
        optimizer_step(accelerator, scorer, optimizer, scheduler, loss, 1.0)
        step_s.append(time.perf_counter() - started)
    run = LiveRun(db, 1, True, "policy:rft", DEFAULT_MODEL, {}, None, "none", None)
    snapshots = Snapshots(run, accelerator, 10.0, None)
    started = time.perf_counter()
    snapshots.save(scorer, optimizer, scheduler, step=steps, epoch=0, batches=steps, loop={"step": steps})
    save_s = time.perf_counter() - started
    size = folder_bytes(snapshots.folder / latest(snapshots.folder)["folder"])
    started = time.perf_counter()
    snapshots.load(scorer, optimizer, scheduler)
    load_s = time.perf_counter() - started
    snapshots.discard()
    step = min(step_s[1:] or step_s)
    return {"model": "SmolLM2-135M", "full": full, "tokens": tokens, "step_s": round(step, 2),
            "snapshot_s": round(save_s, 2), "load_s": round(load_s, 2), "snapshot_mb": round(size / 2**20),
            "snapshot_over_step": round(save_s / step, 2), "share_of_10_min": round(save_s / 600, 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        for full in (True, False):
            print(json.dumps(measure(full, args.tokens, args.steps, Path(root))))


if __name__ == "__main__":
    main()
