"""`validate_tasks` and `colbench tasks validate`: each rule catches what it should, in real bwrap sandboxes."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace

import pytest

from colbench.grading.sandboxes.bwrap import BwrapBackend
from colbench.tasks.spec import TaskSpec
from colbench.authoring.validate import (
    CLARIFICATION,
    DETERMINISTIC,
    DUPLICATES,
    PROTOCOL,
    RULES,
    WELL_FORMED,
    dedupe_key,
    validate_file,
    validate_tasks,
)
from conftest import write_jsonl

pytestmark = [
    pytest.mark.skipif(BwrapBackend.check() is not None, reason=f"bwrap unusable: {BwrapBackend.check()}"),
    # One worker builds the module's `report` (a minute of grading); split over two, each built it.
    pytest.mark.xdist_group("tasks_validate"),
]

SIGNATURE = "The signature of the function is: def tip_amount(bill, service)"
DESCRIPTION = f"I want to know how much to tip at restaurants. {SIGNATURE}"
REFERENCE = (
    "def tip_amount(bill, service):\n"
    "    rates = {'poor': 0.05, 'ok': 0.12, 'great': 0.2}\n"
    "    if bill <= 0:\n"
    "        return 0.0\n"
    "    return round(bill * rates.get(service, 0.1), 2)\n"
)
NAIVE = "def tip_amount(bill, service):\n    return round(bill * 0.15, 2)\n"
CALLS = ["tip_amount(50, 'ok')", "tip_amount(20, 'poor')", "tip_amount(80, 'great')", "tip_amount(0, 'ok')",
         "tip_amount(-5, 'great')", "tip_amount(33.3, 'meh')", "tip_amount(100, 'ok')", "tip_amount(12, 'great')",
         "tip_amount(7, 'poor')", "tip_amount(64, 'x')"]


def calls_as_tests(calls):
    return {f"test{i}": call for i, call in enumerate(calls, start=1)}


def task(description=DESCRIPTION, reference=REFERENCE, calls=CALLS, naive=NAIVE, family="backend") -> TaskSpec:
    return TaskSpec(family=family, problem_description=description, ground_truth=reference,
                    test_cases=calls_as_tests(calls), naive_solution=naive)


def renamed(name: str, reference: str, calls=CALLS, naive=NAIVE) -> TaskSpec:
    """The same shape of task around another function, so only the point under test differs."""
    return task(
        description=f"Task about {name}. The signature of the function is: def {name}(bill, service)",
        reference=reference.replace("tip_amount", name),
        calls=[c.replace("tip_amount", name) for c in calls],
        naive=naive.replace("tip_amount", name) if naive else None,
    )


def variant(k: int) -> str:
    """The reference with another default rate: not a duplicate of the others."""
    return REFERENCE.replace("rates.get(service, 0.1)", f"rates.get(service, 0.1{k})")


CASES = {
    "good": (task(), None, None),
    "no signature sentence": (task(description="I want to know how much to tip.", reference=variant(6)), WELL_FORMED,
                              "does not end with"),
    "signature names another function": (
        task(description="Tips. The signature of the function is: def tip(bill, service)", reference=variant(7)),
        WELL_FORMED, "signature names 'tip'"),
    "parameters differ": (
        replace(renamed("p_differ", variant(1)),
                problem_description="Tips. The signature of the function is: def p_differ(amount, service)"),
        WELL_FORMED, "parameters differ"),
    "two functions": (renamed("two_fns", REFERENCE + "\ndef helper(x):\n    return x\n"), WELL_FORMED,
                      "exactly one top-level function"),
    "syntax error": (renamed("syn_err", "def syn_err(bill, service)\n    return 1\n"), WELL_FORMED, "does not parse"),
    "top-level statement": (renamed("top_stmt", REFERENCE + "print_me = tip_amount(1, 'ok')\n"), WELL_FORMED,
                            "top-level"),
    "imports random": (
        renamed("uses_random",
                "def tip_amount(bill, service):\n    import random\n    return round(bill * random.random(), 2)\n"),
        DETERMINISTIC, "imports random"),
    "reads the clock": (
        renamed("uses_clock", (
            "def tip_amount(bill, service):\n    from datetime import datetime\n    return datetime.now().hour +"
            " bill\n"
        )),
        DETERMINISTIC, ".now()"),
    "set order differs between runs": (
        renamed("set_order", (
            "def tip_amount(bill, service):\n    return list(set(['apple', 'pear', 'fig', 'kiwi', 'lime', str(bill),"
            " service]))\n"
        )),
        DETERMINISTIC, "gave"),
    "returns None": (
        renamed("ret_none",
                "def tip_amount(bill, service):\n    if service == 'ok':\n        return None\n    return bill\n"),
        PROTOCOL, "returns None"),
    "nine tests": (renamed("nine", variant(2), calls=CALLS[:9]), PROTOCOL, "exactly 10 tests"),
    "raises": (renamed("raises", "def tip_amount(bill, service):\n    return bill / 0\n"), PROTOCOL,
               "ZeroDivisionError"),
    "too slow": (
        renamed("too_slow", "def tip_amount(bill, service):\n    while bill == 50:\n        pass\n    return bill\n"),
        PROTOCOL, "longer than the 1 s limit"),
    "NaN output": (renamed("nan_out", "def tip_amount(bill, service):\n    return float('nan')\n"), PROTOCOL,
                   "no canonical form"),
    "test does not call the function": (
        renamed("no_call", variant(3), calls=CALLS[:9] + ["len('abc')"]), PROTOCOL, "test10 does not call no_call()"),
    "naive passes everything": (renamed("naive_ok", variant(4), naive=variant(4)), CLARIFICATION,
                                "passes all 10 tests"),
    "naive does not parse": (renamed("naive_bad", variant(5), naive="def tip_amount(:\n"), CLARIFICATION,
                             "does not parse"),
    "recursion fails officially": (
        renamed("recurses",
                "def tip_amount(bill, service):\n    if bill < 0:\n        return tip_amount(-bill, service)\n"
                "    return round(bill * 0.1 + len(service), 2)\n"),
        PROTOCOL, "graded as an answer under the official grading, the reference fails test5; e.g. NameError"),
    "top-level import fails officially": (
        renamed("top_import",
                "import math\n\ndef tip_amount(bill, service):\n    return math.floor(bill * 0.15) + len(service)\n"),
        PROTOCOL, "official scoping: names defined at the reference's top level"),
    "blacklisted function name": (
        renamed("sudoku_tip", variant(8)), PROTOCOL,
        "contains 'sudo' (in the function name sudoku_tip), which is on the official blacklist"),
    "fence inside a line": (
        renamed("fence_mid",
                "def tip_amount(bill, service):\n    return 0.0 if service == '```' else round(bill * 0.11, 2)\n"),
        PROTOCOL, "cuts an answer at its first ``` (the reference has one at line 2)"),
    "duplicate reference": (
        task(description="Another story. The signature of the function is: def gratuity(total, quality)",
             reference=("def gratuity(total, quality):\n    # percentages by quality\n"
                        "    rates = {\"poor\": 0.05, \"ok\": 0.12, \"great\": 0.2}\n\n"
                        "    if total <= 0:  return 0.0\n"
                        "    return round(total * rates.get(quality, 0.1), 2)\n"),
             calls=[c.replace("tip_amount", "gratuity") for c in CALLS], naive=NAIVE.replace("tip_amount", "gratuity")),
        DUPLICATES, "same reference (up to formatting) as task 1 tip_amount"),
    "duplicate description": (
        task(reference=REFERENCE.replace("0.05", "0.06")), DUPLICATES, "same description as task 1"),
}


@pytest.fixture(scope="module")
def report():
    specs = [spec for spec, _, _ in CASES.values()]
    return validate_tasks(specs, sandbox="bwrap", exact_tests=10, require_naive=True)


@pytest.mark.parametrize("name", list(CASES))
def test_each_rule_catches_its_case(report, name):
    index = list(CASES).index(name)
    check = report.checks[index]
    _, rule, fragment = CASES[name]
    if rule is None:
        assert check.ok, check.findings
        assert all(check.rules[r] == "passed" for r in RULES)
        return
    assert not check.ok
    assert check.rules[rule] == "failed", check.findings
    messages = [f.message for f in check.failures if f.rule == rule]
    assert any(fragment in m for m in messages), messages
    assert check.first_failed_rule == rule or rule in (DUPLICATES, CLARIFICATION)


def test_report_counts_and_naive_share(report):
    counts = report.counts()
    assert counts[DUPLICATES]["failed"] == 2
    assert counts[CLARIFICATION]["failed"] >= 2
    assert report.sandbox == "bwrap"
    assert report.naive_checked >= 10 and report.naive_passing == 1
    assert 0 < report.naive_pass_share < 0.2
    payload = report.to_json()
    json.dumps(payload)
    assert payload["failed_tasks"] == len(CASES) - 1


def test_passable_officially_is_checked_even_with_a_strict_grader():
    from colbench.grading.grader import Grader

    specs = [renamed("sudoku_tip", variant(8)), task()]
    with Grader(sandbox="bwrap", grading="strict") as strict:
        result = validate_tasks(specs, grader=strict, exact_tests=10)
    blacklisted, good = result.checks
    assert good.ok, good.findings
    assert blacklisted.rules[PROTOCOL] == "failed" and blacklisted.rules[DETERMINISTIC] == "passed"
    assert "'sudo'" in blacklisted.failures[0].message


def test_dedupe_key_ignores_formatting_names_and_docstrings():
    a = "def f(x, y):\n    '''Doc.'''\n    return x + y  # add\n"
    b = "import math\ndef g(p, q):\n\n    return (p +\n            q)\n"
    assert dedupe_key(a) != dedupe_key(b)  # b imports math: a different program
    c = "def g(p, q):\n    return (p +\n            q)\n"
    assert dedupe_key(a) == dedupe_key(c)
    assert dedupe_key("def g(p, q):\n    return p - q\n") != dedupe_key(a)
    assert dedupe_key("def broken(:") is None


def test_missing_naive_is_a_warning_unless_required():
    spec = task(naive=None)
    relaxed = validate_tasks([spec], sandbox="bwrap")
    assert relaxed.ok and relaxed.checks[0].rules[CLARIFICATION] == "warning"
    assert "no naive solution, not checked" in relaxed.checks[0].findings[0].message
    assert relaxed.naive_checked == 0 and relaxed.naive_pass_share is None
    strict = validate_tasks([spec], sandbox="bwrap", require_naive=True)
    assert not strict.ok and strict.checks[0].rules[CLARIFICATION] == "failed"


def test_duplicates_of_existing_tasks_and_frontend_checks():
    page = "<!DOCTYPE html><html><body><h1>Bakery</h1></body></html>"
    specs = [
        task(),
        TaskSpec(family="frontend", problem_description="A bakery site.", ground_truth=page),
        TaskSpec(family="frontend", problem_description="A florist site.", ground_truth="<div>no page</div>"),
    ]
    result = validate_tasks(specs, sandbox="bwrap", existing=[task()])
    backend, good_page, bad_page = result.checks
    assert backend.rules[DUPLICATES] == "failed" and "a stored task" in backend.failures[0].message
    assert (
        good_page.ok and good_page.rules[WELL_FORMED] == good_page.rules[DETERMINISTIC] == "passed"
    )  # rendered twice, same page
    assert not bad_page.ok and "<html>" in bad_page.failures[0].message


def test_validate_file_reports_unreadable_lines(tmp_path):
    path = tmp_path / "tasks.jsonl"
    good = task().to_official() | {"naive_solution": NAIVE}
    lines = [json.dumps(good), "{not json", "", json.dumps({"problem_description": "x"})]
    path.write_text("\n".join(lines) + "\n")
    result = validate_file(path, sandbox="bwrap")
    assert [c.where for c in result.checks] == ["tasks.jsonl:1", "tasks.jsonl:2", "tasks.jsonl:4"]
    assert result.checks[0].ok
    assert "not valid JSON" in result.checks[1].failures[0].message
    assert "ground_truth" in result.checks[2].failures[0].message
    assert result.checks[2].rules[DETERMINISTIC] == "skipped"


def run_cli(*args):
    env = dict(os.environ, COLUMNS="200", NO_COLOR="1")
    return subprocess.run([sys.executable, "-m", "colbench.cli.app", *args], capture_output=True, text=True, env=env,
                          timeout=120)


def test_cli_names_failing_tasks_and_exits_nonzero(tmp_path):
    bad = renamed("uses_random", "def tip_amount(bill, service):\n    import random\n    return random.random()\n")
    records = [task().to_official() | {"naive_solution": NAIVE}, bad.to_official()]
    path = write_jsonl(tmp_path / "mine.jsonl", records)
    result = run_cli("tasks", "validate", str(path), "--sandbox", "bwrap")
    assert result.returncode == 1, result.stderr
    assert "mine.jsonl:2 uses_random  deterministic: the reference imports random" in result.stdout
    assert "needs clarification (warning): no naive solution, not checked" in result.stdout
    assert "well-formed" in result.stdout and "1 of 2 tasks pass" in result.stdout

    as_json = run_cli("tasks", "validate", str(path), "--sandbox", "bwrap", "--json", "--tests", "10")
    assert as_json.returncode == 1
    payload = json.loads(as_json.stdout)
    assert payload["tasks"] == 2 and payload["failed_tasks"] == 1
    assert payload["rules"]["deterministic"]["failed"] == 1

    good_only = write_jsonl(tmp_path / "good.jsonl", records[:1])
    assert run_cli("tasks", "validate", str(good_only), "--sandbox", "bwrap").returncode == 0
