"""Snapshots that let a stopped offline run (the critic, a policy recipe) continue where it stopped.

Every ``--snapshot-minutes`` of training, at the end of an optimiser step, a run writes ``<its checkpoint
folder>-resume/step-<n>/``: the trainable weights and the optimiser's state through
torch.distributed.checkpoint (each process writes its own shards, so a sharded run snapshots as it trains,
without gathering), the learning-rate schedule, where its loop stands (epoch, batches of it done, the figures
so far, one file per process) and, for DPO, each pair's reference log-probs. ``latest.json`` then names it
(written under another name and renamed, so a run killed while writing keeps its previous snapshot) and the
older one is removed.

A rerun of the same command finds the newest failed run of the same kind, settings and name whose snapshot was
taken on the same data (the same watermark), reopens it, prepares as a new run does (the data, SWEET's
candidates, all from the starting policy; the reference log-probs, a pass over every pair that takes minutes
on a CPU, are read from the snapshot instead), loads the snapshot and replays the data order to the batch it
stopped at: the run continues as the one run, to the weights an uninterrupted run reaches. The snapshots are
removed when it finishes.
"""
from __future__ import annotations

import json
import os
import shutil
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch

from colbench.store import queries
from colbench.training.checkpoints import check_name_free, checkpoint_folder, stopped_run
from colbench.training.config import DataError
from colbench.training.modeling import summed_over_processes

LATEST = "latest.json"
REFERENCE = "reference.pt"


def snapshot_folder(db, kind: str, run_id: int, out: str | None) -> Path:
    """Beside the run's checkpoint folder, which stays empty until the run finishes."""
    final = checkpoint_folder(db, kind.split(":")[0], run_id, out)
    return final.with_name(f"{final.name}-resume")


def latest(folder: Path) -> dict | None:
    """What ``folder``'s newest complete snapshot records (step, watermark, processes, its subfolder), or None."""
    try:
        return json.loads((folder / LATEST).read_text())
    except (OSError, ValueError):
        return None


def continued_run(db, kind: str, settings: dict, *, name: str | None, out: str | None, watermark) -> int | None:
    """The run a rerun continues: the stopped run of ``kind`` with these settings (and name), when its snapshot
    was taken on data up to the same ``watermark``; None when there is none, and then ``name`` must be free. The
    main process asks (modeling.on_main): it alone writes runs, so another would find the run it reopens running."""
    run = stopped_run(db, kind, settings, name)
    saved = latest(snapshot_folder(db, kind, run.id, out)) if run is not None else None
    if saved is not None and saved["watermark"] == watermark:
        return run.id
    check_name_free(db, name)
    return None


def check_name(db, kind: str, settings: dict, name: str | None) -> None:
    """Before any data is read: ``name`` must be free, or the name of a stopped run this command may continue
    (asked on the main process, as continued_run is)."""
    if name:
        with db.read() as session:
            continued = queries.unfinished_run(session, kind, settings, name=name)
        if continued is None:
            check_name_free(db, name)


@dataclass
class Resumed:
    """Where a continued run's loop stands after its snapshot loads."""

    step: int  # optimiser steps done
    epoch: int  # the epoch under way (0-based)
    batches: int  # that epoch's batches done (whole optimiser steps)
    loop: dict  # the loop's own figures so far, this process's


class Snapshots:
    """A run's snapshots: ``due()`` at each optimiser step, ``save()`` when it is, ``load()`` once prepared."""

    def __init__(self, run, accelerator, minutes: float, watermark):
        self.run, self.accelerator, self.watermark = run, accelerator, watermark
        self.folder = snapshot_folder(run.db, run.kind, run.id, run.out)
        self.every_s = minutes * 60
        self.last = time.monotonic()

    def due(self, step: int, total: int) -> bool:
        """Whether to snapshot after optimiser step ``step`` of ``total`` (never the last: the run saves then).
        Every process decides the same: a snapshot is written by all of them."""
        if self.every_s <= 0 or step >= total:
            return False
        late = time.monotonic() - self.last >= self.every_s
        return summed_over_processes(self.accelerator, {"late": float(late)})["late"] > 0

    def after_step(self, step: int, total: int, steplog, parts: tuple, *, epoch: int, batches: int,
                   loop: dict, reference: list | None = None) -> None:
        """At the end of optimiser step ``step`` of ``total``: a snapshot of ``parts`` (scorer, optimiser, schedule)
        when one is due, the step log written first so that the stored curve reaches it."""
        if not self.due(step, total):
            return
        if steplog is not None:
            steplog.write()
        self.save(*parts, step=step, epoch=epoch, batches=batches, loop=loop, reference=reference)

    def save(self, scorer, optimizer, scheduler, *, step: int, epoch: int, batches: int, loop: dict,
             reference: list | None = None) -> None:
        import torch.distributed.checkpoint as dcp

        acc = self.accelerator
        name = f"step-{step}"
        target = self.folder / name
        if acc.is_main_process:
            shutil.rmtree(target, ignore_errors=True)  # written by a run that stopped before naming it
            target.mkdir(parents=True)
        acc.wait_for_everyone()
        with _quiet():
            dcp.save(_state(scorer, optimizer), checkpoint_id=str(target))
        torch.save(loop, target / f"loop-{acc.process_index}.pt")
        if acc.is_main_process:
            torch.save(scheduler.state_dict(), target / "scheduler.pt")
            if reference is not None:
                torch.save(reference, target / REFERENCE)
        acc.wait_for_everyone()  # every process's part is written before the snapshot is named
        if acc.is_main_process:
            before = latest(self.folder)
            record = {"step": step, "epoch": epoch, "batches": batches, "watermark": self.watermark,
                      "processes": acc.num_processes, "folder": name}
            staged = self.folder / f"{LATEST}.tmp"
            staged.write_text(json.dumps(record))
            os.replace(staged, self.folder / LATEST)
            if before is not None and before["folder"] != name:
                shutil.rmtree(self.folder / before["folder"], ignore_errors=True)
        self.last = time.monotonic()

    def reference(self) -> list | None:
        """The reference log-probs the newest snapshot kept (one pair of floats per DPO item, in the items'
        order), or None: no snapshot, or one written before they were kept."""
        saved = latest(self.folder)
        path = self.folder / saved["folder"] / REFERENCE if saved is not None else None
        return torch.load(path, weights_only=True) if path is not None and path.exists() else None

    def load(self, scorer, optimizer, scheduler) -> Resumed | None:
        """Load the newest snapshot into the prepared scorer, optimiser and schedule; None when there is none."""
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.api import CheckpointException  # a BaseException
        from torch.distributed.checkpoint.state_dict import set_state_dict

        saved = latest(self.folder)
        if saved is None:
            return None
        acc = self.accelerator
        if saved["processes"] != acc.num_processes:
            raise DataError(f"run {self.run.id} was snapshot by {saved['processes']} processes: continue it with as"
                            " many")
        source = self.folder / saved["folder"]
        state = _state(scorer, optimizer)
        try:
            with _quiet():
                dcp.load(state, checkpoint_id=str(source))
            module, inner = _parts(scorer, optimizer)
            set_state_dict(module, inner, model_state_dict=state["model"], optim_state_dict=state["optim"],
                           options=_options())
            scheduler.load_state_dict(torch.load(source / "scheduler.pt", weights_only=False))
            loop = torch.load(source / f"loop-{acc.process_index}.pt", weights_only=False)
        except (Exception, CheckpointException) as err:  # a damaged or foreign folder: say which, and how to go on
            reason = _first_line(err)
            raise DataError(f"run {self.run.id}'s snapshot {source} cannot be loaded ({reason}); remove"
                            f" {self.folder} to train the run from its start") from None
        self.last = time.monotonic()
        return Resumed(saved["step"], saved["epoch"], saved["batches"], loop)

    def discard(self) -> None:
        """The run finished: its snapshots are of no further use."""
        self.accelerator.wait_for_everyone()
        if self.accelerator.is_main_process:
            shutil.rmtree(self.folder, ignore_errors=True)


def walk(loader) -> None:
    """Draw an epoch's data order and train nothing: a continued run walks the epochs it finished, each drawing
    its shuffle from the loader's one seeded generator, to bring the generator to where it stood."""
    for _ in loader:
        pass


def remaining(loader, resumed: Resumed | None, epoch: int):
    """The loader's batches for ``epoch``, less those a continued run trained on before it stopped."""
    skip = resumed.batches if resumed is not None and epoch == resumed.epoch else 0
    for k, batch in enumerate(loader):
        if k >= skip:
            yield batch


def _first_line(err: BaseException) -> str:
    """What went wrong, in a line: a checkpoint error carries each rank's traceback, whose last line says it."""
    from torch.distributed.checkpoint.api import CheckpointException

    if isinstance(err, CheckpointException):
        failures = list(err.failures.values())  # (exception, its stack) of each rank that failed
        if failures:
            err = failures[0][0]
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def _options():
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    # Only what trains: a LoRA run's frozen base is the starting model, loaded as a new run loads it.
    return StateDictOptions(ignore_frozen_params=True, strict=False)


def _parts(scorer, optimizer):
    """The module holding the trainable weights (under DDP: its inner module) and the torch optimiser."""
    return getattr(scorer, "module", scorer), getattr(optimizer, "optimizer", optimizer)


def _state(scorer, optimizer) -> dict:
    from torch.distributed.checkpoint.state_dict import get_state_dict

    module, inner = _parts(scorer, optimizer)
    model_state, optim_state = get_state_dict(module, inner, options=_options())
    return {"model": model_state, "optim": optim_state}


@contextmanager
def _quiet():
    """One process with no process group is torch.distributed.checkpoint's single-process mode, as meant."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="torch.distributed is disabled")
        yield
