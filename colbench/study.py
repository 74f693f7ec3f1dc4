"""A study's results as small text files from which anyone can recompute its tables.

A study's folder (``studies/backend-lite`` in the repository) holds:

- ``trajectories.jsonl``: one evaluated trajectory per line: ``arm`` (zero-shot, rft, mtdpo,
  sweet, sweet-no-c, best-of-n, sweet-oracle, ...), ``label`` (the study run that evaluated it:
  a configuration on validation, ``final`` on the test sets), ``split`` (lite-val, lite-test,
  lite-novel), ``task_id``, ``template``, ``sample``, ``tests_passed`` (a share), ``success`` (0 or
  1), ``agent_turns`` and ``facts_obtained`` (the share of the task's hidden facts the dialogue
  obtained; backend-lite only).
- ``validation.jsonl``: one line per arm and label evaluated on validation: the settings its
  policy and critic were trained with, its checkpoint, and what it cost (minutes of training).
- ``pairs.jsonl``: one line per SWEET-RL arm and label: what its training pairs preferred, judged
  by the built-in human and the sandbox (`colbench critic pairs --grade`; `--study FOLDER --arm
  --label` keeps a run's line here), so that a critic's ranking can be checked against ground truth.
- ``steps.jsonl``: every online arm's stored figures, step by step (colbench/study_online.py).
- ``times.log``: each stage's start and stop, as the study's script wrote them.

`colbench experiment --label NAME` writes the first three and the steps; `colbench study report FOLDER` reads them
alone (no store, no model) and gives, per split, each arm's success with a bootstrap interval over
tasks (a task's dialogues resampled together) and its paired difference from zero-shot on the same
tasks and samples (an arm read at several training seeds pools them; each seed is also shown alone,
paired with the first); for SWEET-RL its paired differences from zero-shot, rejection fine-tuning and
multi-turn DPO with Holm-corrected p-values, and from SWEET-RL without c; every configuration tried
on validation, with its settings and cost, each arm's best marked; and how often each SWEET-RL arm's
chosen candidate was the better one where ground truth orders the two; and each online run's
diagnostics over its steps.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from colbench import study_online
from colbench.errors import ColbenchError
from colbench.families.backend import BackendFamily
from colbench.jsonl import read_jsonl, replace_rows
from colbench.tasks.spec import LITE_SPLITS

TRAJECTORIES = "trajectories.jsonl"
VALIDATION = "validation.jsonl"
PAIRS = "pairs.jsonl"
# The plan's analysis as data, committed with the final choices: {"primary": [A, B], "secondary": [[A, B], ...]},
# each B − A read on the final label; the secondary ones Holm-corrected together.
COMPARISONS = "comparisons.json"
FINAL = "final"  # the label of the test-set evaluation
# A stage retrained because its store was lost records its read under its label plus this suffix, beside the
# original read (the evidence its choice rests on): the two are different training runs of one configuration.
REBUILT = "-rebuilt"
VALIDATION_SPLITS = (LITE_SPLITS["val"],)  # where the search is read; the test sets only under FINAL
# SWEET-RL is measured against these, Holm-corrected over the three (the issue's goal).
SWEET_RIVALS = ("zero-shot", "rft", "mtdpo")
ARM_ORDER = ("zero-shot", "rft", "mtdpo", "sweet", "sweet-no-c", "sweet-critic", "sweet-oracle", "best-of-n")


class StudyError(ColbenchError, ValueError):
    pass


# ---------------------------------------------------------------- writing


def trajectory_rows(db, policy: str, setting: str, split: str, simulator: str | None = None) -> list[dict]:
    """The evaluated trajectories of ``policy`` under ``setting`` on a backend split, as rows."""
    from colbench.families.lite_truth import lite_dialogues
    from colbench.tasks.rows import spec_of
    from colbench.store import queries
    from colbench.tasks.lite import facts_of, is_lite, template_of

    with db.read() as session:
        graded = queries.graded_trajectory_ids(session, family=BackendFamily.name, split=split, policies=[policy],
                                               simulator=simulator, setting=setting)
        ids = [i for i, _ in graded]
        trajectories = queries.trajectories_by_id(session, ids)
        tasks = {
            i: spec_of(t) for i, t in queries.tasks_by_id(session, {t.task_id for t in trajectories.values()}).items()
        }
        turns = queries.turns_for(session, ids)
    dialogues = lite_dialogues(db, ids)
    rows = []
    for i in ids:
        trajectory, task = trajectories[i], tasks[trajectories[i].task_id]
        dialogue = dialogues.get(i)
        facts = None
        if dialogue is not None and is_lite(task):
            facts = len(set().union(*dialogue.stated)) / max(len(facts_of(task)), 1)
        rows.append({
            "split": split, "task_id": trajectory.task_id, "template": template_of(task) if is_lite(task) else None,
            "sample": trajectory.sample_index, "tests_passed": round(float(trajectory.reward or 0.0), 6),
            "success": int(bool(trajectory.success)), "agent_turns": sum(t.role == "assistant" for t in turns[i]),
            "facts_obtained": None if facts is None else round(facts, 6),
        })
    return rows


def record(folder: Path, arm: str, label: str, rows: list[dict], validation: dict | None = None) -> None:
    """Replace ``arm``/``label``'s trajectories of the splits and training seeds in ``rows`` in the folder's files
    (and its validation line, when given), writing each file whole under a temporary name. An arm read at a
    second training seed keeps the first seed's rows beside its own."""
    folder.mkdir(parents=True, exist_ok=True)
    splits, seeds = {row["split"] for row in rows}, {row.get("seed") for row in rows}
    replace_rows(folder / TRAJECTORIES, lambda r: r["arm"] == arm and r["label"] == label and r["split"] in splits
             and r.get("seed") in seeds, [{"arm": arm, "label": label} | row for row in rows])
    if validation is not None:
        replace_rows(folder / VALIDATION, lambda r: r["arm"] == arm and r["label"] == label,
                 [{"arm": arm, "label": label} | validation])


def record_pairs(folder: Path, arm: str, label: str, kinds: dict, seed: int = 0) -> None:
    """Replace ``arm``/``label``'s line at training ``seed`` in the folder's pairs file with ``kinds``
    (families.lite_truth.PairKinds.as_dict: what the arm's SWEET-RL training pairs preferred). An arm
    read at a second training seed keeps the first seed's line beside its own, as ``record`` does."""
    folder.mkdir(parents=True, exist_ok=True)
    replace_rows(folder / PAIRS, lambda r: r["arm"] == arm and r["label"] == label and r.get("seed", 0) == seed,
             [{"arm": arm, "label": label, "seed": seed} | kinds])


# ---------------------------------------------------------------- reading


@dataclass
class ArmResult:
    arm: str
    label: str
    split: str
    n: int  # trajectories
    tasks: int
    success: dict  # mean, low, high
    tests_passed: dict
    facts_obtained: float | None
    # Success is about P(every fact obtained) x P(solved | every fact obtained): which of the
    # two a training moved tells asking apart from writing the code.
    all_facts: float | None  # share of trajectories that obtained every fact
    success_given_all_facts: float | None
    agent_turns: float
    versus_zero_shot: dict | None  # paired: difference (mean, low, high), p_value, tasks


def _side(rows: list[dict], name: str):
    from colbench.compare import Side

    side = Side(name, BackendFamily.name)
    for row in rows:
        side.samples.setdefault(row["task_id"], []).append((float(row["success"]), float(row["tests_passed"])))
    return side


def _interval(values: list[float]) -> dict:
    from colbench.eval import bootstrap

    found = bootstrap(values)
    return {"mean": found.mean, "low": found.low, "high": found.high}


def _task_interval(rows: list[dict], field: str) -> dict:
    """The mean of ``field`` with a 95% interval that resamples tasks, each with all its dialogues: dialogues of
    one task are not independent (most of a figure's variance is between tasks), so resampling dialogues would
    draw the interval too narrow. The mean is over tasks (equal to the mean over dialogues when every task has as
    many)."""
    return _interval(list(_task_means(rows, field).values()))


def _task_means(rows: list[dict], field: str) -> dict[int, float]:
    """Each task's mean of ``field`` over its rows."""
    by_task: dict[int, list[float]] = {}
    for row in rows:
        by_task.setdefault(row["task_id"], []).append(float(row[field]))
    return {task: sum(values) / len(values) for task, values in by_task.items()}


def _has_every_fact(row: dict) -> bool:
    return row.get("facts_obtained") is not None and row["facts_obtained"] >= 1.0


def _asking(rows: list[dict]) -> dict:
    """ArmResult's three figures of asking (None where the family records no facts)."""
    facts = [r["facts_obtained"] for r in rows if r.get("facts_obtained") is not None]
    informed = [r for r in rows if _has_every_fact(r)]
    return {"facts_obtained": sum(facts) / len(facts) if facts else None,
            "all_facts": len(informed) / len(facts) if facts else None,
            "success_given_all_facts": sum(r["success"] for r in informed) / len(informed) if informed else None}


def _paired(a_rows: list[dict], b_rows: list[dict], a: str, b: str) -> dict | None:
    """B − A in success, paired by task (and sample: both sides must hold the same samples), and in success given
    every fact within task (``_informed_difference``)."""
    from colbench.compare import NothingToCompare, compare

    try:
        found = compare(_side(a_rows, a), _side(b_rows, b), "success")
    except NothingToCompare:
        return None
    d = found.difference
    return {"difference": {"mean": d.mean, "low": d.low, "high": d.high}, "p_value": found.p_value,
            "tasks": found.n_tasks, "detectable": detectable(d.low, d.high),
            "given_all_facts": _informed_difference(a_rows, b_rows)}


def _informed_difference(a_rows: list[dict], b_rows: list[dict]) -> dict | None:
    """B − A in success among the dialogues that obtained every fact, within task: each task's success rate over
    its informed dialogues, on the tasks where both arms have one, then the mean difference with a 95% interval
    resampling tasks. It separates asking from answering: an arm that asks more reaches every fact on harder tasks
    too, so the pooled "success when every fact obtained" mixes a change of answers with a change of tasks. None
    where the family records no facts or no task has an informed dialogue on both sides."""
    a, b = (_task_means([row for row in rows if _has_every_fact(row)], "success") for rows in (a_rows, b_rows))
    shared = sorted(set(a) & set(b))
    if not shared:
        return None
    return {**_interval([b[task] - a[task] for task in shared]), "tasks": len(shared)}


def detectable(low: float, high: float) -> float | None:
    """The smallest true difference a comparison this noisy finds (p < 0.05) four times in five:
    (1.96 + 0.84) standard errors, the error read off the 95% interval's width. A difference
    below it going unseen says more about the test set's size than about the arms. None where the
    interval has no width (no task where the two differ, e.g. both at the floor): the noise is not
    measured, and any difference would not be as easy to see as a zero error says."""
    return (1.96 + 0.84) * (high - low) / (2 * 1.96) if high > low else None


def holm(p_values: dict[str, float]) -> dict[str, float]:
    """Holm-Bonferroni adjusted p-values (step-down, kept monotone, capped at 1)."""
    order = sorted(p_values, key=p_values.get)
    adjusted, running = {}, 0.0
    for rank, key in enumerate(order):
        running = max(running, min(1.0, (len(order) - rank) * p_values[key]))
        adjusted[key] = running
    return adjusted


def against_ground_truth(kinds: dict) -> dict:
    """How a run's pairs (``record_pairs``) stand against ground truth, counted where it orders the
    two candidates by itself: a question that obtains a new fact over one that re-asks or obtains
    nothing, and of two answers the one that passes more tests. (The oracle also ranks a question
    against an answer, by the answer's tests: that needs the grades of both, which are not kept.)"""
    from colbench.families.lite_truth import NEW, NOTHING, REPEAT, PairKinds

    run = PairKinds(kinds["run_id"], kinds["pairs"], kinds["kinds"], kinds.get("answers_graded") or {})
    # [chosen is the better, rejected is]
    questions = [sum(side) for side in zip(run.preferred(NEW, NOTHING), run.preferred(NEW, REPEAT))]
    answers = [run.answers_graded.get("chosen passed more", 0), run.answers_graded.get("rejected passed more", 0)]
    right, wrong = questions[0] + answers[0], questions[1] + answers[1]
    return {"arm": kinds["arm"], "label": kinds["label"], "pairs": run.pairs, "ordered": right + wrong,
            "questions": questions, "answers": answers,
            "agreement": _interval([1.0] * right + [0.0] * wrong) if right + wrong else None}


def _arm_key(arm: str) -> tuple:
    return (ARM_ORDER.index(arm) if arm in ARM_ORDER else len(ARM_ORDER), arm)


def report(folder: Path) -> dict:
    """Every table of the study, from its files alone."""
    rows = read_jsonl(folder / TRAJECTORIES)
    if not rows:
        raise StudyError(f"{folder / TRAJECTORIES} holds no trajectories")
    groups: dict[tuple[str, str, str], list[dict]] = {}
    for row in rows:
        groups.setdefault((row["split"], row["label"], row["arm"]), []).append(row)
    validation = {(r["arm"], r["label"]): r for r in read_jsonl(folder / VALIDATION)}
    results = []
    for (split, label, arm), mine in sorted(
        groups.items(), key=lambda item: (item[0][0], item[0][1] != FINAL, item[0][1], _arm_key(item[0][2]))
    ):
        base = groups.get((split, label, "zero-shot")) or _any_zero_shot(groups, split, label)
        results.append(ArmResult(
            arm=arm, label=label, split=split, n=len(mine), tasks=len({r["task_id"] for r in mine}),
            success=_task_interval(mine, "success"),
            tests_passed=_task_interval(mine, "tests_passed"),
            **_asking(mine),
            agent_turns=sum(r["agent_turns"] for r in mine) / len(mine),
            versus_zero_shot=None if arm == "zero-shot" or base is None else _paired(base, mine, "zero-shot", arm),
        ))
    finals = {}
    for split in sorted({s for s, label, _ in groups if label == FINAL}):
        sweet = groups.get((split, FINAL, "sweet"))
        if not sweet:
            continue
        versus = {
            rival: _paired(groups[(split, FINAL, rival)], sweet, rival, "sweet")
            for rival in SWEET_RIVALS
            if (split, FINAL, rival) in groups
        }
        versus = {k: v for k, v in versus.items() if v is not None}
        adjusted = holm({k: v["p_value"] for k, v in versus.items()})
        for rival, found in versus.items():
            found["p_holm"] = adjusted[rival]
        no_c = groups.get((split, FINAL, "sweet-no-c"))
        finals[split] = {"sweet_vs": versus,
                         "sweet_vs_no_c": _paired(no_c, sweet, "sweet-no-c", "sweet") if no_c else None}
    return {
        "folder": str(folder),
        "arms": [r.__dict__ for r in results],
        "seeds": seeds(groups),
        "sweet": finals,
        "declared": declared(folder, groups),
        "validation": [
            validation[key] | {"split_results": [r.__dict__ for r in results if (r.arm, r.label) == key]}
            for key in validation
        ],
        "search": search(validation, results),
        "pairs": _distinct_pairs(read_jsonl(folder / PAIRS)),
        "online": study_online.summary(read_jsonl(folder / study_online.STEPS)),
    }


def seeds(groups: dict[tuple[str, str, str], list[dict]]) -> list[dict]:
    """Each training seed of an arm read at more than one, alone: how far one seed's figure is from another's says
    how much of a comparison between arms is the luck of one training run. Each seed past the first is paired over
    tasks with the first (each task's samples)."""
    found = []
    for (split, label, arm), mine in groups.items():
        by_seed: dict[int, list[dict]] = {}
        for row in mine:
            by_seed.setdefault(row.get("seed") or 0, []).append(row)
        if len(by_seed) < 2:
            continue
        first = min(by_seed)
        for seed, rows in sorted(by_seed.items()):
            found.append({
                "split": split, "label": label, "arm": arm, "seed": seed, "n": len(rows),
                "success": _task_interval(rows, "success"), **_asking(rows),
                "agent_turns": sum(r["agent_turns"] for r in rows) / len(rows),
                "versus_first": None if seed == first else _paired(by_seed[first], rows, f"seed {first}",
                                                                  f"seed {seed}"),
            })
    return found


def declared(folder: Path, groups: dict[tuple[str, str, str], list[dict]]) -> dict:
    """The comparisons the study's ``comparisons.json`` declares, per split of the final label: the primary one
    (B − A paired over tasks, each task's mean over every dialogue of every training seed, sign-flip p, its
    interval resampling tasks, and the difference it could detect at 80% power) and the secondary ones, their
    p-values Holm-corrected together; and its ``validation`` comparisons (a decision rule's, e.g. a gate) on each
    validation label that read both arms, keyed "SPLIT, LABEL", Holm-corrected together there. A comparison whose
    arms were not both read goes to ``not_read`` with the arms missing (a plan's comparison is never dropped in
    silence) and out of the Holm correction."""
    path = folder / COMPARISONS
    if not path.exists():
        return {}
    try:
        plan = json.loads(path.read_text(encoding="utf-8"))
        primary, secondary = tuple(plan["primary"]), [tuple(pair) for pair in plan.get("secondary", [])]
        validation = [tuple(pair) for pair in plan.get("validation", [])]
        if len(primary) != 2 or any(len(pair) != 2 for pair in secondary + validation):
            raise ValueError("each comparison names two arms")
    except (ValueError, KeyError, TypeError) as err:
        raise StudyError(f"{path}: not a comparisons file ({err})") from err
    def paired(split: str, pair: tuple, label: str = FINAL) -> dict | None:
        a, b = (groups.get((split, label, arm)) for arm in pair)
        return _paired(a, b, *pair) if a and b else None

    def missing(split: str, pairs: list[tuple], label: str = FINAL) -> dict[str, list[str]]:
        return {f"{b} − {a}": unread for a, b in pairs
                if (unread := [arm for arm in (a, b) if not groups.get((split, label, arm))])}

    def corrected(split: str, pairs: list[tuple], label: str = FINAL) -> dict:
        found = {f"{b} − {a}": paired(split, (a, b), label) for a, b in pairs}
        found = {k: v for k, v in found.items() if v is not None}
        for key, p_holm in holm({k: v["p_value"] for k, v in found.items()}).items():
            found[key]["p_holm"] = p_holm
        return found

    found = {}
    primary_name = f"{primary[1]} − {primary[0]}"
    for split in sorted({s for s, label, _ in groups if label == FINAL}):
        first = paired(split, primary)
        found[split] = {"primary": {"name": primary_name, **first} if first else None,
                        "secondary": corrected(split, secondary),
                        "not_read": {("primary: " if name == primary_name else "") + name: unread
                                     for name, unread in missing(split, [primary] + secondary).items()}}
    for split, label in sorted({(s, label) for s, label, _ in groups if label != FINAL and s in VALIDATION_SPLITS}):
        if checked := corrected(split, validation, label):
            found[f"{split}, {label}"] = {"primary": None, "secondary": checked,
                                          "not_read": missing(split, validation, label)}
    return found


def search(validation: dict[tuple[str, str], dict], results: list[ArmResult]) -> list[dict]:
    """Every configuration tried on validation, one row per arm and label, with what set it apart
    (learning rate, NLL weight, candidates a turn, N), its figures and its cost; ``best`` marks
    each arm's highest success, the configuration its search chose. A rebuilt stage's read
    (label ``...-rebuilt``) is a row too but never the best: the choice was made on the first reads."""
    found = {(r.arm, r.label): r for r in results if r.split in VALIDATION_SPLITS}
    rows = []
    for (arm, label), line in validation.items():
        result = found.get((arm, label))
        if arm == "zero-shot" or result is None:
            continue
        policy, critic = line.get("policy") or {}, line.get("critic") or {}
        settings = policy.get("settings") or {}
        rows.append({
            "arm": arm, "label": label, "split": result.split, "lr": settings.get("lr"),
            # a run records only its own algorithm's settings (trainer.run_settings): rft has no NLL weight
            "nll_weight": settings.get("nll_weight"), "candidates": settings.get("candidates"),
            # the turns SWEET-RL trains (a run older than the setting trained them all)
            "turns": settings.get("turns", "all") if "candidates" in settings else None,
            "best_of": line.get("best_of"), "success": result.success, "versus_zero_shot": result.versus_zero_shot,
            "policy_minutes": policy.get("minutes"), "critic_minutes": critic.get("minutes"),
        })
    rows.sort(key=lambda r: (_arm_key(r["arm"]), r["label"]))
    for r in rows:
        r["best"] = False
    for arm in {r["arm"] for r in rows}:
        mine = [r for r in rows if r["arm"] == arm and not r["label"].endswith(REBUILT)]
        top = max((r["success"]["mean"] for r in mine), default=None)
        for r in mine:
            r["best"] = r["success"]["mean"] == top
    return rows


def _distinct_pairs(lines: list[dict]) -> list[dict]:
    """One row per set of pairs: runs that differ only in the actor's step (learning rate, NLL
    weight) train on the same candidates ranked the same way, so their pairs are counted once,
    their labels listed (with the training seed past the first: a seed's pairs are its own)."""
    rows: dict[tuple, dict] = {}
    for kinds in sorted(lines, key=lambda r: (r["label"] != FINAL, r["label"], r.get("seed", 0), _arm_key(r["arm"]))):
        seed = kinds.get("seed", 0)  # another seed samples its own candidates: never the same pairs
        key = (kinds["arm"], seed,
               json.dumps([kinds["pairs"], kinds["kinds"], kinds.get("answers_graded")], sort_keys=True))
        label = f"{kinds['label']} (seed {seed})" if seed else kinds["label"]
        if key in rows:
            rows[key]["labels"].append(label)
        else:
            rows[key] = against_ground_truth(kinds) | {"labels": [label]}
    return list(rows.values())


def _any_zero_shot(groups: dict, split: str, label: str) -> list[dict] | None:
    """Zero-shot is the same policy under every label of one build: its rows under any label of the split, from a
    rebuilt warm start for a rebuilt label and from the original one otherwise."""
    for (s, other, arm), rows in groups.items():
        if s == split and arm == "zero-shot" and other.endswith(REBUILT) == label.endswith(REBUILT):
            return rows
    return None


# ---------------------------------------------------------------- the tables


def _pct(interval: dict) -> str:
    return f"{interval['mean']:.1%} [{interval['low']:.1%}, {interval['high']:.1%}]"


def _share(value: float | None) -> str:
    return "–" if value is None else f"{value:.1%}"


def _number(value: float | None, spec: str = "g") -> str:
    return "–" if value is None else format(value, spec)


def _diff(found: dict | None, holm_too: bool = False) -> str:
    if not found:
        return "–"
    d = found["difference"]
    text = f"{d['mean']:+.1%} [{d['low']:+.1%}, {d['high']:+.1%}], p {found['p_value']:.2g}"
    return text + (f" (Holm {found['p_holm']:.2g})" if holm_too and "p_holm" in found else "")


def _informed(found: dict | None) -> str:
    if not found:
        return "–"
    return f"{found['mean']:+.1%} [{found['low']:+.1%}, {found['high']:+.1%}], {found['tasks']}"


def markdown(found: dict) -> str:
    """The study's tables as Markdown: one per split and label, then SWEET-RL's comparisons."""
    out: list[str] = []
    by_table: dict[tuple[str, str], list[dict]] = {}
    for arm in found["arms"]:
        by_table.setdefault((arm["split"], arm["label"]), []).append(arm)
    for (split, label), arms in by_table.items():
        out += [
            "",
            f"**{split}, {label}**",
            "",
            "| arm | success (95% CI) | tests passed (95% CI) | success − zero-shot, paired (95% CI), p | trajectories "
            "| facts obtained | every fact obtained | success when every fact obtained | agent turns |",
            "|---|---|---|---|---|---|---|---|---|"
        ]
        for arm in arms:
            out.append(
                f"| {arm['arm']} | {_pct(arm['success'])} | {_pct(arm['tests_passed'])} |"
                f" {_diff(arm['versus_zero_shot'])} | {arm['n']} | {_share(arm['facts_obtained'])} |"
                f" {_share(arm.get('all_facts'))} | {_share(arm.get('success_given_all_facts'))} |"
                f" {arm['agent_turns']:.2f} |"
            )
    if found.get("seeds"):
        out += ["", "**Each training seed alone** (an arm read at more than one; its table above pools them; the"
                " difference from the first seed paired over tasks, 95% CI, sign-flip p)", "",
                "| split, label | arm | seed | success (95% CI) | trajectories | every fact obtained "
                "| success when every fact obtained | agent turns | − first seed, paired (95% CI), p |",
                "|---|---|---|---|---|---|---|---|---|"]
        for row in found["seeds"]:
            out.append(f"| {row['split']}, {row['label']} | {row['arm']} | {row['seed']} | {_pct(row['success'])} |"
                       f" {row['n']} | {_share(row['all_facts'])} | {_share(row['success_given_all_facts'])} |"
                       f" {row['agent_turns']:.2f} | {_diff(row['versus_first'])} |")
    for split, sweet in found["sweet"].items():
        out += ["", f"**SWEET-RL on {split}, paired (95% CI), p (Holm over {', '.join(sweet['sweet_vs'])})**", "",
                "| SWEET-RL − | difference | detectable at 80% power |", "|---|---|---|"]
        for rival, comparison in (*sweet["sweet_vs"].items(), ("sweet-no-c", sweet["sweet_vs_no_c"])):
            power = f"{comparison['detectable']:.1%}" if comparison and comparison["detectable"] is not None else "–"
            out.append(f"| {rival} | {_diff(comparison, holm_too=True)} | {power} |")
    for split, declared_here in found.get("declared", {}).items():
        out += ["", f"**The plan's comparisons on {split}** (paired over tasks, 95% CI, sign-flip p; the secondary"
                " ones Holm-corrected together; given every fact: success among the dialogues that obtained every"
                " fact, within task, on the tasks where both arms have one)", "",
                "| comparison | difference | detectable at 80% power | given every fact (95% CI), tasks |",
                "|---|---|---|---|"]
        primary = declared_here["primary"]
        listed = [(f"primary: {primary['name']}", primary)] if primary else []
        for name, comparison in listed + list(declared_here["secondary"].items()):
            power = f"{comparison['detectable']:.1%}" if comparison["detectable"] is not None else "–"
            out.append(f"| {name} | {_diff(comparison, holm_too=True)} | {power} |"
                       f" {_informed(comparison.get('given_all_facts'))} |")
        for name, unread in declared_here.get("not_read", {}).items():
            out.append(f"| {name} | not read: no {' or '.join(unread)} read here | – | – |")
    if found.get("search"):
        out += ["", "**Every configuration tried on validation** (✓: the best of its arm; minutes of training, the "
                "critic's shared by the SWEET-RL arms that use it)", "",
                "| arm | configuration | lr | NLL weight | candidates | turns | success (95% CI) "
                "| − zero-shot, paired (95% CI), p | policy minutes | critic minutes | |",
                "|---|---|---|---|---|---|---|---|---|---|---|"]
        for row in found["search"]:
            name = row["label"] + (f" (best of {row['best_of']})" if row.get("best_of") else "")
            minutes = f"{_number(row['policy_minutes'], '.0f')} | {_number(row['critic_minutes'], '.0f')}"
            best = "✓" if row["best"] else ""
            out.append(f"| {row['arm']} | {name} | {_number(row['lr'])} | {_number(row['nll_weight'])} |"
                       f" {_number(row['candidates'])} | {row.get('turns') or '–'} | {_pct(row['success'])} |"
                       f" {_diff(row['versus_zero_shot'])} |"
                       f" {minutes} | {best} |")
    if found.get("pairs"):
        out += ["", "**The pairs SWEET-RL trained on, against ground truth** (where it orders the two candidates)", "",
                "| arm | labels | pairs | ordered by ground truth | chosen is the better (95% CI) "
                "| questions: new fact chosen / rejected | answers: better chosen / rejected |",
                "|---|---|---|---|---|---|---|"]
        for row in found["pairs"]:
            agreement = _pct(row["agreement"]) if row["agreement"] else "–"
            labels = ", ".join(row["labels"])
            out.append(f"| {row['arm']} | {labels} | {row['pairs']} | {row['ordered']} | {agreement} |"
                       f" {row['questions'][0]} / {row['questions'][1]} | {row['answers'][0]} / {row['answers'][1]} |")
    if found.get("online"):
        out.append(study_online.markdown(found["online"]))
    return "\n".join(out).strip() + "\n"
