"""Whose trajectories a trainer reads (--policies), sft on demonstrations, held-out splits
refused, and the task selectors of the backend-lite tier."""
from __future__ import annotations

import pytest
from sqlmodel import select

from colbench.official import import_trajectories
from colbench.store import queries
from colbench.store.db import Database
from colbench.store.models import Lineage, TrainingRun, Trajectory
from colbench.training import data as D
from colbench.training.config import CriticConfig, PolicyConfig
from colbench.training.policy import fit_policy
from colbench.wiring import parse_task_selector
from conftest import write_jsonl
from officialdata import backend_task, trajectory

SMALL = dict(batch_size=4, max_len=192, lora_rank=4, device="cpu", lr=1e-3)


@pytest.fixture
def two_policies(sqlite_url, tmp_path):
    """The same two tasks, each with a success and a failure, under a scripted agent and under a model."""
    db = Database(sqlite_url)
    for policy in ("scripted:expert", "smollm2"):
        records = [
            r for i in range(2) for r in (trajectory(backend_task(i), 2, 1.0), trajectory(backend_task(i), 3, 0.2))
        ]
        import_trajectories(db, write_jsonl(tmp_path / f"{policy.replace(':', '-')}.jsonl", records), policy=policy)
    with db.read() as session:
        by_policy = {}
        for t in session.exec(select(Trajectory)):
            by_policy.setdefault(t.policy, {})[t.id] = t
    return db, by_policy


def test_policy_patterns_select_exact_names_and_prefixes(two_policies):
    db, by_policy = two_policies
    with db.read() as session:
        def read(policies):
            fresh, _ = queries.trained_data(session, family="backend", split="train", watermark=None, policies=policies)
            return {t.id for t in fresh}

        everything = read(None)
        assert everything == set(by_policy["scripted:expert"]) | set(by_policy["smollm2"])
        assert read(["scripted:*"]) == read(["scripted:expert"]) == set(by_policy["scripted:expert"])
        assert read(["smollm2"]) == set(by_policy["smollm2"])
        assert read(["scripted:*", "smollm2"]) == everything
        assert read(["scripted"]) == set() and read(["smol*"]) == set(by_policy["smollm2"])
        assert read(["scripted_*"]) == set()  # '_' is a literal, not LIKE's any-character


def test_critic_pairs_come_from_the_chosen_policies_only(two_policies):
    db, by_policy = two_policies
    data = D.read_pairs(db, policies=["smollm2"])
    sides = {i for p in data.pairs for i in (p.chosen, p.rejected)}
    assert len(data.pairs) == 2 and sides <= set(by_policy["smollm2"])
    # Without the filter a task's first success (the scripted agent's) is chosen against the model's failure too.
    mixed = D.read_pairs(db).pairs
    assert any(by_policy["scripted:expert"].get(p.chosen) and by_policy["smollm2"].get(p.rejected) for p in mixed)


def test_sft_learns_from_demonstrations_only(two_policies, tiny_model_dir):
    db, by_policy = two_policies
    result = fit_policy(db, PolicyConfig(**SMALL, epochs=1), "sft", base_model=str(tiny_model_dir))
    with db.read() as session:
        run = session.get(TrainingRun, result.run_id)
        lineage = {row.trajectory_id for row in session.exec(select(Lineage).where(Lineage.run_id == run.id))}
    demonstrations = {i for i, t in by_policy["scripted:expert"].items() if t.success}
    assert run.kind == "policy:sft" and run.config["policies"] == "scripted:*" and lineage == demonstrations
    # Another source when asked for one.
    other = fit_policy(db, PolicyConfig(**SMALL, epochs=1, policies="smollm2"), "sft", base_model=str(tiny_model_dir))
    with db.read() as session:
        lineage = {row.trajectory_id for row in session.exec(select(Lineage).where(Lineage.run_id == other.run_id))}
    assert lineage == {i for i, t in by_policy["smollm2"].items() if t.success}


@pytest.mark.parametrize("split", ["test", "lite-val", "lite-test", "lite-novel", "lite-fresh", "lite-fresh2"])
def test_training_on_a_held_out_split_is_refused(split):
    with pytest.raises(ValueError, match="held out"):
        PolicyConfig(split=split)
    with pytest.raises(ValueError, match="held out"):
        CriticConfig(split=split)
    PolicyConfig(split="lite-train")  # the lite tier's training split is fine


def test_task_selectors():
    assert parse_task_selector("backend:train") == ("backend", "train")
    assert parse_task_selector("backend-lite:train") == ("backend", "lite-train")
    assert parse_task_selector("backend-lite:novel") == ("backend", "lite-novel")
    assert parse_task_selector("backend-lite:fresh") == ("backend", "lite-fresh")
    assert parse_task_selector("backend-lite:fresh2") == ("backend", "lite-fresh2")
    assert parse_task_selector("backend:lite-test") == ("backend", "lite-test")  # the stored name works too
    for wrong in ("backend-lite:lite-test", "frontend:lite-train", "backend-lite", "lite:test", "backend:novel"):
        with pytest.raises(ValueError, match="backend-lite:train"):
            parse_task_selector(wrong)


def test_sweet_selection_covers_as_many_distinct_tasks_as_its_fraction_allows(sqlite_url, tmp_path, tokenizer):
    """25 tasks x 4 samples stored task by task (as rollouts store them): 10% is 10 trajectories,
    one each of 10 distinct tasks (the official file's first rows, sample round by round); 40%
    is every task's first sample, then second samples of 15 tasks. By id, 10% would be all four
    samples of 3 tasks."""
    from colbench.training import sweet

    db = Database(sqlite_url)
    records = [
        trajectory(backend_task(i), turns, reward)
        for i in range(25)
        for turns, reward in ((2, 1.0), (3, 0.5), (4, 0.2), (5, 0.0))
    ]
    import_trajectories(db, write_jsonl(tmp_path / "task-by-task.jsonl", records))
    with db.read() as session:
        task_of = {t.id: t.task_id for t in session.exec(select(Trajectory))}
        agent_turns = {
            t.id: 2 + sorted(u for u in task_of if task_of[u] == task_of[t.id]).index(t.id)
            for t in session.exec(select(Trajectory))
        }

    def covered(fraction):
        jobs, _, read = sweet.select_turns(db, PolicyConfig(fraction=fraction), None, tokenizer)
        chosen = {j.trajectory_id for j in jobs}
        assert read == 100 and all(
            sum(j.trajectory_id == t for j in jobs) == agent_turns[t] for t in chosen
        )  # every agent turn
        return chosen

    tenth = covered(0.1)
    assert len(tenth) == 10 and len({task_of[t] for t in tenth}) == 10
    assert all(t == min(u for u in task_of if task_of[u] == task_of[t]) for t in tenth)  # each task's first sample
    forty = covered(0.4)
    tasks = [task_of[t] for t in forty]
    assert len(forty) == 40 and len(set(tasks)) == 25 and sum(tasks.count(k) == 2 for k in set(tasks)) == 15
    assert covered(0.1) == tenth  # the same selection on a rerun
