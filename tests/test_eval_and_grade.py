"""`colbench eval` metrics and `colbench grade` on imported official trajectories."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from sqlmodel import select

from colbench.eval import bootstrap, evaluate, pass_at_k, pass_hat_k
from colbench.families.backend import BackendEnv
from colbench.regrade import regrade
from colbench.grading.grader import Grader
from colbench.official import import_trajectories
from colbench.store.models import Evaluation, TestResult, Trajectory
from conftest import write_jsonl
from officialdata import backend_task, trajectory


def _import(db, tmp_path, policy: str, rewards_per_task: list[list[float]], split: str = "test") -> None:
    records = []
    for i, rewards in enumerate(rewards_per_task):
        for sample, reward in enumerate(rewards):
            record = trajectory(backend_task(i), turns=1 + sample, reward=reward)
            records.append(record)
    import_trajectories(db, write_jsonl(tmp_path / f"{policy}.jsonl", records), policy=policy, split=split)


def test_bootstrap_interval_brackets_the_mean_and_is_reproducible():
    values = [0.0, 1.0, 1.0, 0.5, 0.25, 1.0, 0.0, 0.75]
    first, second = bootstrap(values), bootstrap(values)
    assert first == second
    assert first.mean == pytest.approx(np.mean(values))
    assert first.low < first.mean < first.high and 0.0 <= first.low and first.high <= 1.0
    assert bootstrap([0.5] * 5).low == bootstrap([0.5] * 5).high == 0.5


@pytest.mark.parametrize("n,c", [(5, 0), (5, 2), (6, 3), (4, 4), (7, 1)])
def test_pass_at_k_and_pass_hat_k_equal_the_share_of_k_subsets(n, c):
    """The closed forms against brute force: every way to pick k of the n samples."""
    from itertools import combinations

    outcomes = [True] * c + [False] * (n - c)
    for k in range(1, n + 1):
        subsets = list(combinations(outcomes, k))
        assert pass_at_k(n, c, k) == pytest.approx(sum(any(s) for s in subsets) / len(subsets))
        assert pass_hat_k(n, c, k) == pytest.approx(sum(all(s) for s in subsets) / len(subsets))


def test_metrics_average_samples_per_task_then_tasks(db, tmp_path):
    # task 0: rewards 1.0 and 0.5; task 1: 0.0 and 1.0; task 2: 0.2 and 0.2
    _import(db, tmp_path, "a", [[1.0, 0.5], [0.0, 1.0], [0.2, 0.2]])
    _import(db, tmp_path, "b", [[0.0], [0.0], [1.0]])
    results = {r.policy: r for r in evaluate(db, "backend", "test")}
    a, b = results["a"], results["b"]
    assert (a.n_tasks, a.n_trajectories) == (3, 6)
    assert a.reward.mean == pytest.approx(np.mean([0.75, 0.5, 0.2]))
    assert a.success.mean == pytest.approx(np.mean([0.5, 0.5, 0.0]))
    # pass@k over both samples whatever their order: tasks 0 and 1 have one success of two, task 2 none.
    assert a.pass_at_k == {1: pytest.approx(1 / 3), 2: pytest.approx(2 / 3)}
    assert a.pass_hat_k == {1: pytest.approx(1 / 3), 2: pytest.approx(0.0)}  # no task has both samples right
    assert b.success.mean == pytest.approx(1 / 3) and b.pass_at_k == {1: pytest.approx(1 / 3)}
    with db.read() as session:
        assert {row.policy for row in session.exec(select(Evaluation))} == {"a", "b"}
    evaluate(db, "backend", "test")  # the same figures again: nothing new to record
    _import(db, tmp_path, "b2", [[1.0]])
    with db.write() as session:  # b's data changes (a second sample of its first task): its row changes, a's does not
        added = session.exec(select(Trajectory).where(Trajectory.policy == "b2")).one()
        added.policy, added.sample_index = "b", 1
    evaluate(db, "backend", "test")
    with db.read() as session:
        assert sorted(row.policy for row in session.exec(select(Evaluation))) == ["a", "b", "b"]


def test_rollouts_made_with_different_settings_are_separate_rows(db, tmp_path):
    _import(db, tmp_path, "a", [[1.0], [1.0]])
    _import(db, tmp_path, "a-short", [[0.0], [0.0]])
    with db.write() as session:  # the same policy, rolled out a second time with shorter turns
        for row in session.exec(select(Trajectory).where(Trajectory.policy == "a-short")):
            row.policy, row.setting = "a", "max=128"
            session.add(row)
    rows = {r.label: r for r in evaluate(db, "backend", "test", record=False)}
    assert set(rows) == {"a", "a [max=128]"}
    assert rows["a"].success.mean == 1.0 and rows["a [max=128]"].success.mean == 0.0
    only = evaluate(db, "backend", "test", setting="max=128", record=False)
    assert [(r.policy, r.setting, r.n_trajectories) for r in only] == [("a", "max=128", 2)]


def test_eval_cli_json_side_by_side(sqlite_url, tmp_path):
    from colbench.store.db import Database

    db = Database(sqlite_url)
    _import(db, tmp_path, "a", [[1.0], [0.0]])
    _import(db, tmp_path, "b", [[1.0], [1.0]])
    env = dict(os.environ, COLBENCH_DB=sqlite_url)
    result = subprocess.run([sys.executable, "-m", "colbench.cli.app", "eval", "--json"], capture_output=True,
                            text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    rows = {row["policy"]: row for row in json.loads(result.stdout)}
    assert rows["a"]["success"]["mean"] == 0.5 and rows["b"]["success"]["mean"] == 1.0
    assert rows["a"]["metric"] == "tests" and rows["b"]["reward"]["mean"] == 1.0
    table = subprocess.run([sys.executable, "-m", "colbench.cli.app", "eval"], capture_output=True, text=True,
                           env=dict(env, COLUMNS="200"), timeout=120)
    assert "50.0%" in table.stdout and "100.0%" in table.stdout


def test_grade_recomputes_rewards_of_imported_answers_in_the_sandbox(db, tmp_path):
    records = [trajectory(backend_task(i), turns=2, reward=0.0) for i in range(3)]  # official rewards say 0
    records[2][
        "answer"
    ] = "def shipping_cost_2(weight, express):\n    return round(2 + 2.5 * weight, 2)\n"  # ignores express
    import_trajectories(db, write_jsonl(tmp_path / "offline.jsonl", records), policy="llama")
    with Grader(sandbox="bwrap") as grader:
        summary = regrade(db, BackendEnv(grader), policy="llama")
    assert summary["graded"] == 3
    with db.read() as session:
        rows = {t.task_id: t for t in session.exec(select(Trajectory))}
        tests = session.exec(select(TestResult)).all()
    rewards = sorted(t.reward for t in rows.values())
    assert rewards[1:] == [1.0, 1.0] and 0.0 < rewards[0] < 1.0  # half the tests use express=True
    assert len(tests) == 30 and sum(not t.passed for t in tests) == 5

    # Graded again to the same grades: no trajectory is new data to a trainer (its watermark would count it). Under
    # other semantics the grades differ (`grading` names them) and each takes a new place.
    seqs = {t.id: t.graded_seq for t in rows.values()}
    with Grader(sandbox="bwrap") as grader:
        regrade(db, BackendEnv(grader), policy="llama")
    with db.read() as session:
        assert {t.id: t.graded_seq for t in session.exec(select(Trajectory))} == seqs
    with Grader(sandbox="bwrap", grading="strict") as grader:
        regrade(db, BackendEnv(grader), policy="llama")
    with db.read() as session:
        again = {t.id: t.graded_seq for t in session.exec(select(Trajectory))}
    assert all(again[i] > max(seqs.values()) for i in seqs)


def test_frontend_similarity_and_win_rate_ties_count_half(db, tmp_path):
    from officialdata import frontend_task

    def frontend_records(rewards):
        return [trajectory(frontend_task(i), turns=1, reward=r) for i, r in enumerate(rewards)]

    import_trajectories(db, write_jsonl(tmp_path / "a.jsonl", frontend_records([0.9, 0.5, 0.7])), policy="a",
                        split="test")
    import_trajectories(db, write_jsonl(tmp_path / "b.jsonl", frontend_records([0.8, 0.6, 0.7])), policy="b",
                        split="test")
    results = {r.policy: r for r in evaluate(db, "frontend", "test")}
    a, b = results["a"], results["b"]
    assert a.metric == "official" and a.success is None and a.pass_at_k == {}
    assert a.reward.mean == pytest.approx(0.7)
    assert a.win_rate == {"b": pytest.approx(0.5)} and b.win_rate == {"a": pytest.approx(0.5)}  # win, loss, tie
