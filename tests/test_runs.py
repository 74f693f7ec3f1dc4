"""Runs as first-class objects: named and tagged rollouts and fits, the seed in a rollout's
identity, per-step training figures in the store and in TensorBoard / W&B, the model card,
`runs ls/show/rm`, all through the command line on real stores, the scripted agents, the
bwrap sandbox and the tiny model."""
from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from sqlmodel import select

from colbench.store import queries
from colbench.store.db import Database
from colbench.store.models import Checkpoint, Lineage, RolloutRun, TrainingRun, TrainingStep, Trajectory, utcnow
from conftest import command_line

LITE = ["--tasks", "backend-lite:train", "--limit", "6", "-k", "4", "--sandbox", "bwrap"]
FIT = ["--split", "lite-train", "--lora-rank", "4", "--max-len", "256", "--device", "cpu", "--batch-size", "2",
       "--heldout", "0", "--epochs", "2"]


@pytest.fixture
def colbench(capsys, monkeypatch, sqlite_url):
    return command_line(sqlite_url, capsys, monkeypatch)


@pytest.fixture
def colbench_on_both(capsys, monkeypatch, db_url):
    """The same on SQLite and on the loopback PostgreSQL server."""
    return command_line(db_url, capsys, monkeypatch)


def ok(result):
    code, out, err = result
    assert code == 0, err
    return out


def test_rollouts_are_named_tagged_and_told_apart_by_their_seed(colbench_on_both, db_url):
    colbench = colbench_on_both
    first = ok(colbench("rollout", "--engine", "scripted:expert", *LITE, "--name", "expert-a", "--tag", "demo", "--tag",
                        "lite", "--json"))
    assert first["run"] == "rollout:1" and first["name"] == "expert-a" and first["finished"] == 24
    again = ok(colbench("rollout", "--engine", "scripted:expert", *LITE, "--tag", "again", "--json"))
    assert (
        again["run"] == "rollout:1" and again["finished"] == 0 and again["already_done"] == 24
    )  # the same run, continued
    seeded = ok(colbench("rollout", "--engine", "scripted:expert", *LITE, "--seed", "5", "--json"))
    assert seeded["run"] == "rollout:2" and seeded["finished"] == 24  # another seed: other samples, not "already done"

    rows = {r["ref"]: r for r in ok(colbench("runs", "ls", "--json"))}
    assert rows["rollout:1"]["name"] == "expert-a" and rows["rollout:1"]["tags"] == ["demo", "lite", "again"]
    assert rows["rollout:2"]["setting"] == "seed=5" and rows["rollout:1"]["setting"] == ""
    assert rows["rollout:1"]["success_rate"] == 1.0 and rows["rollout:1"]["by_status"]["done"] == 24
    assert [r["ref"] for r in ok(colbench("runs", "ls", "--tag", "demo", "--json"))] == ["rollout:1"]
    table = ok(colbench("runs", "ls"))
    assert "expert-a" in table and "scripted:expert [seed=5]" in table  # the setting shown, not eaten as markup
    listed = ok(colbench("ls", "--run", "rollout:2", "--json"))
    assert len(listed) == 24 and {(r["run"], r["setting"], r["seed"]) for r in listed} == {("rollout:2", "seed=5", 5)}
    assert "scripted:expert [seed=5]" in ok(colbench("ls", "--limit", "1")) and "scripted:expert [seed=5]" in ok(
        colbench("eval", "--tasks", "backend-lite:train"))
    shown = ok(colbench("inspect", str(listed[0]["id"])))
    assert "seed=5" in shown and "rollout:2" in shown

    code, _, err = colbench("rollout", "--engine", "scripted:expert", *LITE, "--seed", "5", "--name", "expert-a")
    assert code == 1 and "the name 'expert-a' is taken by rollout:1" in err and len(err.strip().splitlines()) == 1
    code, _, err = colbench("rollout", "--engine", "scripted:expert", *LITE, "--name", "bad:name")
    assert code != 0 and "name" in err and len(err.strip().splitlines()) == 1
    with Database(db_url).read() as session:
        assert {t.rollout_id for t in session.exec(select(Trajectory))} == {1, 2}


def test_a_name_stays_on_the_run_it_named(colbench):
    """A rollout run is (policy, simulator, setting, task set): other tasks of the set (--offset,
    --limit) or another -k continue it, under the name it has. Another --name for it is refused in
    one line, so `runs ls` keeps what the user named; another --seed makes a run that takes one."""
    expert = ["rollout", "--engine", "scripted:expert", "--tasks", "backend-lite:train", "--sandbox", "bwrap"]
    first = ok(colbench(*expert, "--limit", "4", "-k", "2", "--name", "train4", "--json"))
    assert (first["run"], first["name"], first["continued"], first["finished"]) == ("rollout:1", "train4", False, 8)

    code, _, err = colbench(*expert, "--offset", "4", "--limit", "4", "-k", "1", "--name", "val-warm")
    assert code == 1 and len(err.strip().splitlines()) == 1, err
    assert "this rollout continues rollout:1 (train4)" in err and "drop --name val-warm" in err and "--seed" in err
    (row,) = ok(colbench("runs", "ls", "--json"))
    assert (row["ref"], row["name"], row["trajectories"]) == (
        "rollout:1",
        "train4",
        8
    )  # nothing renamed, nothing added

    more = ok(colbench(*expert, "--offset", "4", "--limit", "4", "-k", "1", "--json"))
    assert (more["run"], more["name"], more["continued"], more["finished"]) == ("rollout:1", "train4", True, 4)
    said = ok(colbench(*expert, "--offset", "4", "--limit", "4", "-k", "1"))
    assert said.startswith("rollout:1 (train4), continued: 0 trajectories finished, 4 were already done")
    again = ok(
        colbench(*expert, "--limit", "4", "-k", "2", "--name", "train4", "--json")
    )  # its own name: a plain rerun
    assert (again["run"], again["finished"], again["already_done"]) == ("rollout:1", 0, 8)

    seeded = ok(colbench(*expert, "--offset", "4", "--limit", "4", "-k", "1", "--seed", "1", "--name", "val-warm",
                         "--json"))
    assert (seeded["run"], seeded["name"], seeded["continued"], seeded["finished"]) == ("rollout:2", "val-warm", False,
                                                                                        4)
    rows = {r["name"]: r for r in ok(colbench("runs", "ls", "--json"))}
    assert {name: r["trajectories"] for name, r in rows.items()} == {"train4": 12, "val-warm": 4}
    assert "train4" in ok(colbench("runs", "ls"))


def test_training_runs_record_steps_report_to_tensorboard_and_write_a_model_card(colbench, sqlite_url, tiny_model_dir,
                                                                                 tmp_path):
    ok(colbench("rollout", "--engine", "scripted:mixed@0.5", *LITE, "--name", "mixed"))
    fit = ok(colbench("critic", "fit", "--model", str(tiny_model_dir), *FIT, "--name", "critic-a",
                      "--tag", "study", "--report-to", "tensorboard", "--json"))
    db = Database(sqlite_url)
    with db.read() as session:
        steps = session.exec(
            select(TrainingStep).where(TrainingStep.run_id == fit["run_id"]).order_by(TrainingStep.step)
        ).all()
        checkpoint = session.exec(select(Checkpoint)).one()
    assert [s.step for s in steps] == list(range(1, fit["metrics"]["steps"] + 1)) and len(steps) >= 2
    for step in steps:
        assert {"loss", "pair_accuracy", "margin", "lr", "grad_norm"} <= step.values.keys()
        assert 0 <= step.values["pair_accuracy"] <= 1 and step.values["grad_norm"] > 0
    epoch_means = [
        sum(s.values["loss"] for s in steps if s.epoch == e) / sum(s.epoch == e for s in steps) for e in (1, 2)
    ]
    assert epoch_means == pytest.approx([e["loss"] for e in fit["metrics"]["epochs"]], rel=1e-6)
    assert steps[-1].values["lr"] < steps[0].values["lr"]  # cosine decay, step by step

    # TensorBoard got the same figures, through accelerate's tracker.
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    logs = list((Path(sqlite_url.removeprefix("sqlite:///")).parent / "runs").glob(f"critic-{fit['run_id']}-*"))
    assert len(logs) == 1
    events = EventAccumulator(str(logs[0]))
    events.Reload()
    assert [round(e.value, 5) for e in events.Scalars("loss")] == [round(s.values["loss"], 5) for s in steps]

    card = (Path(checkpoint.path) / "README.md").read_text()
    assert f"train:{fit['run_id']} (critic-a)" in card and "rollout:1 (mixed)" in card and str(tiny_model_dir) in card
    assert "library_name: peft" in card and '"normalize": "turn"' in card

    shown = ok(colbench("runs", "show", "critic-a", "--plot", str(tmp_path / "curves.png")))
    assert "per step" in shown and any(ch in shown for ch in "▁▂▃▄▅▆▇█") and "rollout:1 (mixed)" in shown
    from PIL import Image

    assert Image.open(tmp_path / "curves.png").size[0] > 400
    as_json = ok(colbench("runs", "show", f"ckpt:{checkpoint.id}", "--json"))
    assert (
        as_json["ref"] == f"train:{fit['run_id']}"
        and as_json["tags"] == ["study"]
        and len(as_json["steps"]) == len(steps)
    )
    with db.read() as session:
        consumed = len(
            {row.trajectory_id for row in session.exec(select(Lineage).where(Lineage.run_id == fit["run_id"]))}
        )
    assert as_json["data"] == [{"rollout": "rollout:1", "name": "mixed", "trajectories": consumed}] and consumed > 0

    code, _, err = colbench("critic", "fit", "--model", str(tiny_model_dir), *FIT, "--name", "mixed")
    assert code == 1 and "taken by rollout:1" in err

    # A trained run's name stands for its checkpoint wherever one is taken; the store keeps the id.
    scored = ok(colbench("critic", "score", "--critic", "ckpt:critic-a", "--limit", "2", "--device", "cpu", "--json"))
    assert scored["checkpoint_id"] == checkpoint.id
    code, _, err = colbench("rollout", "--model", "ckpt:nosuch", *LITE)
    assert code == 1 and "ckpt:nosuch: no checkpoint has that id, and no trained run that name" in err


def test_a_run_resumed_in_a_later_session_counts_the_minutes_it_worked(colbench_on_both, db_url):
    """A run that worked 10 minutes and stood stopped 85 (killed, then resumed 65 minutes after its last heartbeat;
    finished, then extended 20 minutes later) worked 10 minutes: `runs show` and the study's validation file (both
    from TrainingRun.minutes) count its work, not the whole span, and say how long it stood stopped."""
    from colbench.training.checkpoints import reopen_run, start_run

    db = Database(db_url)
    run_id = start_run(db, kind="policy:grpo", base_model="m", parent_checkpoint_id=None, config={})

    def backdate(minutes: float, **fields) -> None:
        """Every time of the run moves ``minutes`` into the past, then ``fields`` are set."""
        with db.write() as session:
            run = session.get(TrainingRun, run_id)
            for name in ("started_at", "heartbeat_at", "finished_at"):
                if getattr(run, name) is not None:
                    setattr(run, name, getattr(run, name) - timedelta(minutes=minutes))
            for name, value in fields.items():
                setattr(run, name, value)

    # Started 75 minutes ago, its last heartbeat 10 minutes later; found dead only a minute ago.
    backdate(75, heartbeat_at=utcnow() - timedelta(minutes=65), status="failed",
             finished_at=utcnow() - timedelta(minutes=1))
    reopen_run(db, run_id)
    backdate(0, status="done", finished_at=utcnow())  # it finished at once
    with db.read() as session:
        assert session.get(TrainingRun, run_id).minutes == pytest.approx(10, abs=0.1)
    backdate(20)  # ... 20 minutes ago, and is extended now, finishing at once again
    reopen_run(db, run_id)
    backdate(0, status="done", finished_at=utcnow())
    shown = ok(colbench_on_both("runs", "show", f"train:{run_id}", "--json"))
    assert shown["minutes"] == pytest.approx(10, abs=0.1) and shown["paused_minutes"] == pytest.approx(85, abs=0.1)
    assert "10 min" in (view := ok(colbench_on_both("runs", "show", f"train:{run_id}"))) and "1 h 25 min" in view


def test_wandb_runs_offline_into_the_store_folder(colbench, sqlite_url, tiny_model_dir, monkeypatch):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    ok(colbench("rollout", "--engine", "scripted:mixed@0.5", *LITE))
    fit = ok(colbench("critic", "fit", "--model", str(tiny_model_dir), *FIT, "--epochs", "1", "--report-to", "wandb",
                      "--json"))
    folder = next((Path(sqlite_url.removeprefix("sqlite:///")).parent / "runs").glob(f"critic-{fit['run_id']}-*"))
    assert list(folder.glob("wandb/offline-run-*/run-*.wandb"))  # written offline: nothing left the machine


def test_removing_runs_respects_what_needs_them(colbench, sqlite_url, tiny_model_dir):
    ok(colbench("rollout", "--engine", "scripted:mixed@0.5", *LITE, "--name", "data"))
    fit = ok(colbench("critic", "fit", "--model", str(tiny_model_dir), *FIT, "--epochs", "1", "--json"))
    db = Database(sqlite_url)
    with db.read() as session:
        checkpoint = session.exec(select(Checkpoint)).one()
    folder = Path(checkpoint.path)

    code, _, err = colbench("runs", "rm", "data", "--yes")
    assert code == 1 and f"train:{fit['run_id']} trained on it" in err
    # Slots an interrupted rollout left pending are pruned on their own.
    with db.write() as session:
        pending = queries.Slot(policy="scripted:mixed@0.5", simulator="builtin", setting="", task_ids=(1, 2),
                               samples_per_task=6, rollout_id=1)
        assert queries.ensure_slots(session, pending) == 4
    code, _, err = colbench("runs", "rm", "data", "--unfinished")  # not a terminal: never removes without --yes
    assert code == 1 and "needs --yes" in err
    removed = ok(colbench("runs", "rm", "data", "--unfinished", "--yes", "--json"))
    assert removed["trajectories"] == 4
    with db.read() as session:
        assert session.exec(select(Trajectory).where(Trajectory.status == "pending")).all() == []
        assert len(session.exec(select(Trajectory)).all()) == 24

    removed = ok(colbench("runs", "rm", f"train:{fit['run_id']}", "--yes", "--json"))
    assert removed["checkpoints"] == [f"ckpt:{checkpoint.id}"] and removed["folders"] == [str(folder)]
    assert not folder.exists()
    with db.read() as session:
        assert session.exec(select(Checkpoint)).all() == [] and session.exec(select(TrainingStep)).all() == []
    ok(colbench("runs", "rm", "data", "--yes"))
    with db.read() as session:
        assert session.exec(select(Trajectory)).all() == [] and session.exec(select(RolloutRun)).all() == []
    code, _, err = colbench("runs", "show", "data")
    assert code == 1 and "no run is named 'data'" in err
