"""A store's dialogues written by `colbench export --ids` and restored by `trajectories import --keep-ids` into a
fresh store (SQLite and PostgreSQL) are the rows the first store held: a rerun of their rollout finds them done, and
a trainer reads the same dialogues, in the same order, as the same sampled tokens. A study whose store is lost between
sessions rebuilds its policies from these files instead of sampling again (scripts/lite_study_4.sh)."""
from __future__ import annotations

import json

import pytest
from sqlmodel import select

from colbench.families.backend import BackendEnv
from colbench.grading.grader import Grader
from colbench.official import STORED_TRAJECTORY, export_official, import_trajectories, import_tasks
from colbench.rollout import Rollout
from colbench.rollout_config import RolloutConfig
from colbench.simulators.rulebased.backend import BuiltinSimulator
from colbench.store import queries
from colbench.store.db import Database
from colbench.store.models import Task, Trajectory, Turn
from colbench.training.sequences import agent_turns
from colbench.training.trainer import trajectory_rows
from conftest import write_jsonl
from officialdata import backend_task

CONFIG = RolloutConfig(samples_per_task=2, max_new_tokens=6, batch_size=4, seed=3)
# What a restore leaves to the new store: when its rows were written, by which process, and its own bookkeeping.
NOT_RESTORED = {"created_at", "started_at", "finished_at", "heartbeat_at", "worker", "rollout_id", "content_hash"}


@pytest.fixture(scope="module")
def sampled(tmp_path_factory, tiny_engine):
    """A tiny model's rollout on two tasks x 2 (SQLite) and its export with ids."""
    folder = tmp_path_factory.mktemp("sampled")
    db = Database(f"sqlite:///{folder / 'first.db'}")
    import_tasks(db, write_jsonl(folder / "tasks.jsonl", [backend_task(i) for i in range(2)]), family="backend",
                 split="train")
    with db.read() as session:
        tasks = list(session.exec(select(Task).order_by(Task.id)))
    with Grader(sandbox="bwrap", workers=2) as grader:
        Rollout(db, tiny_engine, BuiltinSimulator(), BackendEnv(grader), CONFIG).run(tasks)
    export_official(db, folder / "export", ids=True)
    return db, folder / "export" / "trajectories.jsonl"


def rows(db) -> tuple[list[dict], list[dict]]:
    with db.read() as session:
        trajectories = [t.model_dump(exclude=NOT_RESTORED) for t in session.exec(select(Trajectory).order_by(
            Trajectory.id))]
        turns = [t.model_dump(exclude={"created_at"}) for t in session.exec(select(Turn).order_by(Turn.id))]
    return trajectories, turns


def trainer_reads(db, policy: str) -> list[int]:
    """The dialogues a trainer of ``policy``'s train split reads, in its order."""
    with db.read() as session:
        fresh, _ = queries.trained_data(session, family="backend", split="train", watermark=None, policies=[policy])
    return [t.id for t in fresh]


def test_a_restored_store_holds_the_rows_the_first_held_and_trains_on_the_same_tokens(sampled, db, tiny_engine,
                                                                                      tokenizer):
    first, saved = sampled
    summary = import_trajectories(db, saved, keep_ids=True)
    assert summary.added == 4
    assert rows(db) == rows(first)  # ids, policy, slot, grade, graded order, every turn's tokens and log-probs
    with first.read() as session:
        policy = session.exec(select(Trajectory.policy)).first()
    assert policy.startswith("hf:")  # the sampler's own name, not an import's

    # What a trainer reads: the same dialogues in the same (graded) order, each agent turn the tokens sampled.
    read = [trainer_reads(store, policy) for store in (first, db)]
    assert read[0] == read[1] and len(read[0]) == 4
    packed = [trajectory_rows(store, tokenizer, "backend", read[0], None) for store in (first, db)]
    assert packed[0] == packed[1]

    # A rerun of the rollout that made them finds every slot filled.
    with db.read() as session:
        tasks = list(session.exec(select(Task).order_by(Task.id)))
    with Grader(sandbox="bwrap", workers=2) as grader:
        stats = Rollout(db, tiny_engine, BuiltinSimulator(), BackendEnv(grader), CONFIG).run(tasks)
    assert (stats.total, stats.already_done, stats.finished) == (4, 4, 0)
    assert rows(db) == rows(first)

    # And restored again: nothing is added twice.
    assert import_trajectories(db, saved, keep_ids=True).added == 0


def test_the_sampled_tokens_are_what_a_trainer_reads_not_the_text_encoded_again(sampled, tmp_path, tokenizer):
    """The export's sampled tokens are the ones trained on: altered in the file, the restored store trains on the
    alteration (a record without them would be re-encoded from its text)."""
    first, saved = sampled
    records = [json.loads(line) for line in saved.read_text().splitlines()]
    message = next(m for m in records[0]["dialogue_history"] if m["role"] == "assistant")
    assert message["stored"]["token_ids"] and message["stored"]["token_logprobs"]
    message["stored"]["token_ids"] = [tokenizer.eos_token_id] * 3
    target = Database(f"sqlite:///{tmp_path / 'altered.db'}")
    import_trajectories(target, write_jsonl(tmp_path / "altered.jsonl", records), keep_ids=True)
    with target.read() as session:
        turns = queries.turns_for(session, [records[0]["trajectory_id"]])[records[0]["trajectory_id"]]
    assert agent_turns(tokenizer, "backend", turns)[0].completion_ids == [tokenizer.eos_token_id] * 3


def test_a_restore_onto_rows_already_given_or_with_a_bad_stored_field_is_refused_whole(sampled, tmp_path):
    first, saved = sampled
    records = [json.loads(line) for line in saved.read_text().splitlines()]
    assert set(records[0]["stored"]) == set(STORED_TRAJECTORY)
    cases = {
        "unknown field": ({"stored": records[0]["stored"] | {"colour": "red"}}, "'stored' has no field 'colour'"),
        "bad index": ({"stored": records[0]["stored"] | {"sample_index": -1}}, "stored.sample_index"),
        "not an object": ({"stored": [1]}, "'stored' must be an object"),
    }
    for name, (change, said) in cases.items():
        target = Database(f"sqlite:///{tmp_path / (name.replace(' ', '-') + '.db')}")
        bad = write_jsonl(tmp_path / "bad.jsonl", [records[0] | change] + records[1:])
        with pytest.raises(Exception, match=said):
            import_trajectories(target, bad, keep_ids=True)
        assert rows(target) == ([], []), name
    # A store that has given one of the file's graded order numbers to another dialogue refuses it.
    target = Database(f"sqlite:///{tmp_path / 'taken.db'}")
    other = records[0] | {"trajectory_id": 900, "dialogue_history": [
        m | {"turn_id": 900 + k} for k, m in enumerate(records[0]["dialogue_history"])]}
    other["stored"] = other["stored"] | {"sample_index": 7}
    import_trajectories(target, write_jsonl(tmp_path / "other.jsonl", [other]), keep_ids=True)
    with pytest.raises(Exception, match="graded order number"):
        import_trajectories(target, saved, keep_ids=True)
