"""What lite dialogues did with the hidden facts (colbench/families/lite_truth.py): `colbench eval --facts`
on scripted agents whose every turn is known, and `colbench critic pairs` on a SWEET-RL run's pairs
built by hand around a real dialogue."""
from __future__ import annotations

import pytest

from colbench.engines.scripted import IRRELEVANT_QUESTIONS, answer_text
from colbench.families.lite_truth import pair_kinds
from colbench.grading.grader import Grader
from colbench.official import spec_of
from colbench.study import PAIRS, read_jsonl
from colbench.store import queries
from colbench.store.db import Database
from colbench.store.models import TrainingRun
from colbench.tasks.lite import facts_of
from colbench.wiring import select_tasks
from tests.conftest import command_line


@pytest.fixture
def cli(sqlite_url, capsys, monkeypatch):
    return command_line(sqlite_url, capsys, monkeypatch)


def roll(cli, policy: str) -> None:
    code, out, err = cli(
        "rollout", "--engine", policy, "--tasks", "backend-lite:train", "--limit", "3", "--sandbox", "bwrap", "--json"
    )
    assert code == 0 and out["finished"] == 3, err


def test_eval_facts_tells_asking_from_writing(cli, sqlite_url):
    for policy in ("scripted:expert", "scripted:repeat@1", "scripted:irrelevant@1", "scripted:early@0"):
        roll(cli, policy)
    tasks = [spec_of(t) for t in select_tasks(Database(sqlite_url), "backend-lite:train", 3)]
    facts = sum(len(facts_of(t)) for t in tasks)
    assert all(len(facts_of(t)) <= 3 for t in tasks)  # every extra question fits the turn limit

    code, rows, err = cli("eval", "--tasks", "backend:lite-train", "--facts", "--json")
    assert code == 0, err
    by_policy = {row["policy"]: row for row in rows}
    assert sorted(by_policy) == ["scripted:early@0", "scripted:expert", "scripted:irrelevant@1", "scripted:repeat@1"]
    assert all(row["trajectories"] == 3 for row in rows)
    expert, repeat, irrelevant, early = (
        by_policy[f"scripted:{p}"] for p in ("expert", "repeat@1", "irrelevant@1", "early@0")
    )
    for row, questions in ((expert, facts), (repeat, 2 * facts), (irrelevant, 2 * facts)):
        assert row["facts_obtained"] == row["every_fact"] == row["success_with_every_fact"] == 1.0
        assert row["success_without"] is None
        assert row["agent_turns"] == pytest.approx((questions + 3) / 3)  # the questions and three answers
    assert expert["questions"] == {"new fact": 1.0, "repeat": 0.0, "nothing": 0.0}
    assert repeat["questions"] == {"new fact": 0.5, "repeat": 0.5, "nothing": 0.0}
    assert irrelevant["questions"] == {"new fact": 0.5, "repeat": 0.0, "nothing": 0.5}
    # Answering at once: no fact, the naive code, and no question to count.
    assert early["facts_obtained"] == early["every_fact"] == 0.0 and early["success_without"] == 0.0
    assert early["success_with_every_fact"] is None and early["agent_turns"] == 1.0 and early["questions"] == {}

    code, text, _ = cli("eval", "--tasks", "backend:lite-train", "--facts", "--policy", "scripted:repeat@1")
    assert code == 0 and "scripted:repeat@1" in text and "50% / 50% / 0%" in text and "scripted:expert" not in text
    code, _, err = cli("eval", "--tasks", "frontend:test", "--facts")
    assert code == 1 and "not a backend split" in err and "Traceback" not in err


def test_critic_pairs_judges_each_side_against_the_dialogue_so_far(cli, sqlite_url, tmp_path):
    roll(cli, "scripted:expert")
    db = Database(sqlite_url)
    with db.read() as session:
        ids = queries.finished_trajectory_ids(session, policy="scripted:expert")
        tasks = {
            t.id: spec_of(t)
            for t in queries.tasks_by_id(
                session, [t.task_id for t in queries.trajectories_by_id(session, ids).values()]
            ).values()
        }
        dialogues = queries.turns_for(session, ids)
        by_id = queries.trajectories_by_id(session, ids)
    # The second agent turn of a dialogue with at least two facts: the first fact is known there.
    trajectory_id = next(i for i in ids if len(facts_of(tasks[by_id[i].task_id])) >= 2)
    task = tasks[by_id[trajectory_id].task_id]
    first, second = facts_of(task)[:2]
    turn = [t for t in dialogues[trajectory_id] if t.role == "assistant"][1]
    sides = {
        "new": second.question, "repeat": first.question, "nothing": IRRELEVANT_QUESTIONS[0],
        "right": answer_text(task.ground_truth), "naive": answer_text(task.naive_solution),
    }
    with db.write() as session:
        run_id = queries.start_run(session, kind="policy:sweet", base_model="hand", parent_checkpoint_id=None,
                                   config={})
        queries.replace_sweet_candidates(session, "hand", [turn.id], [
            {"run_id": run_id, "sampling_key": "hand", "turn_id": turn.id, "index": index, "content": text,
             "token_ids": [],
             "sampler_logp": 0.0} for index, text in enumerate(sides.values())
        ])
        candidate = {
            name: c.id for name, c in zip(sides, queries.sweet_candidates(session, "hand", [turn.id])[turn.id])
        }
        queries.add_sweet_pairs(
            session,
            [
                {"run_id": run_id, "turn_id": turn.id, "chosen_id": candidate[a], "rejected_id": candidate[b]}
                for a, b in (
                    ("new", "repeat"),
                    ("repeat", "new"),
                    ("nothing", "new"),
                    ("repeat", "right"),
                    ("right", "naive"),
                    ("naive", "right")
                )
            ]
        )

    found = pair_kinds(db, run_id)
    assert found.pairs == 6 and found.kinds == {
        "new fact > repeat": 1, "repeat > new fact": 1, "nothing > new fact": 1, "repeat > answer": 1,
        "answer > answer": 2,
    }
    assert found.preferred("new fact", "repeat") == (1, 1) and found.preferred("answer", "repeat") == (0, 1)
    assert found.answers_graded == {}
    with Grader(sandbox="bwrap") as grader:
        graded = pair_kinds(db, run_id, grader=grader)
    assert graded.answers_graded == {"chosen passed more": 1, "rejected passed more": 1}

    code, out, err = cli("critic", "pairs", f"train:{run_id}", "--grade", "--sandbox", "bwrap", "--json")
    assert code == 0 and out == graded.as_dict(), err
    # ... kept in a study's files, where `colbench study report` checks them against ground truth
    study = tmp_path / "study"
    code, _, err = cli("critic", "pairs", f"train:{run_id}", "--grade", "--sandbox", "bwrap", "--study", str(study),
                       "--arm", "sweet", "--label", "final")
    assert code == 0, err
    assert read_jsonl(study / PAIRS) == [{"arm": "sweet", "label": "final", "seed": 0} | graded.as_dict()]
    # a second training seed's run (its trainer's seed in its config) keeps the first seed's line beside its own
    with db.write() as session:
        session.get(TrainingRun, run_id).config = {"seed": 1}
    code, _, err = cli("critic", "pairs", f"train:{run_id}", "--grade", "--sandbox", "bwrap", "--study", str(study),
                       "--arm", "sweet", "--label", "final")
    assert code == 0, err
    assert [(row["label"], row["seed"]) for row in read_jsonl(study / PAIRS)] == [("final", 0), ("final", 1)]
    code, _, err = cli("critic", "pairs", f"train:{run_id}", "--study", str(study), "--arm", "sweet", "--label", "x")
    assert code == 1 and "--study needs --grade" in err
    code, text, _ = cli("critic", "pairs", f"train:{run_id}")
    assert (
        code == 0
        and "a new fact over re-asking a known one: 1 of 2 pairs" in text
        and "answering over re-asking a known fact: 0 of 1" in text
    )
    code, _, err = cli("critic", "pairs", "rollout:1")
    assert code == 1 and "is a rollout run" in err


def test_sweet_on_question_turns_only_leaves_out_every_answer(cli, sqlite_url, tokenizer):
    """--turns questions (study 3's configuration c): the same selected turns less each dialogue's answer."""
    from colbench.training.config import PolicyConfig
    from colbench.training.sweet import select_turns

    roll(cli, "scripted:expert")
    db = Database(sqlite_url)
    every, _, read = select_turns(db, PolicyConfig(split="lite-train", fraction=1.0), None, tokenizer)
    asking, _, _ = select_turns(db, PolicyConfig(split="lite-train", fraction=1.0, turns="questions"), None, tokenizer)
    with db.read() as session:
        answer_turns = {t.id for trajectory in {j.trajectory_id for j in every}
                        for t in queries.turns_of(session, trajectory)
                        if t.role == "assistant" and t.content.startswith("I WANT TO ANSWER")}
    assert len(answer_turns) == read  # each expert dialogue ends in one answer
    assert {j.turn_id for j in asking} == {j.turn_id for j in every} - answer_turns and asking


def test_the_oracle_ranks_candidates_by_ground_truth(cli, sqlite_url, tokenizer):
    """SWEET's oracle control (--score oracle) on a real expert dialogue, at its second agent turn
    (one fact known): a question for a fact not yet stated is worth 1, re-asking the known fact
    or asking what nothing answers 0, an answer its share of tests passed (graded in the sandbox)."""
    from colbench.engines.base import Generation, Sample
    from colbench.training.config import PolicyConfig
    from colbench.training.sweet import OracleRanking, select_turns

    roll(cli, "scripted:expert")
    db = Database(sqlite_url)
    jobs, _, _ = select_turns(db, PolicyConfig(split="lite-train", fraction=1.0), None, tokenizer)
    by_trajectory: dict[int, list] = {}
    for job in jobs:
        by_trajectory.setdefault(job.trajectory_id, []).append(job)
    trajectory_id, turns = next(
        (t, sorted(js, key=lambda j: j.turn_id)) for t, js in by_trajectory.items() if len(js) >= 3
    )
    with db.read() as session:
        task = spec_of(queries.tasks_by_id(session, [turns[0].task_id])[turns[0].task_id])
    facts = facts_of(task)
    texts = [facts[0].question, facts[1].question, IRRELEVANT_QUESTIONS[0], answer_text(task.ground_truth),
             answer_text(task.naive_solution)]
    generation = Generation("", 0, [Sample(text, [1, 2], [-1.0, -3.0]) for text in texts], 0.0)
    ranking = OracleRanking(db, turns, "backend")
    try:
        rows = ranking.score([turns[1]], [generation])[0]
    finally:
        ranking.close()
    values = [row["score"] for row in rows]
    assert values[:4] == [0.0, 1.0, 0.0, 1.0] and values[4] <= 0.6, values
    assert all(row["sampler_logp"] == -2.0 and "critic_logp" not in row for row in rows)
    code, _, err = cli(
        "policy", "fit", "--algo", "sweet", "--score", "oracle", "--critic", "ckpt:1", "--split", "lite-train"
    )
    assert code != 0 and "no --critic" in err
