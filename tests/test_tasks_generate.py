"""`colbench tasks generate` against a loopback OpenAI-compatible server with canned candidates."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from colbench.engines import Engine, EngineError, Generation, Sample
from colbench.grading.sandboxes.bwrap import BwrapBackend
from colbench.official import spec_of
from colbench.store import queries
from colbench.store.db import Database
from colbench.authoring.generate import (
    UNPARSEABLE,
    generate_tasks,
    parse_candidate,
    parse_endpoint,
    read_passages,
    split_passages,
)
from conftest import write_jsonl

pytestmark = pytest.mark.skipif(BwrapBackend.check() is not None, reason=f"bwrap unusable: {BwrapBackend.check()}")


def calls(name: str, args: list[str]) -> dict[str, str]:
    return {f"test{i}": f"{name}({a})" for i, a in enumerate(args, start=1)}


POINTS_ARGS = ["10, 'bronze'", "10, 'silver'", "10, 'gold'", "0, 'gold'", "99.99, 'silver'", "250, 'bronze'",
               "12.5, 'platinum'", "-3, 'gold'", "1000, 'gold'", "49.5, 'silver'"]
POINTS_REF = (
    "def loyalty_points(amount, tier):\n"
    "    multipliers = {'bronze': 1, 'silver': 1.5, 'gold': 2}\n"
    "    if amount <= 0:\n"
    "        return 0\n"
    "    return int(amount) * multipliers.get(tier, 1) // 1\n"
)
GOOD_1 = {
    "problem_description": "I run a coffee shop loyalty scheme and want to work out the points a purchase earns. "
    "The signature of the function is: def loyalty_points(amount, tier)",
    "ground_truth": POINTS_REF,
    "test_cases": calls("loyalty_points", POINTS_ARGS),
    "naive_solution": "def loyalty_points(amount, tier):\n    return int(amount)\n",
}
GRADE_ARGS = ["95", "90", "89.5", "80", "79", "70", "65", "60", "10", "100"]
GOOD_2 = {
    "problem_description": (
        "As a teacher I need to turn a percentage into my school's letter grade. "
        "The signature of the function is: def letter_grade(score)"
    ),
    "ground_truth": (
        "```python\ndef letter_grade(score):\n    for cut, letter in ((90, 'A'), (80, 'B'), (70, 'C'), (65, 'D')):\n"
        "        if score >= cut:\n            return letter\n    return 'F'\n```"
    ),
    "test_cases": [f"letter_grade({a})" for a in GRADE_ARGS],  # a list, not an object: accepted
    "naive_solution": (
        "def letter_grade(score):\n    if score >= 90:\n        return 'A'\n    if score >= 80:\n        return 'B'\n"
        "    if score >= 70:\n        return 'C'\n    if score >= 60:\n        return 'D'\n    return 'F'\n"
    ),
}


def variant(record: dict, **changes) -> dict:
    return {**record, **changes}


CANDIDATES = {
    # good: JSON in a fence after some prose
    "good-fenced": "Here is a task based on the passage.\n\n```json\n"
    + json.dumps(GOOD_1, indent=2)
    + "\n```\nHope it helps!",
    # good: bare JSON, tests as a list, code in fences inside the string
    "good-bare": json.dumps(GOOD_2),
    "bad-json": '```json\n{"problem_description": "A task", "ground_truth": "def f(x):\n    return x", \n```',
    "syntax-error": json.dumps(
        variant(
            GOOD_1,
            problem_description=(
                "Points for a bakery card. The signature of the function is: def bakery_points(amount, tier)"
            ),
            ground_truth="def bakery_points(amount, tier)\n    return amount * 2\n",
            test_cases=calls("bakery_points", POINTS_ARGS),
            naive_solution="def bakery_points(amount, tier):\n    return amount\n"
        )
    ),
    "returns-none": json.dumps(
        variant(
            GOOD_1,
            problem_description="Points for a gym card. The signature of the function is: def gym_points(amount, tier)",
            ground_truth=(
                "def gym_points(amount, tier):\n    if tier == 'gold':\n        return None\n    return amount * 3\n"
            ),
            test_cases=calls("gym_points", POINTS_ARGS),
            naive_solution="def gym_points(amount, tier):\n    return amount\n"
        )
    ),
    "naive-passes": json.dumps(
        variant(
            GOOD_1,
            problem_description=(
                "Points for a book club. The signature of the function is: def book_points(amount, tier)"
            ),
            ground_truth="def book_points(amount, tier):\n    return round(amount * 1.25, 2)\n",
            test_cases=calls("book_points", POINTS_ARGS),
            naive_solution="def book_points(amount, tier):\n    return round(amount * 1.25, 2)\n"
        )
    ),
    # the first good task again, reformatted and renamed: a duplicate
    "duplicate": json.dumps(
        variant(
            GOOD_1,
            problem_description=(
                "My tea shop gives points per purchase. The signature of the function is: def tea_points(spent, level)"
            ),
            ground_truth=(
                'def tea_points(spent, level):\n    multipliers = {"bronze": 1, "silver": 1.5, "gold": 2}  # per'
                " level\n    if spent <= 0: return 0\n    return int(spent) * multipliers.get(level, 1) // 1\n"
            ),
            test_cases=calls("tea_points", POINTS_ARGS),
            naive_solution="def tea_points(spent, level):\n    return spent\n"
        )
    ),
    # the order of a set of strings differs between processes
    "nondeterministic": json.dumps(
        variant(
            GOOD_1,
            problem_description="List the perks of a tier. The signature of the function is: def perks(amount, tier)",
            ground_truth=(
                "def perks(amount, tier):\n    return list({'coffee', 'cake', 'mug', 'wifi', 'seat', tier,"
                " str(amount)})\n"
            ),
            test_cases=calls("perks", POINTS_ARGS),
            naive_solution="def perks(amount, tier):\n    return []\n"
        )
    ),
}
EXPECTED_REASONS = {
    UNPARSEABLE: 1,
    "well-formed": 1,
    "fits the protocol": 1,
    "needs clarification": 1,
    "no duplicates": 1,
    "deterministic": 1,
}


@pytest.fixture
def passages_file(tmp_path):
    records = [{"text": f"CASE<{name}> Some web text about shops, schools and loyalty schemes."} for name in CANDIDATES]
    return write_jsonl(tmp_path / "web.jsonl", records)


@pytest.fixture
def canned(openai_server):
    def respond(request):
        prompt = request["messages"][-1]["content"]
        name = re.search(r"CASE<([\w-]+)>", prompt).group(1)
        return CANDIDATES[name]

    openai_server.set_responder(respond)
    return openai_server


def stored(db_url):
    database = Database(db_url)
    with database.read() as session:
        tasks = queries.tasks_in(session)
    database.close()
    return tasks


def test_parse_candidate_is_lenient_about_wrapping_only():
    record = parse_candidate(CANDIDATES["good-bare"])
    assert record["test_cases"]["test10"] == "letter_grade(100)"
    assert record["ground_truth"].startswith("def letter_grade(score):") and "```" not in record["ground_truth"]
    assert parse_candidate(CANDIDATES["good-fenced"])["ground_truth"] == POINTS_REF
    trailing = '{"problem_description": "d", "ground_truth": "def f(x):\\n    return x\\n", "test_cases": ["f(1)",],}'
    assert parse_candidate(trailing)["test_cases"] == {"test1": "f(1)"}
    with pytest.raises(ValueError) as info:
        parse_candidate(CANDIDATES["bad-json"])
    assert info.value.reason == UNPARSEABLE
    with pytest.raises(ValueError) as info:
        parse_candidate('{"problem_description": "only this"}')
    assert info.value.reason == "well-formed"


def test_passages_from_text_and_jsonl(tmp_path, passages_file):
    text = "\n\n".join(f"Paragraph {i}. " + "words " * 30 for i in range(6))
    chunks = split_passages(text)
    assert 2 <= len(chunks) <= 4 and all(len(c) >= 200 for c in chunks)
    plain = tmp_path / "web.txt"
    plain.write_text(text)
    passages = read_passages([plain, passages_file])
    assert [p.index for p in passages[: len(chunks)]] == list(range(len(chunks)))
    assert passages[-1].line == len(CANDIDATES) and passages[-1].where == f"web.jsonl#{len(CANDIDATES) - 1}"
    assert parse_endpoint("http://h:1/v1#org/model") == ("http://h:1/v1", "org/model")
    with pytest.raises(ValueError):
        parse_endpoint("http://h:1/v1")


def run_cli(*args, db_url):
    env = dict(os.environ, COLUMNS="200", NO_COLOR="1", COLBENCH_DB=db_url)
    env.pop("COLBENCH_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "colbench.cli.app", *args], capture_output=True, text=True, env=env,
                          timeout=120)


def test_generate_stores_exactly_the_good_candidates(canned, passages_file, sqlite_url):
    endpoint = f"{canned.base_url}#test-model"
    result = run_cli("tasks", "generate", "--source", str(passages_file), "--endpoint", endpoint,
                     "--sandbox", "bwrap", "--json", db_url=sqlite_url)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["candidates"] == len(CANDIDATES) and summary["accepted"] == 2 and summary["stored"] == 2
    assert summary["reasons"] == EXPECTED_REASONS
    by_passage = {r["passage"]: r["reason"] for r in summary["rejects"]}
    names = list(CANDIDATES)
    assert by_passage[f"web.jsonl#{names.index('duplicate')}"] == "no duplicates"
    assert by_passage[f"web.jsonl#{names.index('nondeterministic')}"] == "deterministic"

    tasks = stored(sqlite_url)
    assert sorted(spec_of(t).problem_description.split(".")[0] for t in tasks) == [
        "As a teacher I need to turn a percentage into my school's letter grade",
        "I run a coffee shop loyalty scheme and want to work out the points a purchase earns",
    ]
    for task in tasks:
        assert task.source == "generated:test-model" and task.split == "train" and task.family == "backend"
        assert task.extra["passage_file"] == str(passages_file) and task.naive_solution
        assert len(task.test_cases) == 10
    assert {t.extra["passage_index"] for t in tasks} == {0, 1}
    prompts = [r["messages"][-1]["content"] for r in canned.requests]
    assert len(prompts) == len(CANDIDATES) and any("CASE<good-fenced>" in p for p in prompts)
    assert all("The signature of the function is: def NAME(PARAMS)" in p for p in prompts)

    # Again, with a table: the good ones are now duplicates of stored tasks.
    again = run_cli("tasks", "generate", "--source", str(passages_file), "--endpoint", endpoint,
                    "--sandbox", "bwrap", db_url=sqlite_url)
    assert again.returncode == 0, again.stderr
    assert "rejected candidates" in again.stdout and "no duplicates" in again.stdout
    assert (
        f"0 of {len(CANDIDATES)} candidates accepted from {len(CANDIDATES)} passages; 0 new tasks stored"
        in again.stdout
    )
    assert len(stored(sqlite_url)) == 2


def test_unreachable_endpoint_is_one_line_and_stores_nothing(passages_file, sqlite_url, closed_port):
    result = run_cli("tasks", "generate", "--source", str(passages_file), "--endpoint",
                     f"http://127.0.0.1:{closed_port}/v1#m", "--sandbox", "bwrap", db_url=sqlite_url)
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and "Traceback" not in result.stderr
    assert str(closed_port) in lines[0]
    assert stored(sqlite_url) == []


class FailsOnSecondBatch(Engine):
    model_ref = "fake"

    def __init__(self):
        self.calls = 0

    def generate(self, conversations, params):
        self.calls += 1
        if self.calls > 1:
            raise EngineError("endpoint went away")
        return [Generation("", 0, [Sample(json.dumps(GOOD_2))], 0.0) for _ in conversations]


def test_failure_midway_stores_nothing(db, passages_file):
    passages = read_passages([passages_file])
    with pytest.raises(EngineError):
        generate_tasks(db, FailsOnSecondBatch(), passages, model_name="fake", sandbox="bwrap", batch_size=2)
    with db.read() as session:
        assert queries.tasks_in(session) == []


def test_n_stops_once_enough_are_accepted(db, passages_file):
    passages = read_passages([passages_file])
    engine = FailsOnSecondBatch()
    summary = generate_tasks(db, engine, passages, model_name="fake", sandbox="bwrap", batch_size=4, n=1)
    assert engine.calls == 1 and summary.passages == 1 and summary.accepted == summary.stored == 1
    with db.read() as session:
        (task,) = queries.tasks_in(session)
    assert task.source == "generated:fake" and summary.task_ids == [task.id]
