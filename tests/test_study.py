"""A study kept as files (colbench/study.py): `colbench study report` recomputes its tables from
trajectories.jsonl alone, paired by task, with SWEET-RL's comparisons Holm-corrected; the
study's README (studies/backend-lite/README.md) holds that report's tables, verbatim."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from colbench.study import FINAL, holm, markdown, record, report
from conftest import command_line

TASKS = 20


def rows(successes: set[int], split: str = "lite-test") -> list[dict]:
    """Two samples of each of TASKS tasks; a task in ``successes`` is solved by both samples."""
    return [{"split": split, "task_id": t, "template": f"t{t % 4}", "sample": k,
             "tests_passed": 1.0 if t in successes else 0.3,
             "success": int(t in successes), "agent_turns": 3, "facts_obtained": 1.0 if t in successes else 0.5}
            for t in range(TASKS) for k in range(2)]


def test_holm_by_hand():
    adjusted = holm({"a": 0.01, "b": 0.04, "c": 0.03})
    # sorted a, c, b: 3 x 0.01 = 0.03; 2 x 0.03 = 0.06; 1 x 0.04 = 0.04, kept monotone: 0.06
    assert adjusted == pytest.approx({"a": 0.03, "c": 0.06, "b": 0.06})
    assert holm({"a": 0.6, "b": 0.9}) == {"a": 1.0, "b": 1.0}


def test_a_rebuilt_stage_is_paired_with_the_rebuilt_warm_start(tmp_path):
    """A store lost between sessions: the warm start retrained reads differently from the original, and a rebuilt
    round-2 arm (which records no zero-shot of its own) is paired with the warm start it descends from."""
    record(tmp_path, "zero-shot", "rft", rows(set(range(2)), "lite-val"))
    record(tmp_path, "zero-shot", "rft-rebuilt", rows(set(range(6)), "lite-val"))
    record(tmp_path, "rft-2", "rft2-1e-5", rows(set(range(10)), "lite-val"))
    record(tmp_path, "rft-2", "rft2-1e-5-rebuilt", rows(set(range(10)), "lite-val"))
    by = {(a["label"], a["arm"]): a["versus_zero_shot"] for a in report(tmp_path)["arms"]}
    assert by[("rft2-1e-5", "rft-2")]["difference"]["mean"] == pytest.approx(8 / TASKS)
    assert by[("rft2-1e-5-rebuilt", "rft-2")]["difference"]["mean"] == pytest.approx(4 / TASKS)


def test_the_report_pairs_arms_by_task_and_holm_corrects_sweets_comparisons(tmp_path, capsys, monkeypatch):
    arms = {"zero-shot": set(range(5)), "rft": set(range(6)), "mtdpo": set(range(4, 11)), "sweet": set(range(15)),
            "sweet-no-c": set(range(3, 9))}
    for arm, solved in arms.items():
        record(tmp_path, arm, FINAL, rows(solved))
    record(tmp_path, "sweet", "nll1", rows(set(range(8)), "lite-val"),
           {"policy": {"settings": {"nll_weight": 1.0}, "minutes": 3.5}})
    found = report(tmp_path)
    by = {(a["split"], a["label"], a["arm"]): a for a in found["arms"]}
    sweet = by[("lite-test", FINAL, "sweet")]
    assert sweet["success"]["mean"] == pytest.approx(0.75) and sweet["n"] == 40 and sweet["tasks"] == TASKS
    assert sweet["facts_obtained"] == pytest.approx((15 + 0.5 * 5) / 20)
    # 15 of 20 tasks obtained every fact (and were solved); the other 5 obtained half
    assert sweet["all_facts"] == pytest.approx(0.75) and sweet["success_given_all_facts"] == pytest.approx(1.0)
    # paired with zero-shot on the same tasks: sweet solves 10 more of 20
    assert sweet["versus_zero_shot"]["difference"]["mean"] == pytest.approx(0.5)
    versus = found["sweet"]["lite-test"]["sweet_vs"]
    assert versus["rft"]["difference"]["mean"] == pytest.approx(9 / 20) and versus["mtdpo"]["difference"][
        "mean"
    ] == pytest.approx(8 / 20)
    raw = {k: v["p_value"] for k, v in versus.items()}
    assert {k: v["p_holm"] for k, v in versus.items()} == pytest.approx(holm(raw)) and all(
        v["p_holm"] >= v["p_value"] for v in versus.values()
    )
    assert found["sweet"]["lite-test"]["sweet_vs_no_c"]["difference"]["mean"] == pytest.approx(9 / 20)
    # the validation run compares with zero-shot's rows under any label of that split only where they exist
    assert by[("lite-val", "nll1", "sweet")]["versus_zero_shot"] is None
    assert found["validation"][0]["policy"]["settings"] == {"nll_weight": 1.0}

    # Recording an arm again replaces its rows of that label and split, nothing else.
    record(tmp_path, "sweet", FINAL, rows(set(range(16))))
    again = report(tmp_path)
    assert {(a["label"], a["arm"]): a["n"] for a in again["arms"]}[(FINAL, "sweet")] == 40
    assert [a for a in again["arms"] if a["arm"] == "sweet" and a["label"] == FINAL][0]["success"][
        "mean"
    ] == pytest.approx(0.8)

    run = command_line("sqlite://", capsys, monkeypatch)
    code, out, err = run("study", "report", str(tmp_path))
    assert code == 0 and out.strip() == markdown(again).strip() and "| sweet | 80.0%" in out and "Holm" in out
    code, out, err = run("study", "report", str(tmp_path), "--json")
    assert code == 0 and out == json.loads(json.dumps(again))
    (tmp_path / "trajectories.jsonl").write_text("{not json\n")
    code, out, err = run("study", "report", str(tmp_path))
    assert code == 1 and "trajectories.jsonl:1: not valid JSON" in err and "Traceback" not in err
    code, out, err = run("study", "report", str(tmp_path / "nowhere"))
    assert code == 1 and "holds no trajectories" in err


STUDY = Path(__file__).resolve().parent.parent / "studies" / "backend-lite"
STUDY_3 = STUDY.parent / "backend-lite-3"
STUDY_4 = STUDY.parent / "backend-lite-4"


@pytest.mark.parametrize("study", [STUDY, STUDY_3, STUDY_4], ids=lambda study: study.name)
def test_the_study_readmes_tables_are_the_studys_report(study):
    """The account's tables are what `colbench study report` computes from the committed files, to the digit."""
    readme = (study / "README.md").read_text(encoding="utf-8")
    assert markdown(report(study)) in readme


def test_the_credit_signals_readmes_tables_are_its_report():
    """The credit study's account: its tables, cost and carried signal as `study report` computes them from
    values.jsonl and cost.jsonl, to the digit."""
    from colbench.training.credit import report as credits

    folder = STUDY.parent / "credit-signals"
    found = credits.markdown(credits.credit_report(folder))
    assert "**Carried online**: ref-infogain" in found
    assert found in (folder / "README.md").read_text(encoding="utf-8")


def test_the_report_checks_each_sweet_arms_pairs_against_ground_truth(tmp_path):
    """A critic's pairs (`critic pairs --grade`) against ground truth: a new fact over nothing or a
    repeat is right, the reverse wrong; of two answers, the one passing more tests is right; pairs
    ground truth cannot order alone (two new facts, a question against an answer) count for neither."""
    from colbench.study import record_pairs

    kinds = {"run_id": 8, "pairs": 20,
             "answers_graded": {"chosen passed more": 6, "rejected passed more": 1, "same": 2},
             "kinds": {"new fact > nothing": 5, "nothing > new fact": 2, "new fact > repeat": 1, "repeat > new fact": 1,
                       "new fact > new fact": 2, "answer > answer": 9}}
    swapped = kinds | {"answers_graded": {"chosen passed more": 1, "rejected passed more": 6, "same": 2},
                       "kinds": {"nothing > new fact": 5, "new fact > nothing": 2, "repeat > new fact": 1,
                                 "new fact > repeat": 1, "new fact > new fact": 2, "answer > answer": 9}}
    record(tmp_path, "zero-shot", FINAL, rows(set(range(5))))
    record_pairs(tmp_path, "sweet", FINAL, kinds)
    record_pairs(tmp_path, "sweet-no-c", FINAL, swapped)
    record_pairs(tmp_path, "sweet", FINAL, kinds)  # recording again replaces the line
    # a second seed's line beside the first's, its own row even where its counts are the same
    record_pairs(tmp_path, "sweet", FINAL, kinds | {"run_id": 9}, seed=1)
    record_pairs(tmp_path, "sweet", FINAL, kinds | {"run_id": 9}, seed=1)
    seeds = report(tmp_path)["pairs"]
    assert [(row["arm"], row["labels"]) for row in seeds] == [
        ("sweet", [FINAL]), ("sweet-no-c", [FINAL]), ("sweet", [f"{FINAL} (seed 1)"])]
    assert [row["agreement"]["mean"] for row in seeds] == pytest.approx([12 / 16, 4 / 16, 12 / 16])
    found = {row["arm"]: row for row in seeds if row["labels"] == [FINAL]}
    assert list(found) == ["sweet", "sweet-no-c"]
    sweet, no_c = found["sweet"], found["sweet-no-c"]
    assert sweet["ordered"] == 16 and sweet["questions"] == [6, 3] and sweet["answers"] == [6, 1]
    assert sweet["agreement"]["mean"] == pytest.approx(12 / 16) and no_c["agreement"]["mean"] == pytest.approx(4 / 16)
    assert sweet["agreement"]["low"] < 12 / 16 < sweet["agreement"]["high"]
    assert "| sweet | final | 20 | 16 | 75.0% [" in markdown(report(tmp_path))


def test_an_arms_interval_resamples_tasks_not_dialogues(tmp_path):
    """10 tasks x 4 identical dialogues: the interval is that of 10 task means, as wide as 10 values allow, not
    the narrower one 40 independent dialogues would give."""
    from colbench.eval import bootstrap

    rows = [{"split": "lite-val", "task_id": t, "template": "x", "sample": k, "tests_passed": float(t < 5),
             "success": int(t < 5), "agent_turns": 2, "facts_obtained": 1.0} for t in range(10) for k in range(4)]
    record(tmp_path, "rft", "a", rows)
    [arm] = report(tmp_path)["arms"]
    by_task, by_dialogue = bootstrap([float(t < 5) for t in range(10)]), bootstrap([float(r["success"]) for r in rows])
    assert (arm["success"]["low"], arm["success"]["high"]) == (by_task.low, by_task.high)
    assert arm["success"]["high"] - arm["success"]["low"] > 1.5 * (by_dialogue.high - by_dialogue.low)


def test_the_smallest_detectable_difference_shrinks_with_the_square_root_of_the_tasks(tmp_path):
    """The same arms on four times the tasks: the test set sees differences half as large."""
    def found(copies: int) -> dict:
        folder = tmp_path / str(copies)
        for arm, solved in (("zero-shot", range(5)), ("sweet", range(3, 12))):
            record(folder, arm, FINAL, [row | {"task_id": row["task_id"] + TASKS * copy}
                                        for copy in range(copies) for row in rows(set(solved))])
        return report(folder)["sweet"]["lite-test"]["sweet_vs"]["zero-shot"]

    small, large = found(1), found(4)
    assert small["difference"]["mean"] == pytest.approx(large["difference"]["mean"]) == pytest.approx(0.2)
    assert large["detectable"] == pytest.approx(small["detectable"] / 2, rel=0.25)


def test_two_arms_that_never_differ_claim_no_power(tmp_path):
    """Both at the floor (no task solved by either): the interval has no width, and no smallest detectable
    difference is claimed from it (it would read 0.0%, as if any difference would show)."""
    for arm in ("zero-shot", "rft", "mtdpo", "sweet", "sweet-no-c"):
        record(tmp_path, arm, FINAL, rows(set()))
    found = report(tmp_path)["sweet"]["lite-test"]["sweet_vs"]["zero-shot"]
    assert found["difference"] == {"mean": 0.0, "low": 0.0, "high": 0.0} and found["detectable"] is None
    assert "| zero-shot | +0.0% [+0.0%, +0.0%], p 1 (Holm 1) | – |" in markdown(report(tmp_path))


def test_recording_an_arm_again_replaces_its_rows_where_they_stood(tmp_path):
    """A rerun stage rewrites its arm's rows in place: the other arms' rows keep their order, and a
    committed file that the rerun did not change stays byte for byte what it was."""
    record(tmp_path, "zero-shot", "small", rows(set(range(5)), "lite-val"), {"policy": None})
    record(tmp_path, "sweet", "small", rows(set(range(8)), "lite-val"), {"policy": "first"})
    record(tmp_path, "rft", "small", rows(set(range(3)), "lite-val"), {"policy": None})
    before = {name: (tmp_path / name).read_bytes() for name in ("trajectories.jsonl", "validation.jsonl")}
    record(tmp_path, "zero-shot", "small", rows(set(range(5)), "lite-val"), {"policy": None})
    assert {name: (tmp_path / name).read_bytes() for name in before} == before

    record(tmp_path, "sweet", "small", rows(set(range(9)), "lite-val"), {"policy": "second"})
    lines = [json.loads(line) for line in (tmp_path / "trajectories.jsonl").read_text().splitlines()]
    assert [r["arm"] for r in lines[:: 2 * TASKS]] == ["zero-shot", "sweet", "rft"]
    assert sum(r["success"] for r in lines if r["arm"] == "sweet") == 2 * 9
    validation = [json.loads(line) for line in (tmp_path / "validation.jsonl").read_text().splitlines()]
    assert [(r["arm"], r["policy"]) for r in validation] == [("zero-shot", None), ("sweet", "second"), ("rft", None)]


def test_the_search_table_lists_every_configuration_tried_and_marks_each_arms_best(tmp_path):
    """Every validation line is a row, with the settings that set it apart and its cost; the best
    of each arm is marked (not the last tried, not the first); rft shows no NLL weight, which it
    does not train with, and SWEET-RL its candidates a turn, which set c16 apart from small, and the
    turns it trains (all, for a run older than the setting)."""
    def policy(algo: str, lr: float, minutes: float, candidates: int = 8, turns: str | None = None) -> dict:
        # as trainer.run_settings keeps them: rft has no NLL weight, no candidates
        settings = {"algo": algo, "lr": lr} | ({} if algo == "rft" else {"nll_weight": 1.0, "candidates": candidates})
        settings |= {"turns": turns} if turns else {}
        return {"policy": {"settings": settings, "minutes": minutes},
                "critic": {"run_id": 4, "minutes": 30.0} if algo == "sweet" else None}

    record(tmp_path, "zero-shot", "small", rows(set(range(5)), "lite-val"), {"policy": None})
    record(tmp_path, "sweet", "nll1", rows(set(range(8)), "lite-val"), policy("sweet", 1e-5, 36.0))
    record(tmp_path, "sweet", "small", rows(set(range(12)), "lite-val"), policy("sweet", 3e-6, 40.0))
    record(tmp_path, "sweet", "tiny", rows(set(range(6)), "lite-val"), policy("sweet", 1e-6, 41.0))
    record(tmp_path, "sweet", "c16", rows(set(range(4)), "lite-val"), policy("sweet", 3e-6, 50.0, candidates=16))
    record(tmp_path, "sweet", "qs", rows(set(range(3)), "lite-val"), policy("sweet", 3e-6, 30.0, turns="questions"))
    record(tmp_path, "rft", "rft-3e-5", rows(set(range(7)), "lite-val"), policy("rft", 3e-5, 11.0))
    record(tmp_path, "sweet", FINAL, rows(set(range(9))))  # the test set is no configuration of the search
    # a retrained stage read again after a lost store: listed, never the choice, even where it reads higher
    record(tmp_path, "rft", "rft-3e-5-rebuilt", rows(set(range(9)), "lite-val"), policy("rft", 3e-5, 20.0))
    found = report(tmp_path)["search"]
    assert [(r["arm"], r["label"]) for r in found] == [("rft", "rft-3e-5"), ("rft", "rft-3e-5-rebuilt"),
                                                       ("sweet", "c16"), ("sweet", "nll1"), ("sweet", "qs"),
                                                       ("sweet", "small"), ("sweet", "tiny")]
    by = {r["label"]: r for r in found}
    assert [label for label, r in by.items() if r["best"]] == ["rft-3e-5", "small"]
    assert by["small"]["versus_zero_shot"]["difference"]["mean"] == pytest.approx(7 / 20)
    assert by["rft-3e-5"]["nll_weight"] is None and by["nll1"]["nll_weight"] == 1.0
    table = markdown(report(tmp_path))
    assert "| sweet | small | 3e-06 | 1 | 8 | all | 60.0% [" in table and "| 40 | 30 | ✓ |" in table
    assert "| sweet | c16 | 3e-06 | 1 | 16 | all | 20.0% [" in table
    assert "| sweet | qs | 3e-06 | 1 | 8 | questions | 15.0% [" in table
    assert "| rft | rft-3e-5 | 3e-05 | – | – | – | 35.0% [" in table


def test_pairs_that_only_the_actors_step_tells_apart_are_counted_once(tmp_path):
    """Runs at two learning rates train on the same candidates ranked the same way: one row, both
    labels; a critic that ranked differently is a row of its own."""
    from colbench.study import record_pairs

    kinds = {"pairs": 10, "answers_graded": {"chosen passed more": 2},
             "kinds": {"new fact > nothing": 6, "answer > answer": 2, "new fact > new fact": 2}}
    record(tmp_path, "zero-shot", FINAL, rows(set(range(5))))
    record_pairs(tmp_path, "sweet", "nll1", kinds | {"run_id": 5})
    record_pairs(tmp_path, "sweet", "small", kinds | {"run_id": 8})
    record_pairs(tmp_path, "sweet", FINAL, kinds | {"run_id": 8})
    reversed_ = {"run_id": 9, "kinds": {"nothing > new fact": 6}, "answers_graded": {}}
    record_pairs(tmp_path, "sweet", "ensemble", kinds | reversed_)
    found = report(tmp_path)["pairs"]
    assert [(r["arm"], r["labels"], r["ordered"]) for r in found] == [
        ("sweet", [FINAL, "nll1", "small"], 8), ("sweet", ["ensemble"], 6)]
    assert found[1]["agreement"]["mean"] == 0.0


@pytest.mark.skipif(not (STUDY / "chosen.sh").exists(), reason="the backend-lite study has chosen no configuration yet")
def test_each_arm_takes_to_the_test_set_the_configuration_its_search_found_best():
    """chosen.sh (what `lite_study.sh final` runs) against the report's search: every arm read on the
    test set was read at its best validation configuration, learning rate and NLL weight alike."""
    import re
    import shlex

    text = (STUDY / "chosen.sh").read_text(encoding="utf-8")
    lines = re.search(r'final_arms="(.*?)"', text, re.S).group(1).strip().splitlines()
    best = {row["arm"]: row for row in report(STUDY)["search"] if row["best"]}
    for line in lines:
        words = shlex.split(line)
        flags = dict(zip(words[::2], words[1::2]))
        row = best[flags["--arm"]]
        assert float(flags["--policy-lr"]) == row["lr"], line
        if row["nll_weight"] is not None:
            assert float(flags["--policy-nll-weight"]) == row["nll_weight"], line


def seeded(successes: set[int], seed: int) -> list[dict]:
    return [{"seed": seed} | row for row in rows(successes, "lite-fresh")]


def test_a_second_training_seed_is_kept_beside_the_first_and_replaces_only_itself(tmp_path):
    record(tmp_path, "rft-2", FINAL, seeded(set(range(4)), 0))
    record(tmp_path, "rft-2", FINAL, seeded(set(range(8)), 1))
    record(tmp_path, "rft-2", FINAL, seeded(set(range(6)), 1))  # seed 1 read again: its own rows replaced
    lines = [json.loads(line) for line in (tmp_path / "trajectories.jsonl").read_text().splitlines()]
    assert {seed: sum(r["success"] for r in lines if r["seed"] == seed) for seed in (0, 1)} == {0: 2 * 4, 1: 2 * 6}


def test_the_declared_comparisons_pool_both_seeds_per_task_and_holm_correct_the_secondary_ones(tmp_path, capsys,
                                                                                               monkeypatch):
    """comparisons.json names the primary comparison and the secondary ones: B − A paired over tasks on the final
    label, each arm's task mean over both training seeds' dialogues."""
    record(tmp_path, "zero-shot", FINAL, seeded(set(range(2)), 0))
    record(tmp_path, "rft-2", FINAL, seeded(set(range(4)), 0))
    record(tmp_path, "rft-2", FINAL, seeded(set(range(8)), 1))
    record(tmp_path, "rft+sweet", FINAL, seeded(set(range(12)), 0))
    record(tmp_path, "rft+sweet", FINAL, seeded(set(range(10)), 1))
    (tmp_path / "comparisons.json").write_text(json.dumps({
        "primary": ["rft-2", "rft+sweet"],
        "secondary": [["zero-shot", "rft-2"], ["zero-shot", "rft+sweet"], ["rft", "rft+sweet"]]}))
    found = report(tmp_path)["declared"]["lite-fresh"]
    primary = found["primary"]
    # rft-2 solves (4 + 8) / 2 = 6 tasks' worth, rft+sweet (12 + 10) / 2 = 11, over 20 tasks
    assert primary["name"] == "rft+sweet − rft-2" and primary["difference"]["mean"] == pytest.approx(5 / 20)
    assert primary["tasks"] == TASKS and primary["detectable"] > 0
    assert set(found["secondary"]) == {"rft-2 − zero-shot", "rft+sweet − zero-shot"}  # rft was not read:
    assert found["not_read"] == {"rft+sweet − rft": ["rft"]}  # named, out of the Holm correction
    raw = {k: v["p_value"] for k, v in found["secondary"].items()}
    assert {k: v["p_holm"] for k, v in found["secondary"].items()} == pytest.approx(holm(raw))
    assert found["secondary"]["rft+sweet − zero-shot"]["difference"]["mean"] == pytest.approx(9 / 20)

    run = command_line("sqlite://", capsys, monkeypatch)
    code, out, err = run("study", "report", str(tmp_path))
    assert code == 0 and "| primary: rft+sweet − rft-2 | +25.0%" in out
    assert "| rft+sweet − rft | not read: no rft read here | – |" in out
    (tmp_path / "comparisons.json").write_text(json.dumps({"primary": ["rft", "rft-2"]}))
    assert report(tmp_path)["declared"]["lite-fresh"] == {
        "primary": None, "secondary": {}, "not_read": {"primary: rft-2 − rft": ["rft"]}}
    (tmp_path / "comparisons.json").write_text(json.dumps({"primary": ["rft-2"]}))
    code, out, err = run("study", "report", str(tmp_path))
    assert code == 1 and "comparisons.json: not a comparisons file" in err and "Traceback" not in err


def test_success_given_every_fact_is_compared_within_task_not_pooled(tmp_path, capsys, monkeypatch):
    """An arm that asks more reaches every fact on harder tasks too: pooled over dialogues its success given every
    fact falls with no change in its answers. The declared comparison reads it within task, on the tasks where both
    arms obtained every fact."""
    def arm(informed_successes: dict[int, int]) -> list[dict]:  # task -> success of its informed dialogues
        return [{"seed": 0, "split": "lite-fresh", "task_id": t, "template": "t", "sample": k,
                 "tests_passed": float(informed_successes.get(t, 0)), "success": informed_successes.get(t, 0),
                 "agent_turns": 3, "facts_obtained": 1.0 if t in informed_successes else 0.5}
                for t in range(TASKS) for k in range(2)]
    easy, hard = range(10), range(10, TASKS)
    record(tmp_path, "rft-2", FINAL, arm({t: 1 for t in easy}))                       # asks only on easy tasks
    record(tmp_path, "grpo+credit", FINAL, arm({t: 1 for t in easy} | {t: 0 for t in hard}))  # and on hard ones
    (tmp_path / "comparisons.json").write_text(json.dumps({"primary": ["rft-2", "grpo+credit"]}))
    found = report(tmp_path)
    pooled = {row["arm"]: row["success_given_all_facts"] for row in found["arms"]}
    assert pooled == {"rft-2": 1.0, "grpo+credit": 0.5}
    within = found["declared"]["lite-fresh"]["primary"]["given_all_facts"]
    assert within["mean"] == 0 and within["tasks"] == len(easy)
    record(tmp_path, "grpo+credit", FINAL, arm({t: int(t < 5) for t in easy}))     # now it answers worse
    within = report(tmp_path)["declared"]["lite-fresh"]["primary"]["given_all_facts"]
    assert within["mean"] == pytest.approx(-0.5) and within["high"] < 0
    code, out, err = command_line("sqlite://", capsys, monkeypatch)("study", "report", str(tmp_path))
    assert code == 0 and "| -50.0% [" in out and "], 10 |" in out
    assert markdown(report(tmp_path)) in out  # printed unwrapped: markdown whatever the terminal's width


def test_each_training_seed_is_shown_alone_and_paired_with_the_first(tmp_path):
    """An arm read at two training seeds: each seed's own figures, and the second's difference from the first,
    paired over tasks (B − A: seed 1 solves 4 more of 20 tasks); an arm read at one seed has no such rows."""
    record(tmp_path, "rft-2", FINAL, seeded(set(range(4)), 0))
    record(tmp_path, "rft-2", FINAL, seeded(set(range(8)), 1))
    record(tmp_path, "zero-shot", FINAL, seeded(set(range(2)), 0))
    found = report(tmp_path)["seeds"]
    assert [(row["arm"], row["seed"], row["n"]) for row in found] == [("rft-2", 0, 40), ("rft-2", 1, 40)]
    first, second = found
    assert first["success"]["mean"] == pytest.approx(4 / 20) and second["success"]["mean"] == pytest.approx(8 / 20)
    assert first["versus_first"] is None and second["versus_first"]["difference"]["mean"] == pytest.approx(4 / 20)
    assert second["all_facts"] == pytest.approx(8 / 20) and second["success_given_all_facts"] == 1.0
    text = markdown(report(tmp_path))
    assert "| lite-fresh, final | rft-2 | 1 | 40.0% [" in text and "| 40 | 40.0% | 100.0% | 3.00 | +20.0% [" in text


def chosen_reads(study: Path) -> list[list[str]]:
    """A study's chosen.sh: its final reads, each line's words as `final` splits them."""
    import re
    import shlex

    text = (study / "chosen.sh").read_text(encoding="utf-8")
    lines = re.search(r'final_reads="(.*?)"', text, re.S).group(1).splitlines()
    return [shlex.split(line) for line in lines if line.strip()]  # `final` skips empty lines too


@pytest.mark.skipif(not (STUDY_3 / "chosen.sh").exists(), reason="study 3 has chosen no configuration yet")
def test_study_3_reads_its_primary_arms_at_their_best_configuration_with_two_seeds():
    """chosen.sh (what `lite_study_3.sh final` runs) and comparisons.json against the report's search and the plan's
    rule 3: the primary comparison is the best critic-using arm against the best arm without the critic on lite-val,
    each read on the fresh split at its best configuration, with training seeds 0 and 1."""
    best = {row["arm"]: row for row in report(STUDY_3)["search"] if row["best"]}
    critic = max(("rft+sweet", "grpo+critic"), key=lambda arm: best[arm]["success"]["mean"] if arm in best else -1)
    rival = max(("rft", "rft-2", "grpo"), key=lambda arm: best[arm]["success"]["mean"] if arm in best else -1)
    assert json.loads((STUDY_3 / "comparisons.json").read_text())["primary"] == [rival, critic]
    seeds: dict[str, set[int]] = {}
    for stage, *words in chosen_reads(STUDY_3):
        flags = dict(zip(words[::2], words[1::2]))
        arm = {"sweet": "rft+sweet", "sweet-oracle": "rft+sweet-oracle"}.get(flags["--arm"], flags["--arm"])
        arm = "rft-2" if arm == "rft" and stage == "round2" else arm
        line = " ".join([stage, *words])
        if arm in best:
            assert float(flags["--policy-lr"]) == best[arm]["lr"], line
            assert flags.get("--policy-turns", "all") == (best[arm]["turns"] or "all"), line
        seeds.setdefault(arm, set()).add(int(flags.get("--trainer-seed", 0)))
    assert seeds[critic] == seeds[rival] == {0, 1}


def _script_checkout(tmp_path: Path, script: str, answers: str = "") -> tuple[Path, dict, Path]:
    """A copy of a study's script (it writes times.log into its checkout's study) run with a COLBENCH that writes its
    arguments down, one call after another with a blank line between, then runs ``answers`` (Python, with ``sys``
    and ``json`` imported) for the calls whose output the script reads. The script's part is the command line it
    assembles; the experiment itself is tested in test_experiment. Returns the script, its env and the args file."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    args = tmp_path / "args"
    command = tmp_path / "colbench"
    command.write_text("#!/usr/bin/env python3\nimport json, sys\n"
                       f"open({str(args)!r}, 'a').write('\\n'.join(sys.argv[1:]) + '\\n\\n')\n{answers}")
    command.chmod(0o755)
    scripts = tmp_path / "checkout" / "scripts"
    scripts.mkdir(parents=True)
    for name in (script, "study_env.sh"):
        (scripts / name).write_text((Path(__file__).parent.parent / "scripts" / name).read_text())
    env = {"PATH": "/usr/bin:/bin", "COLBENCH": str(command), "STORE": str(tmp_path / "store")}
    return scripts / script, env, args


def _study_3_checkout(tmp_path: Path) -> tuple[Path, dict, Path]:
    return _script_checkout(tmp_path, "lite_study_3.sh")


def test_study_3_records_a_rebuilt_stage_under_its_own_label(tmp_path):
    """scripts/lite_study_3.sh `rebuilt STAGE`: the same experiment, its reads recorded under LABEL-rebuilt beside
    the original ones; the final reads are never 'rebuilt'."""
    import subprocess

    script, env, args = _study_3_checkout(tmp_path)
    done = subprocess.run(["bash", str(script), "rebuilt", "rft"], env=env, capture_output=True, text=True)
    words = args.read_text().splitlines()
    assert done.returncode == 0 and words[words.index("--label") + 1] == "rft-rebuilt"
    assert "start rft-rebuilt" in (tmp_path / "checkout" / "studies" / "backend-lite-3" / "times.log").read_text()
    assert words[words.index("--model") + 1] == "ckpt:warm" and words[words.index("--policy-lr") + 1] == "3e-5"
    # A rebuilt round-2 stage starts from the rebuilt rft, whichever checkpoint id the rebuilt store gave it.
    (tmp_path / "checkout" / "studies" / "backend-lite-3" / "validation.jsonl").write_text(
        '{"arm": "rft", "label": "rft", "model": "ckpt:2"}\n'
        '{"arm": "rft", "label": "rft-rebuilt", "model": "ckpt:9"}\n')
    args.unlink()
    done = subprocess.run(["bash", str(script), "rebuilt", "round2", "rft2-1e-5"], env=env, capture_output=True,
                          text=True)
    words = args.read_text().splitlines()
    assert done.returncode == 0 and words[words.index("--label") + 1] == "rft2-1e-5-rebuilt"
    assert words[words.index("--model") + 1] == "ckpt:9"
    refused = subprocess.run(["bash", str(script), "rebuilt", "final"], env=env, capture_output=True, text=True)
    assert refused.returncode == 2 and "only rft or round2" in refused.stderr


def test_study_3_final_reads_only_the_first_lines_it_is_given(tmp_path):
    """`lite_study_3.sh final N` runs chosen.sh's first N reads and no later one (the plan reads the last ones only
    within its budget), `novel N` their first-seed reads on lite-novel; a count that is not a positive number is
    refused before anything runs."""
    import subprocess

    script, env, args = _study_3_checkout(tmp_path)
    files = tmp_path / "checkout" / "studies" / "backend-lite-3"
    files.mkdir(parents=True)
    (files / "chosen.sh").write_text((STUDY_3 / "chosen.sh").read_text())
    (files / "validation.jsonl").write_text('{"arm": "rft", "label": "rft", "model": "ckpt:2"}\n')

    def runs(*words: str) -> list[list[str]]:
        args.unlink(missing_ok=True)
        done = subprocess.run(["bash", script, *words], env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return [call.splitlines() for call in args.read_text().strip("\n").split("\n\n")]

    def value(call: list[str], flag: str) -> str:  # the last one given: the one the command line keeps
        return call[len(call) - call[::-1].index(flag)]

    every = runs("final")
    assert len(every) == 6 and {(value(call, "--label"), value(call, "--evaluate-on")) for call in every} == {
        ("final", "fresh")}
    first = runs("final", "5")
    assert first == every[:5]
    assert "--trainer-seed" in first[-1] and "sweet-oracle" in every[-1] and "sweet-oracle" not in sum(first, [])
    # lite-novel: the same reads at the first training seed, each task once, under their own label.
    novel = runs("novel", "5")
    assert [value(call, "--arm") for call in novel] == ["rft", "rft", "sweet"]
    assert not any("--trainer-seed" in call for call in novel)
    assert {(value(call, "--label"), value(call, "--evaluate-on"), value(call, "--test-samples")) for call in novel} \
        == {("novel", "lite-novel", "1")}
    for bad in ("0", "x", "-1"):
        refused = subprocess.run(["bash", script, "final", bad], env=env, capture_output=True, text=True)
        assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "count" in refused.stderr


def online_steps(rewards: list[float], entropy: list[float], spread: list[float], **more) -> list[dict]:
    return [{**more, "step": k, "reward": r, "entropy": e, "groups_with_spread": g, "dialogues": 16, "step_s": 60.0,
             "mismatch_mean": 0.01, "mismatch_max": 0.1 * k, "agent_turns_per_dialogue": 3.0, "sim_leak": 0.0,
             **({"val_success": 0.25 * k / len(rewards)} if k % 5 == 0 else {})}
            for k, (r, e, g) in enumerate(zip(rewards, entropy, spread), 1)]


def test_each_online_run_is_summarised_and_drawn_from_its_steps_alone(tmp_path, capsys, monkeypatch):
    """steps.jsonl (colbench/study_online.py): every run's reward at its start and end (a fifth of its steps each),
    its last in-run validation, entropy's rise, mismatch, the share of groups without spread; one line per run
    and seed, and the curves drawn from the file alone."""
    from colbench.study_online import STEPS, record_steps

    record(tmp_path, "grpo", "online", rows({1, 2}, split="lite-val"))
    rising = [0.1] * 2 + [0.3] * 6 + [0.5] * 2  # 10 steps: the first fifth's mean 0.1, the last's 0.5
    record_steps(tmp_path, "grpo", "online", 0, 7, online_steps(rising, [0.2] * 5 + [0.6] * 5, [0.75] * 10))
    record_steps(tmp_path, "grpo", "online", 1, 9, online_steps([0.4] * 10, [0.3] * 10, [0.5] * 10, credit_s=40.0))
    record_steps(tmp_path, "grpo", "online", 1, 9, online_steps([0.2] * 5, [0.3] * 5, [0.0] * 5))  # seed 1 again
    credited = online_steps([0.3] * 4, [0.3] * 4, [1.0] * 4)
    for step, seconds in zip(credited, (30.0, 50.0, 30.0, 50.0)):
        step["credit_s"] = seconds
    record_steps(tmp_path, "grpo+credit", "online", 0, 11, credited)
    record_steps(tmp_path, "grpo", "final", 0, 7, online_steps(rising, [0.2] * 5 + [0.6] * 5, [0.75] * 10))
    runs = report(tmp_path)["online"]
    # Run 7 read again under another label (the final split's) is one run, its steps once.
    assert [run["label"] for run in runs if run["arm"] == "grpo" and run["seed"] == 0] == ["online, final"]
    assert next(run for run in runs if run["arm"] == "grpo+credit")["credit_s"] == pytest.approx(40.0)
    found = {run["seed"]: run for run in runs if run["arm"] == "grpo"}
    assert found[0]["reward_first"] == pytest.approx(0.1) and found[0]["reward_last"] == pytest.approx(0.5)
    assert (found[0]["val_success"], found[0]["val_step"]) == (0.25, 10)
    assert found[0]["entropy_peak_ratio"] == pytest.approx(3.0) and found[0]["zero_spread"] == pytest.approx(0.25)
    assert found[0]["mismatch_max"] == pytest.approx(1.0) and found[0]["dialogues"] == 160
    assert found[0]["credit_s"] is None  # a run without turn credit
    assert found[1]["steps"] == 5 and found[1]["zero_spread"] == pytest.approx(1.0)  # its own lines replaced
    assert found[1]["credit_s"] is None
    assert {json.loads(line)["run_id"] for line in (tmp_path / STEPS).read_text().splitlines()} == {7, 9, 11}

    run = command_line(None, capsys, monkeypatch)
    code, out, err = run("study", "report", str(tmp_path), "--curves", str(tmp_path / "curves.png"))
    assert code == 0, err
    assert "| grpo | online, final | 0 | 10 | 160 | 0.100 → 0.500 | 25.0% (10) | 0.200 → 0.600 (3.00) |" in out
    assert "| 0% | 3.00 | 0% | 40.0 | 4 |" in out  # grpo+credit: its credit's seconds a step, its 4 minutes
    assert (tmp_path / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (tmp_path / STEPS).unlink()
    code, out, err = run("study", "report", str(tmp_path), "--curves", str(tmp_path / "none.png"))
    assert code != 0 and "holds no online steps" in err and "Traceback" not in err


def test_the_plans_validation_comparisons_are_read_on_each_validation_label_that_holds_both_arms(tmp_path):
    """comparisons.json's ``validation`` pairs (study 4's gate: grpo+oracle against grpo on lite-val): B − A paired
    over tasks on every validation label where both arms were read, Holm-corrected together there."""
    record(tmp_path, "grpo", "val", rows({1, 2}, split="lite-val"))
    record(tmp_path, "grpo+oracle", "val", rows({1, 2, 3, 4, 5, 6}, split="lite-val"))
    record(tmp_path, "grpo+credit", "val", rows(set(), split="lite-val"))
    record(tmp_path, "grpo", "other", rows({1}, split="lite-val"))  # grpo+oracle was never read under this label
    (tmp_path / "comparisons.json").write_text(json.dumps({
        "primary": ["grpo", "grpo+credit"], "validation": [["grpo", "grpo+oracle"], ["grpo", "grpo+credit"],
                                                           ["grpo", "grpo+infogain"]]}))
    found = report(tmp_path)["declared"]
    assert set(found) == {"lite-val, val"}
    assert found["lite-val, val"]["not_read"] == {"grpo+infogain − grpo": ["grpo+infogain"]}
    gate = found["lite-val, val"]["secondary"]
    assert gate["grpo+oracle − grpo"]["difference"]["mean"] == pytest.approx(4 / TASKS)
    assert gate["grpo+credit − grpo"]["difference"]["mean"] == pytest.approx(-2 / TASKS)
    assert {k: v["p_holm"] for k, v in gate.items()} == pytest.approx(holm({k: v["p_value"] for k, v in gate.items()}))


def test_study_4_chose_by_its_plans_rules_from_the_committed_lite_val_figures():
    """chosen.sh and comparisons.json (plan.md, rules 2-4 and amendment 4) against the report of the committed files:
    the baseline is the better of grpo and rft-2 on lite-val, a tie within one dialogue going to rft-2; the primary
    pair is grpo+credit against it, each read on fresh2 once at training seeds 0 and 1, grpo+credit first; no control
    or exploratory arm is read there; the validation pairs are the plan's six, the gate first."""
    found = report(STUDY_4)
    val = {row["arm"]: row for row in found["arms"] if row["label"] == "val"}
    successes = {arm: round(val[arm]["success"]["mean"] * val[arm]["n"]) for arm in ("grpo", "rft-2")}
    baseline = "grpo" if successes["grpo"] > successes["rft-2"] + 1 else "rft-2"
    declared = json.loads((STUDY_4 / "comparisons.json").read_text())
    assert declared["primary"] == [baseline, "grpo+credit"]
    assert declared["secondary"] == [["rft", baseline], ["rft", "grpo+credit"]]
    pairs = declared["validation"]
    assert pairs[0] == ["grpo", "grpo+oracle"] and {tuple(pair) for pair in pairs} == {
        ("grpo", "grpo+oracle"), ("grpo", "grpo+credit"), ("rft-2", "grpo+credit"), ("rft", "grpo"),
        ("rft", "rft-2"), ("grpo", "grpo+infogain")}
    seeded = [(words[0], words[words.index("--trainer-seed") + 1] if "--trainer-seed" in words else "0")
              for words in chosen_reads(STUDY_4)]
    assert seeded[0] == ("grpo+credit", "0") and len(seeded) == len(set(seeded))
    assert {read for read in seeded if read[0] != "rft"} == {(arm, seed) for arm in ("grpo+credit", baseline)
                                                            for seed in "01"}
    assert {arm for arm, _ in seeded} <= {"grpo+credit", baseline, "rft"}


def _study_4_checkout(tmp_path: Path, carried: str) -> tuple[Path, dict, Path]:
    """lite_study_4.sh's checkout: its COLBENCH names rft's checkpoint ckpt:2 and answers the credit-signals report
    with ``carried``."""
    return _script_checkout(tmp_path, "lite_study_4.sh", (
        "if sys.argv[1:3] == ['runs', 'show']: print(json.dumps({'checkpoints': ['ckpt:2']}))\n"
        "if sys.argv[1:3] == ['study', 'report']:\n"
        f"    print(json.dumps({{'carried': {{'credit': {carried!r} or None}}}}))\n"))


def test_study_4_runs_every_online_arm_alike_and_carries_the_credit_studys_choice(tmp_path):
    """scripts/lite_study_4.sh: every arm starts from rft and is read on lite-val under one label; the online arms
    differ in their credit alone (the plan's equal budget); grpo+credit carries the signal the credit-signals report
    names, the critic as the grpo-critic arm, and none is run when the report carries nothing."""
    import subprocess

    def experiment(carried: str, arm: str) -> tuple[subprocess.CompletedProcess, list[str]]:
        script, env, args = _study_4_checkout(tmp_path / f"{carried or 'none'}-{arm}", carried)
        done = subprocess.run(["bash", str(script), "arm", arm], env=env, capture_output=True, text=True)
        calls = [call.splitlines() for call in args.read_text().strip("\n").split("\n\n")] if args.exists() else []
        return done, next((call for call in calls if call[:1] == ["experiment"]), [])

    def value(call: list[str], flag: str) -> str:  # the last one given: the one the command line keeps
        return call[len(call) - call[::-1].index(flag)]

    def online(call: list[str]) -> dict:
        return {flag: value(call, flag) for flag in ("--policy-steps", "--policy-tasks-per-step", "--policy-group",
                                                     "--policy-lr", "--policy-batch-size", "--policy-engine")}

    calls = {}
    for arm in ("rft-2", "grpo", "grpo+oracle", "grpo+credit", "grpo+infogain"):
        done, calls[arm] = experiment("ref-infogain", arm)
        assert done.returncode == 0, done.stderr
        call = calls[arm]
        assert (value(call, "--model"), value(call, "--label"), value(call, "--evaluate-on") if "--evaluate-on" in
                call else "val", value(call, "--test-samples")) == ("ckpt:2", "val", "val", "4")
    assert value(calls["rft-2"], "--arm") == "rft" and value(calls["rft-2"], "--policy-lr") == "1e-5"
    assert value(calls["grpo+credit"], "--turn-credit") == "ref-infogain"
    assert "grpo-credit=grpo+credit" in calls["grpo+credit"] and "grpo-credit=grpo+infogain" in calls["grpo+infogain"]
    assert value(calls["grpo+infogain"], "--turn-credit") == "infogain"
    budgets = [online(calls[arm]) for arm in ("grpo", "grpo+oracle", "grpo+credit", "grpo+infogain")]
    assert budgets[0]["--policy-steps"] == "25" and all(budget == budgets[0] for budget in budgets)
    zero_shot = {arm: [w for w in call if w.startswith("zero-shot=")][-1] for arm, call in calls.items()}
    assert zero_shot == {"rft-2": "zero-shot=rft", "grpo": "zero-shot=", "grpo+oracle": "zero-shot=",
                         "grpo+credit": "zero-shot=", "grpo+infogain": "zero-shot="}  # rft read once, by rft-2's
    done, critic = experiment("critic:ckpt:critic", "grpo+credit")
    assert done.returncode == 0 and value(critic, "--arm") == "grpo-critic" and "grpo-critic=grpo+credit" in critic
    done, nothing = experiment("", "grpo+credit")
    assert done.returncode == 2 and not nothing and done.stderr.count("\n") == 1 and "carries no signal" in done.stderr


def test_study_4_reads_fresh2_with_each_arms_validated_flags_once_per_chosen_line(tmp_path):
    """`lite_study_4.sh final [N]`: each chosen.sh line names an arm (and --trainer-seed 1 for the second seed), read
    on all of fresh2 x 3 with the very flags its lite-val read had; `rft` reads the starting point alone."""
    import subprocess

    script, env, args = _study_4_checkout(tmp_path, "ref-infogain")
    files = tmp_path / "checkout" / "studies" / "backend-lite-4"
    files.mkdir(parents=True)
    refused = subprocess.run(["bash", str(script), "final"], env=env, capture_output=True, text=True)
    assert refused.returncode == 2 and "commit the validation choices first" in refused.stderr

    def calls() -> list[list[str]]:
        found = [c.splitlines() for c in args.read_text().strip("\n").split("\n\n") if c.startswith("experiment")]
        args.unlink()
        return found

    def value(call: list[str], flag: str) -> str:
        return call[len(call) - call[::-1].index(flag)]

    subprocess.run(["bash", str(script), "arm", "grpo+credit"], env=env, capture_output=True, text=True, check=True)
    [validated] = calls()
    (files / "chosen.sh").write_text("final_reads='\ngrpo+credit\nrft-2\ngrpo+credit --trainer-seed 1\nrft\n'\n")
    done = subprocess.run(["bash", str(script), "final", "2"], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert len(calls()) == 2
    subprocess.run(["bash", str(script), "final"], env=env, capture_output=True, text=True, check=True)
    reads = calls()
    assert [(value(c, "--label"), value(c, "--evaluate-on"), value(c, "--test-tasks"), value(c, "--test-samples"),
             value(c, "--engine")) for c in reads] == [("final", "fresh2", "412", "3", "vllm-serve")] * 4  # amendment 5
    # The same training flags as the validated run's (the experiment then finds that run stored), how it is read apart.
    def training(call: list[str]) -> list[str]:
        read = {"--label", "--evaluate-on", "--test-tasks", "--test-samples", "--engine"}
        return [w for i, w in enumerate(call) if w not in read and call[i - 1] not in read]

    assert training(reads[0]) == training(validated) and training(reads[2]) == training(validated) + [
        "--trainer-seed", "1"]
    assert value(reads[1], "--arm") == "rft" and "--policy-steps" not in reads[1]
    # rft itself only where a line asks for it, and then without a read of rft-2 (recorded as nothing)
    zero_shot = [[w for w in c if w.startswith(("zero-shot=", "rft="))] for c in reads]
    assert [z[-1] for z in zero_shot[:3]] == ["rft=rft-2", "rft=rft-2", "rft=rft-2"]
    assert "zero-shot=rft" in zero_shot[3] and value(reads[3], "--record-arm") == "zero-shot=rft"
    assert zero_shot[3].index("rft=") > zero_shot[3].index("rft=rft-2")


def test_a_studys_saved_dialogues_are_restored_only_into_a_store_without_them(tmp_path):
    """study_env.sh's save_dialogues writes a policy's dialogues on a split as `export --ids` does, and
    restore_dialogues imports them under their ids (--keep-ids) only where the store holds none of that policy's
    graded dialogues there: a store that sampled them, or restored them before, is left as it is."""
    import subprocess

    def run(held: int, *calls: str) -> tuple[subprocess.CompletedProcess, list[list[str]]]:
        folder = tmp_path / f"run-{len(list(tmp_path.glob('run-*')))}"
        script, env, args = _script_checkout(folder, "lite_study_4.sh", (
            f"if sys.argv[1] == 'eval': print(json.dumps([{{'n_trajectories': {held}}}] if {held} else []))\n"
            "if sys.argv[1] == 'export':\n"
            "    out = sys.argv[sys.argv.index('--out') + 1]\n"
            "    open(out + '/trajectories.jsonl', 'w').write('saved\\n')\n"))
        source = f"here={script.parent.parent}; source {script.parent / 'study_env.sh'} store study; " + "; ".join(
            calls)
        done = subprocess.run(["bash", "-c", f"set -euo pipefail; {source}"], env=env, capture_output=True, text=True,
                              cwd=folder)
        found = [c.splitlines() for c in args.read_text().strip("\n").split("\n\n")] if args.exists() else []
        return done, found

    saved = tmp_path / "round.jsonl"
    done, calls = run(0, f"save_dialogues {saved} ckpt:1 lite-train")
    assert done.returncode == 0, done.stderr
    assert saved.read_text() == "saved\n"
    [export] = calls
    assert export[:1] == ["export"] and "--ids" in export
    assert export[export.index("--policy") + 1] == "ckpt:1" and export[export.index("--split") + 1] == "lite-train"

    done, calls = run(0, f"restore_dialogues {saved} ckpt:1 lite-train")
    assert done.returncode == 0, done.stderr
    ask, restore = calls
    assert ask[:1] == ["eval"] and ask[ask.index("--policy") + 1] == "ckpt:1" and "backend:lite-train" in ask
    assert restore == ["trajectories", "import", str(saved), "--split", "lite-train", "--keep-ids"]
    assert "start restore-round " in (tmp_path / "run-1" / "checkout" / "studies" / "study" / "times.log").read_text()

    done, calls = run(400, f"restore_dialogues {saved} ckpt:1 lite-train")
    assert done.returncode == 0 and [call[0] for call in calls] == ["eval"]  # held already: nothing imported
    done, calls = run(0, f"restore_dialogues {tmp_path / 'never-saved.jsonl'} ckpt:1 lite-train")
    assert done.returncode == 0 and calls == []  # no file, no question


def test_study_4_start_restores_its_saved_rounds_and_records_the_rebuilds_digests(tmp_path):
    """`lite_study_4.sh start` on a lost store: π0 fitted, round 1 restored from round1.jsonl before round 1's
    rollout (which then finds it done) and rft's fit, round 2 restored after rft; the rebuilt weights' sha256 go to
    times.log whatever they are (another machine rebuilds other bits: plan.md, amendment 3)."""
    import hashlib
    import subprocess

    script, env, args = _script_checkout(tmp_path, "lite_study_4.sh", (
        "if sys.argv[1:3] == ['runs', 'show']: print(json.dumps({'checkpoints': ['ckpt:7']}))\n"
        "if sys.argv[1] == 'eval': print('[]')\n"))
    checkout = script.parent.parent
    (script.parent / "credit_signals.sh").write_text(
        (Path(__file__).parent.parent / "scripts" / "credit_signals.sh").read_text())
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"rebuilt weights")
    python = checkout / ".venv" / "bin" / "python"  # the study's own interpreter, asked where the weights are
    python.parent.mkdir(parents=True)
    python.write_text(f"#!/bin/sh\necho {weights}\n")
    python.chmod(0o755)
    files = checkout / "studies" / "backend-lite-4"
    files.mkdir(parents=True)
    for name in ("round1.jsonl", "round2.jsonl"):
        (files / name).write_text("{}\n")
    done = subprocess.run(["bash", str(script), "start"], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    calls = [call.splitlines() for call in args.read_text().strip("\n").split("\n\n")]
    steps = [" ".join(call[:2]) + (f" {Path(call[2]).name}" if call[:2] == ["trajectories", "import"] else "")
             for call in calls if call[0] in ("rollout", "policy", "trajectories")]
    assert steps == ["rollout --engine", "policy fit", "trajectories import round1.jsonl", "rollout --model",
                     "policy fit", "trajectories import round2.jsonl"]
    imports = [call for call in calls if call[:2] == ["trajectories", "import"]]
    assert all("--keep-ids" in call and call[call.index("--split") + 1] == "lite-train" for call in imports)
    digest = hashlib.sha256(b"rebuilt weights").hexdigest()
    logged = [line.rsplit(" ", 1)[0] for line in (files / "times.log").read_text().splitlines()
              if line.startswith("rebuilt")]
    assert logged == [f"rebuilt warm ckpt:7 {digest}", f"rebuilt rft ckpt:7 {digest}"]
