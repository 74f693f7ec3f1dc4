"""The backend-lite tier (colbench.tasks.lite): its size and splits, that it is deterministic,
that descriptions hide the hidden values, that references are short and officially clean,
that the tests make every hidden fact needed, that facts round-trip, and that the project's
own validator passes every task in real sandboxes."""
from __future__ import annotations

import ast
import collections
import re
import time

import pytest

from colbench.grading.sandboxes.bwrap import BwrapBackend
from colbench.grading.semantics import banned_text
from colbench.official import spec_of, task_from_record, task_row
from colbench.tasks.lite import (
    INSTANCES,
    LITE_MARKER,
    NOVEL_TEMPLATES,
    SOURCE_PREFIX,
    HiddenFact,
    facts_of,
    is_lite,
    lite_instances,
    lite_tasks,
    template_of,
)
from colbench.tasks.lite.fresh import FRESH_VALUES, PER_TEMPLATE as FRESH_PER_TEMPLATE
from colbench.tasks.lite.fresh2 import FRESH2_VALUES, PER_TEMPLATE as FRESH2_PER_TEMPLATE
from colbench.tasks.lite.templates import OPENERS, TEMPLATES
from colbench.tasks.spec import TaskSpec
from colbench.authoring.validate import RULES, SIGNATURE, dedupe_key, validate_tasks
from conftest import command_line

NEEDS_BWRAP = pytest.mark.skipif(BwrapBackend.check() is not None, reason=f"bwrap unusable: {BwrapBackend.check()}")
NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w])")
QUOTED = re.compile(r'"([^"]*)"')


@pytest.fixture(scope="module")
def instances():
    return lite_instances()


# ---------------------------------------------------------------- size, domains, splits


def test_tier_size_templates_domains_and_splits(instances):
    tasks = lite_tasks()
    assert len(tasks) >= 1000 and len(tasks) == len(instances)
    names = {template.name for template in TEMPLATES}
    assert len(names) == len(TEMPLATES) >= 40
    assert len({template.domain for template in TEMPLATES}) >= 8
    assert len(NOVEL_TEMPLATES) >= 8 and NOVEL_TEMPLATES <= names
    assert len({t.domain for t in TEMPLATES if t.name in NOVEL_TEMPLATES}) >= 6  # novel templates span domains
    per_template = collections.defaultdict(collections.Counter)
    for spec in tasks:
        assert spec.split in ("train", "val", "test", "novel", "fresh", "fresh2")
        per_template[template_of(spec)][spec.split] += 1
    for name, counts in per_template.items():
        if name in NOVEL_TEMPLATES:
            assert set(counts) == {"novel"}, name
        else:
            assert counts["novel"] == 0 and (counts["test"], counts["val"], counts["train"]) == (4, 3, 18), (
                name,
                counts
            )
            assert counts["fresh"] <= FRESH_PER_TEMPLATE and counts["fresh2"] <= FRESH2_PER_TEMPLATE
    # the rule is positional: instance i of a template is test iff i % 7 == 3, validation iff i % 7 == 6; the
    # instances after the first INSTANCES are fresh, those after fresh's room fresh2
    for item in instances:
        if item.index >= INSTANCES + FRESH_PER_TEMPLATE:
            assert item.spec.split == "fresh2" and item.template.name not in NOVEL_TEMPLATES
        elif item.index >= INSTANCES:
            assert item.spec.split == "fresh" and item.template.name not in NOVEL_TEMPLATES
        elif item.template.name not in NOVEL_TEMPLATES:
            assert (item.spec.split == "test") == (item.index % 7 == 3) and (item.spec.split == "val") == (
                item.index % 7 == 6
            )


def test_the_fresh_split_is_new_value_combinations_of_trained_templates(instances):
    """lite-fresh (study 3's test set): at least 400 tasks over at least 35 trained templates, none with a value
    combination any other instance of its template has, each holding a value of the fresh table or a combination
    beyond the first INSTANCES (which every earlier study read)."""
    fresh = [item for item in instances if item.spec.split == "fresh"]
    assert len(fresh) >= 400 and len({item.template.name for item in fresh}) >= 35
    combos = collections.defaultdict(list)
    for item in instances:
        combos[item.template.name].append(tuple(sorted(item.keys.items())))
    assert all(len(found) == len(set(found)) for found in combos.values())
    for item in fresh:
        new_values = [k for k, v in item.keys.items() if v in FRESH_VALUES[item.template.name].get(k, ())]
        old_values = {k: v for k, v in item.keys.items() if v in next(p for p in item.template.hidden
                                                                      if p.name == k).values}
        assert new_values or len(old_values) == len(item.keys)  # an unused combination of old values, or new values
        assert item.spec.naive_solution != item.spec.ground_truth


def test_the_fresh2_split_holds_a_value_no_earlier_split_has_in_every_task(instances):
    """lite-fresh2 (study 4's test set): at least 400 tasks over at least 35 trained templates; every task holds a
    value of fresh2's table, which no instance of another split holds, so none of its combinations was ever read;
    and the tiers before it are what they were (fresh2 is numbered after them, stored after them)."""
    fresh2 = [item for item in instances if item.spec.split == "fresh2"]
    assert len(fresh2) >= 400 and len({item.template.name for item in fresh2}) >= 35
    earlier_values = collections.defaultdict(set)
    for item in instances:
        if item.spec.split != "fresh2":
            earlier_values[item.template.name] |= set(item.keys.items())
    for item in fresh2:
        new = {(k, v) for k, v in item.keys.items() if v in FRESH2_VALUES[item.template.name].get(k, ())}
        assert new and not new & earlier_values[item.template.name], item.spec.ground_truth
        assert item.spec.naive_solution != item.spec.ground_truth
    guesses = {(t.name, p.name): p.guess for t in TEMPLATES for p in t.hidden}
    for template, table in FRESH2_VALUES.items():
        for name, values in table.items():
            assert guesses[(template, name)] not in values, (template, name)  # never the naive guess
    stored = sorted(instances, key=lambda item: item.index)  # how the store numbers them (ensure_lite_tasks)
    first = next(i for i, item in enumerate(stored) if item.spec.split == "fresh2")
    assert all(item.spec.split == "fresh2" for item in stored[first:])  # earlier tasks keep their ids


def test_a_store_made_before_lite_val_gets_its_validation_tasks_moved_out_of_lite_train(sqlite_url, instances):
    """An older store held the validation tasks as lite-train; storing the tier again moves them, so
    no trainer reads one, and `backend-lite:val` selects them."""
    from dataclasses import replace

    from colbench.store import queries
    from colbench.store.db import Database
    from colbench.store.models import Task
    from sqlmodel import select

    from colbench.families.builtin import ensure_lite_tasks
    from colbench.wiring import select_tasks

    db = Database(sqlite_url)
    old = [replace(item.spec, split={"test": "lite-test", "novel": "lite-novel"}.get(item.spec.split, "lite-train"))
           for item in sorted(instances, key=lambda item: item.index)  # the order ensure_lite_tasks stores them in
           if item.spec.split not in ("fresh", "fresh2")]  # an older store had no fresh splits either
    with db.write() as session:
        queries.add_tasks(session, [task_row(spec) for spec in old])
        ids_before = {t.content_hash: t.id for t in session.exec(select(Task))}
    fresh = sum(item.spec.split == "fresh" for item in instances)
    fresh2 = sum(item.spec.split == "fresh2" for item in instances)
    assert ensure_lite_tasks(db) == fresh + fresh2
    with db.read() as session:
        splits = collections.Counter(t.split for t in session.exec(select(Task)))
        # The fresh tasks come after every older one: no older task's id moves, so `--limit`/`--offset` read the
        # same tasks as before in every other split.
        ids_after = {t.content_hash: t.id for t in session.exec(select(Task))}
    assert splits == {"lite-train": 720, "lite-val": 120, "lite-test": 160, "lite-novel": 250, "lite-fresh": fresh,
                      "lite-fresh2": fresh2}
    assert {h: ids_after[h] for h in ids_before} == ids_before and min(set(ids_after.values()) - set(
        ids_before.values())) > max(ids_before.values())
    assert [t.split for t in select_tasks(db, "backend-lite:val", limit=40)] == ["lite-val"] * 40
    assert (
        len({template_of(spec_of(t)) for t in select_tasks(db, "backend-lite:val", limit=40)}) == 40
    )  # spread over templates


def test_deterministic_cached_and_unique(instances):
    assert lite_tasks() is lite_tasks()  # cached
    rebuilt = lite_instances.__wrapped__()  # a fresh build, not the cache
    assert [i.spec for i in rebuilt] == [i.spec for i in instances]
    assert [i.keys for i in rebuilt] == [i.keys for i in instances]
    tasks = lite_tasks()
    assert len({spec.content_hash for spec in tasks}) == len(tasks)
    assert len({" ".join(spec.problem_description.split()).lower() for spec in tasks}) == len(tasks)
    assert len({dedupe_key(spec.ground_truth) for spec in tasks}) == len(tasks)


def test_shape_of_every_task(instances):
    for item in instances:
        spec = item.spec
        name = item.template.name
        assert spec.family == "backend" and spec.source == SOURCE_PREFIX + name
        assert is_lite(spec) and template_of(spec) == name
        assert spec.hidden_information.splitlines()[0] == LITE_MARKER
        assert sorted(spec.test_cases) == sorted(f"test{n}" for n in range(1, 11))
        assert all(call.startswith(f"{name}(") for call in spec.test_cases.values())
        match = SIGNATURE.search(spec.problem_description)
        assert match and match.group(1) == name
        before = spec.problem_description[: spec.problem_description.index("The signature of the function is")]
        sentences = [s for s in re.split(r"(?<=[.!?])\s+", before.strip()) if s]
        assert 1 <= len(sentences) <= 3, spec.problem_description
        assert re.search(r"\b(I|I'm|I'd|[Mm]y|me|[Oo]ur|[Ww]e)\b", before), "first person"
        assert spec.naive_solution and spec.naive_solution != spec.ground_truth


def test_non_lite_tasks_are_not_lite():
    plain = TaskSpec(family="backend", problem_description="x", ground_truth="def f():\n    return 1",
                     hidden_information="def f(): ...")
    assert not is_lite(plain) and facts_of(plain) == []
    with pytest.raises(ValueError):
        template_of(plain)


# ---------------------------------------------------------------- descriptions hide the values


def _value_literals(sentence: str, phrase: str) -> tuple[set[str], set[str]]:
    numbers = set(NUMBER.findall(sentence))
    strings = {s for s in QUOTED.findall(phrase)} | ({phrase} if not NUMBER.fullmatch(phrase) else set())
    return numbers, strings


def test_descriptions_never_state_a_hidden_value(instances):
    for item in instances:
        description = item.spec.problem_description
        described_numbers = set(NUMBER.findall(description))
        for param in item.template.hidden:
            key = item.keys[param.name]
            sentence, phrase = param.sentence_of(key), param.phrase_of(key)
            numbers, strings = _value_literals(sentence, phrase)
            if isinstance(key, (int, float)) and not isinstance(key, bool):
                numbers |= {repr(key), str(key)}
            assert not numbers & described_numbers, (item.template.name, param.name, numbers & described_numbers)
            for text in strings:
                assert f'"{text}"' not in description, (item.template.name, param.name, text)
                core = text.strip()
                if len(core) >= 2 and re.search(r"\w", core):
                    assert not re.search(rf"(?<!\w){re.escape(core)}(?!\w)", description), (item.template.name, text)
                elif len(core) >= 2:
                    assert core not in description, (item.template.name, text)
    # and the shared openers carry nothing a value could be
    assert not any(NUMBER.search(opener) for opener in OPENERS)


# ---------------------------------------------------------------- references


def test_references_are_short_plain_and_officially_clean(instances):
    for item in instances:
        code = item.spec.ground_truth
        tree = ast.parse(code)
        assert len(tree.body) == 1 and isinstance(tree.body[0], ast.FunctionDef), item.template.name
        function = tree.body[0]
        body_lines = [line for line in code.splitlines()[1:] if line.strip()]
        assert len(body_lines) <= 8, (item.template.name, len(body_lines))
        assert banned_text(code) is None and "```" not in code
        for node in ast.walk(function):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                assert [alias.name for alias in node.names] == ["math"] and isinstance(node, ast.Import)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                assert node.func.id != function.name, "no recursion"
        assert banned_text(item.spec.naive_solution) is None


# ---------------------------------------------------------------- every hidden fact is needed


def _run(code: str, name: str, calls: list[str]) -> list:
    """Plain in-process run of our own template code (trusted: these are our strings)."""
    namespace: dict = {}
    exec(code, namespace)  # noqa: S102
    results = []
    for call in calls:
        try:
            results.append(("ok", eval(call, namespace)))  # noqa: S307
        except Exception as exc:  # noqa: BLE001
            results.append(("error", type(exc).__name__))
    return results


def _failures(expected: list, got: list) -> int:
    return sum(1 for e, g in zip(expected, got) if g[0] != "ok" or g[1] != e[1])


def test_reference_passes_naive_fails_and_each_fact_is_needed(instances):
    for item in instances:
        template, spec = item.template, item.spec
        calls = [spec.test_cases[f"test{n}"] for n in range(1, 11)]
        expected = _run(spec.ground_truth, template.name, calls)
        assert all(kind == "ok" and value is not None for kind, value in expected), (template.name, expected)
        assert _run(spec.ground_truth, template.name, calls) == expected  # deterministic
        naive = _failures(expected, _run(spec.naive_solution, template.name, calls))
        assert naive >= 3, (template.name, item.index, naive)
        for param in template.hidden:
            assert param.guess not in param.values
            one_guessed = template.render({**item.keys, param.name: param.guess})
            assert _failures(expected, _run(one_guessed, template.name, calls)) >= 1, (template.name, param.name)
            for other in param.values:
                if other != item.keys[param.name]:
                    variant = template.render({**item.keys, param.name: other})
                    assert _failures(expected, _run(variant, template.name, calls)) >= 1, (
                        template.name,
                        param.name,
                        other
                    )
        # the naive solution is the reference with every hidden value guessed
        assert spec.naive_solution == template.render({p.name: p.guess for p in template.hidden})


# ---------------------------------------------------------------- facts


def test_facts_of_round_trips(instances):
    for item in instances:
        facts = facts_of(item.spec)
        assert [f.name for f in facts] == [p.name for p in item.template.hidden]
        for fact, param in zip(facts, item.template.hidden):
            assert fact == HiddenFact(param.name, param.sentence_of(item.keys[param.name]), param.question,
                                      tuple(param.keywords))
            assert "def " not in fact.sentence and "```" not in fact.sentence
        assert 1 <= len(facts) <= 3


def test_facts_survive_the_store_and_the_official_format(sqlite_url):
    from colbench.store import queries
    from colbench.store.db import Database

    sample = lite_tasks()[::97]
    db = Database(sqlite_url)
    try:
        with db.write() as session:
            queries.add_tasks(session, [task_row(spec) for spec in sample])
        with db.read() as session:
            stored = [spec_of(task) for task in queries.tasks_in(session, family="backend")]
    finally:
        db.close()
    by_hash = {spec.content_hash: spec for spec in stored}
    for spec in sample:
        back = by_hash[spec.content_hash]
        assert facts_of(back) == facts_of(spec) and template_of(back) == template_of(spec)
        assert back.split == spec.split
        # the official format drops our source: the template is still known from the function's name
        record = spec.to_official()
        again = task_from_record(record, family="backend", split="train", source="import:x.jsonl", where="x")
        assert facts_of(again) == facts_of(spec) and template_of(again) == template_of(spec)


# ---------------------------------------------------------------- the project's validator, in real sandboxes


def _validate(specs):
    report = validate_tasks(specs, sandbox="bwrap", exact_tests=10, require_naive=True)
    failures = [f"{c.label}: {f.rule}: {f.message}" for c in report.failed for f in c.failures]
    assert not failures, "\n".join(failures[:20])
    assert all(report.counts()[rule]["failed"] == 0 for rule in RULES)
    assert report.naive_checked == len(specs) and report.naive_passing == 0
    return report


@NEEDS_BWRAP
def test_validator_on_a_sample_of_every_template(instances):
    sample = [item.spec for item in instances if item.index in (0, 3, 11)]  # 3 per template, test split included
    assert len({template_of(spec) for spec in sample}) == len(TEMPLATES)
    _validate(sample)


@NEEDS_BWRAP
def test_tasks_validate_lite_checks_every_lite_task(capsys, monkeypatch):
    """`colbench tasks validate --lite`: the whole tier through the project's validator."""
    import json

    started = time.monotonic()
    code, report, _ = command_line(None, capsys, monkeypatch)("tasks", "validate", "--lite", "--sandbox", "bwrap",
                                                             "--json")
    assert code == 0, json.loads(report)["findings"][:5]  # the report stays text when the command fails
    assert (
        report["ok"]
        and report["tasks"] == len(lite_tasks()) == report["naive_checked"]
        and report["naive_passes_all"] == 0
    )
    print(f"\nbackend-lite: {len(lite_tasks())} tasks validated in {time.monotonic() - started:.1f} s")
