"""A training run's life (colbench/training/lifecycle.py), without a model: what the store
holds when the block finishes, and when it is interrupted."""
from __future__ import annotations

import pytest

from colbench.store import queries
from colbench.store.db import Database
from colbench.store.models import Checkpoint, TrainingRun
from colbench.training.lifecycle import training_run


def test_an_interrupted_run_is_failed_with_its_reason_and_keeps_its_steps(sqlite_url):
    db = Database(sqlite_url)
    with pytest.raises(KeyboardInterrupt):
        with training_run(db, kind="policy:sft", base_model="smollm2", parent_checkpoint_id=None, settings={"lr": 1e-5},
                          name="short", on_cpu=True) as run:
            with run.step_log() as steps:
                steps.record(1, 1, {"loss": 0.5})
                steps.record(2, 1, {"loss": 0.25})
            raise KeyboardInterrupt  # Ctrl-C, or SIGTERM as the command line raises it
    with db.read() as session:
        stored = session.get(TrainingRun, run.id)
        figures = [(s.step, s.values["loss"]) for s in queries.training_steps(session, run.id)]
    assert (stored.status, stored.error, stored.name, stored.kind) == ("failed", "KeyboardInterrupt", "short",
                                                                       "policy:sft")
    assert stored.config == {"lr": 1e-5}
    assert figures == [(1, 0.5), (2, 0.25)]


def test_a_finished_run_saves_through_the_recipe_and_records_its_checkpoint(sqlite_url, tmp_path):
    db = Database(sqlite_url)
    saved = []

    def save(folder, card):
        folder.mkdir(parents=True)
        (folder / "README.md").write_text(card(True))
        saved.append(folder)
        return True, "0" * 64

    with training_run(db, kind="critic", base_model="smollm2", parent_checkpoint_id=None, settings={"beta": 1.0},
                      out=str(tmp_path / "critic"), on_cpu=True) as run:
        checkpoint_id, folder = run.finish(save, metrics={"train_loss": 0.1}, watermark=7, lineage=[])
    with db.read() as session:
        stored = session.get(TrainingRun, run.id)
        checkpoint = session.get(Checkpoint, checkpoint_id)
    assert saved == [folder] and folder == tmp_path / "critic"
    assert f"train:{run.id}" in (folder / "README.md").read_text()  # the card names its run
    assert (stored.status, stored.error, stored.data_watermark) == ("done", None, 7)
    assert (checkpoint.run_id, checkpoint.kind, checkpoint.path, checkpoint.adapter, checkpoint.sha256) == (run.id,
                                                                                                            "critic",
                                                                                                            str(folder),
                                                                                                            True,
                                                                                                            "0" * 64)
    assert checkpoint.metrics["train_loss"] == 0.1
