"""Per-step figures of a training run: into the store as training goes, and to the trackers
``--report-to`` names (TensorBoard, Weights & Biases) through accelerate's tracker classes.

The store gets every optimiser step (``training_step``: loss, learning rate, gradient norm
and the loss's own statistics), written in small transactions every few steps and at the
end, so `colbench runs show` draws a run while it trains, and a killed run keeps its curve
up to its last write. Trackers write under ``<artefacts>/runs/<kind>-<run>-<store>``;
W&B runs offline unless ``WANDB_MODE`` says otherwise (nothing leaves the machine by default).
Only the main process writes.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

from colbench.errors import ColbenchError
from colbench.store import queries

TRACKERS = ("none", "tensorboard", "wandb")
WRITE_EVERY_STEPS = 10
WRITE_EVERY_S = 15.0


class TrackerUnavailable(ColbenchError, RuntimeError):
    pass


class StepLog:
    def __init__(self, db, run_id: int | None, *, report_to: str = "none", name: str = "", config: dict | None = None):
        self.db, self.run_id = db, run_id
        self.pending: list[tuple[int, int, dict]] = []
        self.written_at = time.monotonic()
        self.trackers = []
        if run_id is None or report_to == "none":
            return
        self.folder = db.folder / "runs" / name
        self.trackers = [_tracker(report_to, name, self.folder)]
        for tracker in self.trackers:
            tracker.start()
            if config:
                tracker.store_init_configuration(_plain(config))

    def record(self, step: int, epoch: int, values: dict) -> None:
        if self.run_id is None:
            return
        values = {k: float(v) for k, v in values.items() if isinstance(v, (int, float)) and v == v}
        self.pending.append((step, epoch, values))
        for tracker in self.trackers:
            tracker.log(values | {"epoch": epoch}, step=step)
        if len(self.pending) >= WRITE_EVERY_STEPS or time.monotonic() - self.written_at >= WRITE_EVERY_S:
            self.write()

    def write(self) -> None:
        if self.run_id is None or not self.pending:
            return
        with self.db.write() as session:
            queries.add_training_steps(session, self.run_id, self.pending)
        self.pending, self.written_at = [], time.monotonic()

    def close(self) -> None:
        """Write what is left (also when training stopped part-way) and close the trackers."""
        try:
            self.write()
        finally:
            for tracker in self.trackers:
                tracker.finish()
            self.trackers = []


def _tracker(kind: str, name: str, folder: Path):
    from accelerate.tracking import TensorBoardTracker, WandBTracker

    if kind not in TRACKERS:
        raise TrackerUnavailable(f"--report-to takes {', '.join(TRACKERS)}; got {kind!r}")
    folder.mkdir(parents=True, exist_ok=True)
    try:
        if kind == "tensorboard":
            import tensorboard  # noqa: F401  (accelerate's tracker needs it; say so in one line)

            return TensorBoardTracker(name, folder.parent)
        import wandb  # noqa: F401

        os.environ.setdefault("WANDB_MODE", "offline")
        os.environ.setdefault("WANDB_SILENT", "true")
        return WandBTracker("colbench", name=name, dir=str(folder))
    except ModuleNotFoundError as missing:
        raise TrackerUnavailable(
            f"--report-to {kind} needs the {missing.name} package: pip install {missing.name}"
        ) from None


def _plain(config: dict) -> dict:
    """Hyperparameters as trackers take them: str, bool, int, float (None and lists as text)."""
    return {k: v if isinstance(v, (str, bool, int, float)) else str(v) for k, v in config.items()}
