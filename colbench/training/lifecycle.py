"""The life of a training run, written once for the critic and every policy recipe.

    with training_run(db, kind="critic", base_model=..., settings=..., ...) as run:
        ...load and prepare (run.id is known)...
        with run.step_log() as steps:
            recipe.train(steps)
        checkpoint_id, folder = run.finish(recipe.save, metrics=..., watermark=..., lineage=...)

Entering starts the run's row (on the main process only: under ``accelerate launch`` one
process writes) and gives every process its id; the block runs under the run's heartbeat;
``finish`` writes the model card, saves the checkpoint folder and records checkpoint,
metrics, watermark and lineage. Anything that leaves the block by raising (an error,
Ctrl-C, SIGTERM, which the command line raises as an exception) marks the run failed
with its reason and is raised again: what was stored before it stays, and the next run
resumes from it.
"""
from __future__ import annotations

import shutil
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Sequence

from colbench.training.checkpoints import (
    add_checkpoint,
    card_maker,
    checkpoint_folder,
    fail_run,
    finish_run,
    heartbeat,
    reopen_run,
    run_label,
    start_run,
    step_folder,
)
from colbench.training.steplog import StepLog

# save(folder, card) → (adapter, sha256): the recipe's own save (sha256 None off the main process).
Save = Callable[[Path, object], "tuple[bool, str | None]"]


@dataclass
class LiveRun:
    """A started training run, as the block inside :func:`training_run` sees it."""

    db: object
    id: int  # the same on every process
    main: bool  # this process writes to the store
    kind: str  # the run's kind: "critic" or "policy:<algo>"
    base_model: str
    settings: dict  # the run's config, as recorded
    name: str | None
    report_to: str
    out: str | None  # the checkpoint folder asked for (None: the store's default)

    @property
    def checkpoint_kind(self) -> str:
        return self.kind.split(":")[0]

    @contextmanager
    def step_log(self) -> Iterator[StepLog]:
        """Per-step figures into the store and the trackers (the main process writes; see steplog.py)."""
        steps = StepLog(self.db, self.id if self.main else None, report_to=self.report_to,
                        name=run_label(self.db, self.kind.replace(":", "-"), self.id),
                        config=self.settings if self.main else None)
        try:
            yield steps
        finally:
            steps.close()

    def finish(self, save: Save, *, metrics: dict, watermark: int | None,
               lineage: Sequence[tuple[int, int | None]]) -> tuple[int | None, Path]:
        """Save the checkpoint (its model card names the rollouts the lineage's trajectories came
        from) and record the run as done. Returns (checkpoint id, None off the main process; folder)."""
        card = None
        if self.main:
            card = card_maker(self.db, kind=self.kind, run_id=self.id, name=self.name, base_model=self.base_model,
                              config=self.settings,
                              metrics=metrics, trajectory_ids={trajectory for trajectory, _ in lineage})
        folder = checkpoint_folder(self.db, self.checkpoint_kind, self.id, self.out)
        adapter, digest = save(folder, card)
        checkpoint_id = None
        if self.main:
            checkpoint_id = finish_run(
                self.db, self.id, kind=self.checkpoint_kind, base_model=self.base_model, folder=folder, adapter=adapter,
                sha256=digest,
                metrics=metrics, watermark=watermark, lineage=lineage,
            )
        return checkpoint_id, folder


    def checkpoint(self, save: Save, *, step: int, metrics: dict) -> tuple[int | None, Path]:
        """Save a checkpoint of a run still under way (an online run's every few steps) into its own folder.
        Returns (checkpoint id, None off the main process; folder)."""
        final = checkpoint_folder(self.db, self.checkpoint_kind, self.id, self.out)
        folder = step_folder(final, step)  # beside the final folder, which stays empty till then
        if self.main and folder.exists():  # written by this run before it stopped, but never recorded: redone
            shutil.rmtree(folder)
        adapter, _ = save(folder, None)
        checkpoint_id = None
        if self.main:
            checkpoint_id = add_checkpoint(self.db, self.id, kind=self.checkpoint_kind, base_model=self.base_model,
                                           folder=folder, adapter=adapter, step=step, metrics=metrics)
        return checkpoint_id, folder


@contextmanager
def training_run(db, *, kind: str, base_model: str, parent_checkpoint_id: int | None, settings: dict,
                 name: str | None = None,
                 tags: Sequence[str] = (), report_to: str = "none", out: str | None = None,
                 on_cpu: bool = False, resume: int | None = None) -> Iterator[LiveRun]:
    """Start a training run (see the module's docstring) and fail it if its block raises. ``resume``: the id of a
    failed or finished run to run again instead, with ``settings`` (an online run continues at its last saved step,
    or past its end when extended)."""
    from accelerate import PartialState

    state = PartialState(cpu=on_cpu)
    run_id = None
    if state.is_main_process and resume is not None:
        run_id = reopen_run(db, resume, settings, checkpoint_folder(db, kind.split(":")[0], resume, out))
    elif state.is_main_process:
        run_id = start_run(db, kind=kind, base_model=base_model, parent_checkpoint_id=parent_checkpoint_id,
                           config=settings,
                           name=name, tags=tags)
    if state.num_processes > 1:
        from accelerate.utils import broadcast_object_list

        run_id = broadcast_object_list([run_id])[0]
    run = LiveRun(db, run_id, state.is_main_process, kind, base_model, settings, name, report_to, out)
    with heartbeat(db, run_id if run.main else None):
        try:
            yield run
        except BaseException as exc:  # Ctrl-C and SIGTERM too: the run says why it stopped
            if run.main:
                fail_run(db, run_id, exc)
            raise
