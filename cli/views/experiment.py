"""Rich and markdown renderers of the backend study's results (`colbench experiment backend`)."""
from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from colbench.recipe import deviations
from colbench.training.critic_eval import describe


def _tests(arm: dict) -> dict:
    """Per test split, the arm's evaluation (results written before several test sets: one)."""
    return arm["tests"] if "tests" in arm else {"test": arm.get("test")}


def _paper(arm: dict) -> str:
    tests, success = arm["paper_8b"]
    if success is None:
        return "–"
    return ("–" if tests is None else f"{tests:.1f}") + f" / {success:.1f}"


def _cells(arm: dict, split: str) -> tuple[str, str, str]:
    test = _tests(arm).get(split)
    if test is None:
        return "–", "–", "0"
    r, s = test["reward"], test["success"]
    return (f"{r['mean']:.1%} [{r['low']:.1%}, {r['high']:.1%}]", f"{s['mean']:.1%} [{s['low']:.1%}, {s['high']:.1%}]",
            str(test["n_trajectories"]))


VERSUS = "success − zero-shot, paired (95% CI), p"


def _versus(arm: dict, split: str) -> str:
    """The arm's paired success difference from the zero-shot policy on the same tasks, and its p-value."""
    found = (arm.get("vs_zero_shot") or {}).get(split)
    if found is None:
        return "–"
    d = found["difference"]
    return f"{d['mean']:+.1%} [{d['low']:+.1%}, {d['high']:+.1%}], p {found['p_value']:.2g}"


def _trained_on(arm: dict) -> str:
    training = arm["training"]
    if "skipped" in training:  # the reason's last clause; study_notes() and results.json have it whole
        return "not trained: " + training["skipped"].rsplit(": ", 1)[-1]
    m = training.get("metrics", {})
    if arm["arm"] == "zero-shot":
        return "the base model"
    if arm["arm"] == "best-of-n":
        return f"the base model, best of {training['n']} samples per turn by critic {training['critic']}"
    if arm["arm"] in ("rft", "sft"):
        return f"{m.get('trajectories')} successful trajectories, {m.get('steps')} steps ({training['checkpoint']})"
    what = (
        f"{m.get('pairs')} pairs, {m.get('steps')} steps, train reward accuracy"
        f" {m.get('train_reward_accuracy', float('nan')):.0%}"
    )
    return f"{what} ({training['checkpoint']})"


def _recipe(cfg: dict) -> str:
    """The grading, pair rule and rft threshold, flagged when they leave the paper's backend recipe."""
    grading = cfg.get("grading", "strict")  # results written before the grading was recorded were strict
    text = "grading: official" if grading == "official" else f"grading: {grading} (not the official grader's semantics)"
    policy = cfg.get("policy") or cfg  # results written before the trainers' configs were embedded kept them flat
    pairs = (cfg.get("critic") or cfg).get("pairs") or "correct"
    text += (
        "; pairs: fully correct vs lower (the paper's)"
        if pairs == "correct"
        else "; pairs: rewards ≥ 0.1 apart (not the paper's backend rule)"
    )
    threshold = policy.get("rft_threshold")
    return text + (
        "; rft: fully correct trajectories"
        if threshold is None
        else f"; rft: each task's best trajectory with ≥ {threshold:.0%} tests passed (not the paper's)"
    )


def _test_splits(payload: dict) -> list[str]:
    return list(_tests(payload["arms"][0])) if payload["arms"] else ["test"]


def study_tables(payload: dict) -> list[Table]:
    """The study's paper-style tables, one per test set (`colbench experiment backend`)."""
    cfg = payload["config"]
    tables = []
    for split in _test_splits(payload):
        title = (
            f"backend:{split}, {cfg['model']}, first {cfg['test_tasks']} tasks × {cfg['test_samples']}; {_recipe(cfg)}"
        )
        table = Table(title=escape(title), title_justify="left")
        for name in (
            "method", "% tests passed (95% CI)", "success (95% CI)", VERSUS, "trajectories", "paper, 8B", "trained on"
        ):
            table.add_column(name, justify="right" if name in ("trajectories", "paper, 8B") else "left",
                             overflow="fold")
        for arm in payload["arms"]:
            tests, success, n = _cells(arm, split)
            table.add_row(escape(arm["title"]), tests, success, _versus(arm, split), n, _paper(arm),
                          escape(_trained_on(arm)))
        tables.append(table)
    return tables


def study_notes(payload: dict) -> list[str]:
    train = payload["train"]
    lines = []
    if train.get("trajectories"):
        lines.append(
            f"zero-shot on train: {train['trajectories']} trajectories over {train['tasks']} tasks, "
            f"{train['tests_passed']:.1%} tests passed, success {train['success']:.1%}, "
            f"{train['tasks_with_a_success']:.0%} of tasks with at least one success"
        )
    for name, critic in payload["critics"].items():
        if "skipped" in critic:
            lines.append(f"critic {name}: skipped: {critic['skipped']}")
            continue
        m = critic["metrics"]
        accuracy = m.get("heldout_accuracy")
        shown = "n/a" if accuracy is None else f"{accuracy:.0%} of {m.get('heldout_pairs')}"
        lines.append(
            f"critic {name} ({critic['checkpoint']}): {m.get('train_pairs')} training pairs, {m.get('steps')} steps,"
            f" held-out pair accuracy {shown}"
        )
        judged = critic.get("eval")
        if judged:
            lines.append(f"critic {name} judged on {judged['trajectories']} dialogues of {judged['tasks']} by a"
                         f" scripted agent: {describe(judged)}")
    if any(any((arm.get("vs_zero_shot") or {}).values()) for arm in payload["arms"]):
        lines.append(
            f"{VERSUS}: the mean over the test tasks of the arm's success minus the zero-shot policy's on the same "
            "task, with a paired bootstrap interval and a sign-flip p-value (`colbench compare`)"
        )
    for arm in payload["arms"]:
        if "skipped" in arm["training"]:
            lines.append(f"{arm['title']}: not trained: {arm['training']['skipped']}")
    lines.append(
        f"this run took {payload['elapsed_s'] / 60:.1f} min (stages already in the store are skipped, not timed)"
    )
    lines.append(
        "paper, 8B: Llama-3.1-8B-Instruct's % tests / success in the SWEET-RL paper, for scale; not comparable to a"
        " small model."
    )
    return lines


def study_markdown(payload: dict) -> str:
    cfg = payload["config"]
    out = [
        f"# Backend study: {cfg['model']}",
        "",
        (
            f"Train: first {cfg['train_tasks']} tasks × k={cfg['samples_per_task']}; test: first"
            f" {cfg['test_tasks']} tasks × {cfg['test_samples']} of each test set; temperature {cfg['temperature']},"
            f" {cfg['max_new_tokens']} tokens per turn, simulator {cfg['simulator']}; {_recipe(cfg)}."
        ),
    ]
    for split in _test_splits(payload):
        out += [
            "",
            f"**backend:{split}**",
            "",
            (
                f"| method | % tests passed (95% CI) | success (95% CI) | {VERSUS} | trajectories | paper, 8B |"
                " trained on |"
            ),
            "|---|---|---|---|---|---|---|",
        ]
        for arm in payload["arms"]:
            tests, success, n = _cells(arm, split)
            out.append(
                f"| {arm['title']} | {tests} | {success} | {_versus(arm, split)} | {n} | {_paper(arm)} |"
                f" {_trained_on(arm)} |"
            )
    out += [""] + [f"- {line}" for line in study_notes(payload)]
    out += ["", "**Deviations from the official run's recipe**", ""] + [f"- {line}" for line in deviations(cfg)]
    return "\n".join(out)
