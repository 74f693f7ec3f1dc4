"""The task-family contract, run over every registered family (tests/test_plugins.py runs it over a plugin's too): a
new family that misses a piece fails here. Code outside colbench/families that compares a family's name fails
tests/test_architecture.py."""
from __future__ import annotations


import pytest

from colbench import families, protocol
from colbench.envs.base import Env
from colbench.errors import FormatError
from colbench.eval import Interval, PolicyEval
from colbench.families import TaskFamily, family_of_record, family_of_selector, parse_selector, registry
from colbench.families.records import task_from_record
from colbench.simulators.base import SimReply, SimRequest, Simulator
from colbench.store.db import Database
from colbench.families.builtin import builtin_tasks
from colbench.tasks.spec import SPLITS
from colbench.training.config import PAIR_RULES, pair_rule

FAMILIES = list(registry().values())
ids = [f.name for f in FAMILIES]


def test_the_registry_holds_the_shipped_families():
    assert families.names()[:2] == ("backend", "frontend")  # then any plugin's (tests/test_plugins.py)
    assert families.DEFAULT_FAMILY in families.names()


def test_an_unknown_family_is_a_one_line_error():
    offered = ", ".join(families.names())  # the shipped ones first, then any plugin's
    assert offered.startswith("backend, frontend")
    with pytest.raises(families.UnknownFamily) as err:
        families.family("mobile")
    assert str(err.value) == f"family must be one of {offered}, not 'mobile'"


@pytest.mark.parametrize("fam", FAMILIES, ids=ids)
def test_every_method_of_the_interface_is_implemented(fam: TaskFamily):
    import inspect

    # The methods without a default (they raise NotImplementedError); the others have one a family may keep.
    methods = [name for name, value in vars(TaskFamily).items() if callable(value) and not name.startswith("_")
               and "raise NotImplementedError" in inspect.getsource(value)]
    assert len(methods) >= 7  # the interface has methods to check
    missing = [name for name in methods if getattr(type(fam), name) is getattr(TaskFamily, name)]
    assert missing == []


@pytest.mark.parametrize("fam", FAMILIES, ids=ids)
def test_every_attribute_is_set_and_sane(fam: TaskFamily):
    assert families.family(fam.name) is fam
    assert fam.summary.strip() and fam.headline_label.strip() and fam.answer_language.strip()
    assert isinstance(fam.reply_limit, int) and fam.reply_limit > 0
    assert fam.pair_rule in PAIR_RULES and pair_rule(fam.name) == fam.pair_rule
    assert fam.headline_metric in ("success", "reward") and fam.reward_label.strip()
    # Rejection fine-tuning's default ("every trajectory that succeeded") needs success: else a threshold.
    assert fam.rft_threshold is not None or fam.headline_metric == "success"
    from colbench.authoring.validate import TASK_CHECKS

    assert fam.task_checks in TASK_CHECKS
    # Its splits: every built-in task in one of them, and the rule said in words for the message of an empty split.
    assert {fam.builtin_split(k) for k in range(12)} <= set(SPLITS) and fam.name in fam.split_rule()
    assert {spec.split for spec in builtin_tasks(fam.name)} <= set(SPLITS)
    assert isinstance(fam.regrades, bool)


@pytest.mark.parametrize("fam", FAMILIES, ids=ids)
def test_the_reply_limit_cuts_the_simulated_humans_reply(fam: TaskFamily):
    from colbench.envs.base import Episode

    [task] = builtin_tasks(fam.name)[:1]
    episode = Episode(1, task)
    shown = episode.human_says("x" * (fam.reply_limit + 50), fam.reply_limit)
    assert shown == "x" * fam.reply_limit and episode.dialogue[-1]["content"] == shown


@pytest.mark.parametrize("fam", FAMILIES, ids=ids)
def test_the_system_prompt_states_the_protocol(fam: TaskFamily):
    prompt = fam.system_prompt()
    assert protocol.ANSWER_MARKER in prompt and "{turns}" in prompt
    from colbench.training.sequences import system_prompt

    assert system_prompt(fam.name) == prompt.format(turns=protocol.MAX_AGENT_TURNS)


@pytest.mark.parametrize("fam", FAMILIES, ids=ids)
def test_builtin_is_the_familys_own_simulator(fam: TaskFamily, sqlite_url):
    from colbench.wiring import build_simulator

    unguarded = build_simulator(Database(sqlite_url), "builtin", family=fam.name, guard="off")
    assert isinstance(unguarded, Simulator) and type(unguarded) is type(fam.builtin_simulator())
    simulator = build_simulator(Database(sqlite_url), "builtin", family=fam.name)  # behind the default guard
    assert type(simulator.inner) is type(unguarded) and simulator.instant == getattr(unguarded, "instant", False)
    [task] = builtin_tasks(fam.name)[:1]
    [reply] = simulator.reply([SimRequest(task=task, dialogue=[{"role": "user", "content": task.problem_description}])])
    assert isinstance(reply, SimReply)


@pytest.mark.parametrize("fam", FAMILIES, ids=ids)
def test_official_records_round_trip_and_name_their_family(fam: TaskFamily):
    specs = builtin_tasks(fam.name)
    assert specs, f"{fam.name} ships no built-in tasks"
    for spec in specs[:5]:
        record = spec.to_official()
        again = task_from_record(record, family=fam.name, split=spec.split, source=spec.source, where="x")
        assert again.content_hash == spec.content_hash and again.test_cases == spec.test_cases
        # The record names its family, and the name decides, whichever other families would claim it unnamed.
        assert record["family"] == fam.name and family_of_record(record) is fam
        with pytest.raises(FormatError, match="^x: the record is a task of the family"):
            task_from_record(record | {"family": "elsewhere"}, family=fam.name, split="train", source="x", where="x")


@pytest.mark.parametrize("fam", FAMILIES, ids=ids)
def test_bad_tests_in_a_record_are_a_format_error(fam: TaskFamily):
    [spec] = builtin_tasks(fam.name)[:1]
    with pytest.raises(FormatError, match=r"^here: .*test"):
        task_from_record(spec.to_official() | {"test_cases": ["not", "an", "object"]}, family=fam.name, split="train",
                         source="x", where="here")


@pytest.mark.parametrize("fam", FAMILIES, ids=ids)
def test_an_imported_reward_fills_the_grade_columns(fam: TaskFamily):
    [spec] = builtin_tasks(fam.name)[:1]
    full = fam.imported_grade(1.0, spec.to_official(), "official")
    assert set(full) == {"reward_metric", "success", "grading"} and full["reward_metric"]
    assert (full["success"] is True) == (fam.headline_metric == "success")
    assert fam.imported_grade(0.5, spec.to_official(), "official")["success"] in (False, None)


@pytest.mark.parametrize("fam", FAMILIES, ids=ids)
def test_task_selectors_reach_the_family(fam: TaskFamily):
    for split in SPLITS:
        assert parse_selector(f"{fam.name}:{split}") == (fam.name, split)
        assert family_of_selector(f"{fam.name}:{split}") is fam
    for prefix, splits in fam.tiers.items():
        for split, stored in splits.items():
            assert parse_selector(f"{prefix}:{split}") == (fam.name, stored)
            assert parse_selector(f"{fam.name}:{stored}") == (fam.name, stored)
            assert family_of_selector(f"{prefix}:{split}") is fam
    assert f"{fam.name}:" in families.selectors_help()
    with pytest.raises(ValueError, match="--tasks takes FAMILY:SPLIT"):
        parse_selector(f"{fam.name}:nowhere")


@pytest.mark.parametrize("fam", FAMILIES, ids=ids)
def test_the_command_line_offers_the_family(fam: TaskFamily):
    from colbench.cli.common import FAMILY_HELP, Family

    assert Family(fam.name).value == fam.name
    assert f"{fam.name}: {fam.summary}" in FAMILY_HELP


@pytest.mark.parametrize("fam", FAMILIES, ids=ids)
def test_the_eval_table_renders_the_headline(fam: TaskFamily):
    from rich.console import Console

    from colbench.cli.views.evaluate import eval_notes, eval_table

    interval = Interval(0.5, 0.25, 0.75)
    result = PolicyEval(policy="p", simulator="builtin", setting="", metric="m", grading=None, n_tasks=2,
                        n_trajectories=2,
                        reward=interval, success=interval if fam.headline_metric == "success" else None)
    console = Console(width=200, record=True)
    console.print(eval_table([result], fam.name, "test"))
    assert f"{fam.headline_label} (95% CI)" in console.export_text()
    eval_notes([result], fam.name)


@pytest.mark.parametrize("fam", FAMILIES, ids=ids)
def test_the_environment_is_the_familys(fam: TaskFamily, sqlite_url):
    from colbench.wiring import build_env

    env, close = build_env(Database(sqlite_url), fam.name, workers=1, render_pool=1)
    try:
        assert isinstance(env, Env) and env.family == fam.name
        assert fam.graded_by(env)
        [task] = builtin_tasks(fam.name)[:1]
        assert env.renders == (fam.reference_page(task) is not None)  # a page to render: the env renders
    finally:
        close()
