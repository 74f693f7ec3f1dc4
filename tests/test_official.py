"""Official-format interop: import, export, and what bad input does."""
from __future__ import annotations

import json

import pytest
from sqlmodel import select

from colbench.official import FormatError, export_official, import_tasks, import_trajectories
from colbench.store import queries
from colbench.store.models import Task, Trajectory, Turn
from conftest import write_jsonl
from officialdata import backend_task, frontend_task, trajectory


def _read(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_tasks_round_trip(db, tmp_path):
    records = [backend_task(i) for i in range(6)]
    records[2]["source_url"] = "https://example.org/x"  # unknown fields travel through
    path = write_jsonl(tmp_path / "backend.jsonl", records)
    summary = import_tasks(db, path, family="backend", split="test")
    assert (summary.added, summary.skipped) == (6, 0)
    front = write_jsonl(tmp_path / "frontend.jsonl", [frontend_task(i) for i in range(3)])
    import_tasks(db, front, family="frontend", split="train")

    out = tmp_path / "out"
    export_official(db, out)
    # Each exported record names its family (which decides it when read back); the rest is as it went in.
    assert _read(out / "backend_test_tasks.jsonl") == [{"family": "backend"} | r for r in records]
    assert _read(out / "frontend_train_tasks.jsonl") == [{"family": "frontend"} | frontend_task(i) for i in range(3)]


def test_task_reimport_is_idempotent(db, tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl", [backend_task(i) for i in range(4)])
    import_tasks(db, path, family="backend", split="train")
    again = import_tasks(db, path, family="backend", split="train")
    assert (again.added, again.skipped) == (0, 4)


def test_trajectories_round_trip_with_inputs_outputs_answer_reward(db, tmp_path):
    records = [trajectory(backend_task(i), turns=1 + i % 4, reward=[1.0, 0.3, None][i % 3]) for i in range(9)]
    path = write_jsonl(tmp_path / "offline.jsonl", records)
    summary = import_trajectories(db, path)
    assert (summary.added, summary.tasks_added) == (9, 9)

    with db.read() as session:
        traj = session.exec(select(Trajectory).order_by(Trajectory.id)).first()
        turns = queries.turns_of(session, traj.id)
    agent = [t for t in turns if t.role == "assistant"]
    assert agent[0].prompt == records[0]["dialogue_history"][1]["input"]
    assert agent[-1].raw == records[0]["dialogue_history"][-1]["output"]
    assert traj.answer == records[0]["answer"] and traj.reward == 1.0 and traj.success is True
    assert traj.grading == "official"  # an official file's reward was made by the official grader

    out = tmp_path / "out"
    export_official(db, out)
    # The export names the grading of every reward, and each task's family; otherwise the records come back as they
    # went in.
    exported = _read(out / "trajectories.jsonl")
    assert [r.get("grading") for r in exported] == [
        "official" if r.get("reward") is not None else None for r in records
    ]
    assert {r["task"].pop("family") for r in exported} == {"backend"}
    assert [{k: v for k, v in r.items() if k != "grading"} for r in exported] == records
    strict = [dict(r, grading="strict") for r in exported if "grading" in r]
    reimported = tmp_path / "strict.jsonl"
    write_jsonl(reimported, strict)
    import_trajectories(db, reimported, policy="again")
    with db.read() as session:
        assert {t.grading for t in session.exec(select(Trajectory).where(Trajectory.policy == "again"))} == {"strict"}


def test_trajectory_reimport_is_idempotent(db, tmp_path):
    path = write_jsonl(tmp_path / "offline.jsonl", [trajectory(backend_task(i)) for i in range(5)])
    import_trajectories(db, path)
    again = import_trajectories(db, path)
    assert (again.added, again.skipped) == (0, 5)
    with db.read() as session:
        assert len(session.exec(select(Trajectory)).all()) == 5


def test_several_samples_of_one_task_get_distinct_indexes(db, tmp_path):
    task = backend_task(1)
    records = [trajectory(task, turns=t) for t in (1, 2, 3)]
    import_trajectories(db, write_jsonl(tmp_path / "x.jsonl", records), policy="llama-8b")
    with db.read() as session:
        rows = session.exec(select(Trajectory).order_by(Trajectory.id)).all()
    assert [r.sample_index for r in rows] == [0, 1, 2] and {r.policy for r in rows} == {"llama-8b"}


@pytest.mark.parametrize(
    "bad_line, message",
    [
        ("{not json", "not valid JSON"),
        ('["a", "list"]', "expected a JSON object"),
        ('{"problem_description": "x"}', "'ground_truth'"),
        ('{"problem_description": "x", "ground_truth": "def f(): pass", "test_cases": {"test1": 3}}',
         "test case 'test1'"),
    ],
)
def test_malformed_task_line_imports_nothing_and_names_the_line(db, tmp_path, bad_line, message):
    good = [json.dumps(backend_task(i)) for i in range(3)]
    path = tmp_path / "tasks.jsonl"
    path.write_text("\n".join(good[:2] + [bad_line] + good[2:]) + "\n")
    with pytest.raises(FormatError) as caught:
        import_tasks(db, path, family="backend", split="train")
    assert f"{path}:3:" in str(caught.value) and message in str(caught.value)
    with db.read() as session:
        assert session.exec(select(Task)).all() == []


def test_malformed_trajectory_line_imports_nothing(db, tmp_path):
    records = [trajectory(backend_task(i)) for i in range(4)]
    records[3]["dialogue_history"][1]["role"] = "robot"
    path = write_jsonl(tmp_path / "offline.jsonl", records)
    with pytest.raises(FormatError, match=r"offline.jsonl:4: .*role 'robot'"):
        import_trajectories(db, path)
    with db.read() as session:
        assert session.exec(select(Trajectory)).all() == [] and session.exec(select(Turn)).all() == []
        assert session.exec(select(Task)).all() == []


def test_export_filters_by_policy(db, tmp_path):
    import_trajectories(db, write_jsonl(tmp_path / "a.jsonl", [trajectory(backend_task(i)) for i in range(3)]),
                        policy="a")
    import_trajectories(db, write_jsonl(tmp_path / "b.jsonl", [trajectory(backend_task(i), turns=2) for i in range(2)]),
                        policy="b")
    export_official(db, tmp_path / "out", policy="b")
    assert len(_read(tmp_path / "out" / "trajectories.jsonl")) == 2
