"""Rich renderers, so that command modules stay thin."""
from __future__ import annotations

import re
from typing import Any

from rich.console import Group
from rich.markup import escape
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from colbench.families import family as family_named
from colbench.protocol import ANSWER_MARKER, NO_RESPONSE
from colbench.recipe import deviations
from colbench.runs import labelled

_FENCED = re.compile(r"```([a-zA-Z0-9_+-]*)[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)


def _when(value) -> str:
    return value.strftime("%Y-%m-%d %H:%M") if value else ""


def _reward(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"


def _short(text: str, width: int = 60) -> str:
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


def task_summary(task) -> dict[str, Any]:
    return {
        "id": task.id,
        "family": task.family,
        "split": task.split,
        "source": task.source,
        "tests": len(task.test_cases or {}),
        "description": task.problem_description,
        "content_hash": task.content_hash,
    }


def tasks_table(tasks, total: int, width: int = 200) -> Table:
    table = Table(title=f"tasks ({len(tasks)} of {total})", title_justify="left")
    for name in ("id", "family", "split", "source", "tests", "description"):
        table.add_column(name, justify="right" if name in ("id", "tests") else "left", no_wrap=name != "description")
    room = max(40, width - 16 - max((len(t.source) + len(t.split) + len(t.family) for t in tasks), default=0))
    for task in tasks:  # the description gets the width the terminal (or a file's 200 columns) has left
        table.add_row(str(task.id), task.family, task.split, Text(task.source), str(len(task.test_cases or {})),
                      Text(_short(task.problem_description, room)))
    return table


def trajectory_summary(trajectory, task, agent_turns: int) -> dict[str, Any]:
    return {
        "id": trajectory.id,
        "task_id": task.id,
        "family": task.family,
        "split": task.split,
        "run": f"rollout:{trajectory.rollout_id}" if trajectory.rollout_id else None,
        "policy": trajectory.policy,
        "simulator": trajectory.simulator,
        "setting": trajectory.setting,
        "sample_index": trajectory.sample_index,
        "seed": trajectory.seed,
        "status": trajectory.status,
        "agent_turns": agent_turns,
        "reward": trajectory.reward,
        "success": trajectory.success,
        "failure": trajectory.failure,
        "finished_at": trajectory.finished_at,
    }


STATUS_STYLE = {"done": "green", "failed": "red", "running": "yellow", "pending": "dim", "unfinished": "dim"}


def trajectories_table(rows) -> Table:
    table = Table(title=f"trajectories ({len(rows)})", title_justify="left")
    for name in (
        "id", "task", "run", "policy [setting]", "simulator", "#", "status", "turns", "reward", "success", "finished"
    ):
        table.add_column(name, justify="right" if name in ("id", "task", "#", "turns", "reward") else "left")
    for trajectory, task, agent_turns in rows:
        status = Text(trajectory.status, style=STATUS_STYLE.get(trajectory.status, ""))
        success = "" if trajectory.success is None else ("✓" if trajectory.success else "✗")
        table.add_row(
            str(trajectory.id),
            f"{task.id} {task.family[0]}/{task.split}",
            f"rollout:{trajectory.rollout_id}" if trajectory.rollout_id else "",
            Text(labelled(trajectory.policy, trajectory.setting)),
            Text(trajectory.simulator),
            str(trajectory.sample_index),
            status,
            str(agent_turns),
            _reward(trajectory.reward),
            success,
            _when(trajectory.finished_at),
        )
    return table


# ---------------------------------------------------------------- inspect


def _score_style(score: float) -> str:
    if score > 0.05:
        return "bold green"
    if score < -0.05:
        return "bold red"
    return "yellow"


def _message_body(text: str, role: str):
    """Prose as text, code (fenced, or after the answer marker) highlighted."""
    parts: list[Any] = []
    if role == "assistant" and ANSWER_MARKER in text and "```" not in text:
        before, after = text.split(ANSWER_MARKER, 1)
        if before.strip():
            parts.append(Text(before.strip()))
        parts.append(Text(ANSWER_MARKER, style="bold magenta"))
        parts.append(Syntax(after.strip("\n"), "python", theme="ansi_dark", word_wrap=True))
        return Group(*parts)
    position = 0
    for match in _FENCED.finditer(text):
        if text[position : match.start()].strip():
            parts.append(Text(text[position : match.start()].strip()))
        language = match.group(1) or ("html" if "<html" in match.group(2).lower() else "python")
        parts.append(Syntax(match.group(2).rstrip("\n"), language, theme="ansi_dark", word_wrap=True))
        position = match.end()
    if text[position:].strip() or not parts:
        parts.append(Text(text[position:].strip()))
    return Group(*parts)


def trajectory_view(trajectory, task, turns, tests, scores: dict[int, list[tuple[int, float]]], *, reveal: bool,
                    screenshot_paths: dict[str, str] | None = None):
    screenshot_paths = screenshot_paths or {}
    outcome = Text(trajectory.status, style=STATUS_STYLE.get(trajectory.status, ""))
    if trajectory.success is not None:
        outcome.append("  success" if trajectory.success else "  not solved",
                       style="green" if trajectory.success else "red")
    header = Table.grid(padding=(0, 2))
    header.add_column(style="bold")
    header.add_column()
    header.add_row("trajectory", str(trajectory.id))
    header.add_row("task", f"{task.id} ({task.family}/{task.split}, {task.source})")
    if trajectory.rollout_id:
        header.add_row("run", f"rollout:{trajectory.rollout_id}")
    header.add_row("policy", Text(trajectory.policy))
    if trajectory.setting:
        header.add_row("setting", Text(trajectory.setting))
    header.add_row("simulator", Text(trajectory.simulator))
    header.add_row("sample",
                   f"{trajectory.sample_index}" + (f"  seed {trajectory.seed}" if trajectory.seed is not None else ""))
    header.add_row("outcome", outcome)
    reward = _reward(trajectory.reward)
    header.add_row(
        "reward",
        f"{reward} ({trajectory.reward_metric})" if reward and trajectory.reward_metric else reward or "not graded"
    )
    if trajectory.screenshot:
        header.add_row("final page", screenshot_paths.get(trajectory.screenshot, trajectory.screenshot))
    if trajectory.failure:
        header.add_row("failure", Text(trajectory.failure, style="red"))
    items: list[Any] = [Panel(header, title="colbench inspect", border_style="blue")]

    agent_turn = 0
    answering = (
        max((t.index for t in turns if t.role == "assistant"), default=None) if trajectory.answer is not None else None
    )
    for turn in turns:
        if turn.role == "assistant":
            agent_turn += 1
            title = f"[bold cyan]agent[/] · turn {agent_turn}" + (
                " · [bold magenta]graded answer[/]" if turn.index == answering else ""
            )
            details = []
            if turn.completion_tokens:
                details.append(f"{turn.completion_tokens} tokens")
            if turn.logprob_mean is not None:
                details.append(f"mean log-prob {turn.logprob_mean:.3f}")
            if turn.latency_s is not None:
                details.append(f"latency {turn.latency_s:.2f}s")
            for checkpoint_id, score in scores.get(turn.id, []):
                details.append(f"[{_score_style(score)}]critic ckpt:{checkpoint_id} {score:+.4f}[/]")
            if turn.screenshot:
                details.append(f"page {screenshot_paths.get(turn.screenshot, turn.screenshot[:12])}")
            subtitle = " · ".join(details) or None
            items.append(Panel(_message_body(turn.content, "assistant"), title=title, subtitle=subtitle,
                               title_align="left", subtitle_align="right", border_style="cyan"))
        else:
            title = "[bold green]human[/]" + (" · task description" if turn.index == 0 else "")
            clipped = turn.raw is not None and turn.raw != turn.content
            subtitle = f"cut from {len(turn.raw)} characters" if clipped else None
            if turn.error:
                subtitle = f"[red]{escape(turn.error)}[/]"
            items.append(Panel(Text(turn.content), title=title, subtitle=subtitle, title_align="left",
                               subtitle_align="right", border_style="green"))

    if trajectory.answer is not None:
        language = family_named(task.family).answer_language
        verdict = "" if trajectory.success is None else (" · success" if trajectory.success else " · not solved")
        graded = (
            f"reward {_reward(trajectory.reward)} ({trajectory.reward_metric}){verdict}"
            if trajectory.reward is not None
            else "not graded yet"
        )
        items.append(Panel(Syntax(trajectory.answer, language, theme="ansi_dark", word_wrap=True),
                           title="[bold magenta]graded answer[/]",
                           subtitle=escape(graded), title_align="left", subtitle_align="right", border_style="magenta"))
    shared_error = _shared_error(tests)
    if shared_error is not None:
        items.append(Text(f"all {len(tests)} tests failed the same way: {shared_error}", style="red"))
    elif tests:
        table = Table(title="test results", title_justify="left")
        for name in ("test", "call", "expected", "actual", "result", "time"):
            table.add_column(name, overflow="fold")
        for result in tests:
            verdict = Text("pass", style="green") if result.passed else Text(result.error or "fail", style="red")
            table.add_row(
                result.name,
                result.call,
                result.expected or "",
                result.actual or "",
                verdict,
                "" if result.duration_s is None else f"{result.duration_s * 1000:.0f}ms",
            )
        items.append(table)
    if reveal:
        language = family_named(task.family).answer_language
        items.append(Panel(Syntax(task.ground_truth, language, theme="ansi_dark", word_wrap=True),
                           title="hidden reference", border_style="magenta"))
    else:
        items.append(Text("(hidden reference not shown; pass --reveal to see it)", style="dim"))
    return Group(*items)


def _shared_error(tests) -> str | None:
    """The one error every test failed with (an answer that does not compile, a missing function), if so."""
    errors = {result.error for result in tests}
    if len(tests) > 1 and len(errors) == 1 and None not in errors and not any(result.passed for result in tests):
        return errors.pop()
    return None


def trajectory_json(trajectory, task, turns, tests, scores, *, reveal: bool) -> dict[str, Any]:
    payload = trajectory_summary(trajectory, task, sum(t.role == "assistant" for t in turns))
    payload["answer"] = trajectory.answer
    payload["reward_metric"] = trajectory.reward_metric
    payload["screenshot"] = trajectory.screenshot
    payload["problem_description"] = task.problem_description
    payload["turns"] = [
        {
            "index": t.index,
            "role": t.role,
            "content": t.content,
            "raw": t.raw,
            "prompt": t.prompt,
            "completion_tokens": t.completion_tokens,
            "logprob_sum": t.logprob_sum,
            "logprob_mean": t.logprob_mean,
            "latency_s": t.latency_s,
            "error": t.error,
            "screenshot": t.screenshot,
            "critic_scores": {f"ckpt:{c}": s for c, s in scores.get(t.id, [])},
        }
        for t in turns
    ]
    payload["tests"] = [
        {"name": r.name, "call": r.call, "expected": r.expected, "actual": r.actual, "passed": r.passed,
         "error": r.error, "duration_s": r.duration_s}
        for r in tests
    ]
    if reveal:
        payload["ground_truth"] = task.ground_truth
    return payload


# ---------------------------------------------------------------- tasks validate / generate


def validation_failures(report) -> list[Text]:
    """One line per failed rule of a task: where, function, rule, why."""
    lines = []
    for check in report.checks:
        for finding in check.findings:
            style = "red" if finding.level == "failed" else "yellow"
            line = Text()
            line.append(check.where, style="bold")
            if check.function:
                line.append(f" {check.function}", style="cyan")
            line.append(f"  {finding.rule}", style=style)
            line.append(" (warning)" if finding.level != "failed" else "", style=style)
            line.append(f": {finding.message}")
            lines.append(line)
    return lines


def validation_table(report) -> Table:
    table = Table(title=f"validation of {len(report.checks)} tasks", title_justify="left")
    table.add_column("rule")
    for name in ("passed", "failed", "warnings", "skipped"):
        table.add_column(name, justify="right")
    for rule, counts in report.counts().items():
        failed = counts["failed"]
        table.add_row(
            rule,
            str(counts["passed"]),
            Text(str(failed), style="bold red" if failed else ""),
            str(counts["warning"]),
            str(counts["skipped"]),
        )
    return table


def validation_footer(report) -> str:
    parts = [f"{len(report.checks) - len(report.failed)} of {len(report.checks)} tasks pass"]
    if report.naive_checked:
        parts.append(
            f"naive solution passes every test on {report.naive_passing} of {report.naive_checked} "
            f"({100 * report.naive_pass_share:.1f}%)"
        )
    if report.sandbox:
        parts.append(f"sandbox: {report.sandbox}")
    return "; ".join(parts)


def generation_table(summary) -> Table:
    table = Table(title=f"rejected candidates ({summary.rejected} of {summary.candidates})", title_justify="left")
    table.add_column("reason")
    table.add_column("count", justify="right")
    table.add_column("example", no_wrap=False)
    for reason, count in sorted(summary.reasons.items(), key=lambda item: -item[1]):
        table.add_row(reason, str(count), escape(_short(summary.examples.get(reason, ""), 90)))
    return table


# ---------------------------------------------------------------- the study


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
            def fmt(value, spec):
                return "n/a" if value is None else format(value, spec)
            lines.append(
                f"critic {name} judged on {judged['trajectories']} dialogues of {judged['tasks']} by a scripted agent:"
                f" pair accuracy {fmt(judged['pair_accuracy'], '.0%')} of {judged['pairs']}; turn credit (did the turn"
                f" obtain a fact?) Spearman {fmt(judged['turn_spearman'], '+.2f')}, within-dialogue AUC"
                f" {fmt(judged['turn_auc'], '.2f')} over {judged['labelled_turns']} turns"
            )
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


# ---------------------------------------------------------------- eval


def eval_table(results, family: str, split: str) -> Table:
    """Policies side by side (`colbench eval`): backend % tests and success with CIs, pass@k and pass^k;
    frontend similarity and win rates. A column every row agrees on (one simulator, one grading) goes
    into the title, so that the intervals keep their lines on a 100-column terminal."""
    same = {name: {getattr(r, name) for r in results} for name in ("simulator", "grading")}
    shared = [
        f"{name} {next(iter(values))}" for name, values in same.items() if len(values) == 1 and next(iter(values))
    ]
    table = Table(title=" · ".join([f"{family}:{split}"] + shared), title_justify="left")
    columns = ["policy"] + [name for name in ("simulator", "grading") if len(same[name]) > 1] + ["tasks", "traj."]
    columns += ["sim. fail."] if any(r.simulator_failures for r in results) else []  # a column of zeros says nothing
    owner = family_named(family)
    headline = f"{owner.headline_label} (95% CI)"
    if owner.graded_by_tests:
        columns += ["% tests passed (95% CI)", headline, "pass@k", "pass^k"]
    else:
        columns += [headline, "metric", "win rate vs"]
    for name in columns:
        interval = "CI" in name  # an interval is never broken across lines; names and lists wrap
        table.add_column(
            name,
            justify="left" if name in ("policy", "simulator", "grading", "metric", "win rate vs") else "right",
            no_wrap=interval,
            overflow="fold",
            min_width=None if interval else min(len(name), 8)
        )
    for r in results:
        cells = {"policy": Text(r.label), "simulator": Text(r.simulator), "grading": r.grading or "–",
                 "tasks": str(r.n_tasks),
                 "traj.": str(r.n_trajectories), "sim. fail.": str(r.simulator_failures)}
        if owner.graded_by_tests:
            cells |= {"% tests passed (95% CI)": f"{r.reward.mean:.1%} [{r.reward.low:.1%}, {r.reward.high:.1%}]",
                      headline: f"{r.success.mean:.1%} [{r.success.low:.1%}, {r.success.high:.1%}]",
                      "pass@k": "  ".join(f"@{k} {v:.1%}" for k, v in r.pass_at_k.items() if k > 1),
                      "pass^k": "  ".join(f"^{k} {v:.1%}" for k, v in r.pass_hat_k.items() if k > 1)}
        else:
            cells |= {headline: f"{r.reward.mean:.3f} [{r.reward.low:.3f}, {r.reward.high:.3f}]", "metric": r.metric,
                      "win rate vs": Text("  ".join(f"{other} {rate:.1%}" for other, rate in r.win_rate.items()))}
        table.add_row(*(cells[name] for name in columns))
    return table


def facts_table(rows, tasks: str) -> Table:
    """`colbench eval --facts`: per policy, what its lite dialogues did with the hidden facts."""
    table = Table(title=f"{tasks}: the hidden facts", title_justify="left")
    for name in ("policy", "traj.", "facts obtained", "every fact", "success | every fact", "success | a fact missing",
                 "agent turns", "questions: new / repeat / nothing"):
        table.add_column(name, justify="left" if name == "policy" else "right", overflow="fold")

    def share(value):
        return "–" if value is None else f"{value:.1%}"

    for row in rows:
        asked = (
            " / ".join(f"{share:.0%}" for share in row.questions.values()) if row.questions else "–"
        )  # new / repeat / nothing
        table.add_row(Text(labelled(row.policy, row.setting)), str(row.trajectories), share(row.facts_obtained),
                      share(row.every_fact),
                      share(row.success_with_every_fact), share(row.success_without), f"{row.agent_turns:.2f}", asked)
    return table


FACTS_NOTES = (
    (
        "facts obtained: of the facts the tasks' answers need, the share the human stated; every fact: dialogues that"
        " obtained all of them"
    ),
    (
        "success | every fact: how well the policy writes the code once it knows everything; questions: the share that"
        ' obtained a new fact, re-asked one already stated, or obtained nothing ("I don\'t know.")'
    ),
)


def pairs_table(result) -> Table:
    """`colbench critic pairs`: what a SWEET-RL run's critic preferred, by the kinds of the two candidates."""
    table = Table(title=f"train:{result.run_id}: {result.pairs} pairs", title_justify="left")
    table.add_column("chosen > rejected")
    table.add_column("pairs", justify="right")
    table.add_column("share", justify="right")
    for kinds, count in result.kinds.items():
        table.add_row(kinds, str(count), f"{count / result.pairs:.1%}" if result.pairs else "–")
    return table


def pairs_notes(result) -> list[str]:
    """The preferences that decide what the policy learns to do, in both directions."""
    lines = []
    for better, worse, meaning in (
        ("new fact", "nothing", "a question that obtains a fact over one that obtains nothing"),
        ("new fact", "repeat", "a new fact over re-asking a known one"),
        ("answer", "repeat", "answering over re-asking a known fact"),
        ("answer", "nothing", "answering over a question that obtains nothing")
    ):
        right, wrong = result.preferred(better, worse)
        if right + wrong:
            lines.append(f"{meaning}: {right} of {right + wrong} pairs")
    graded = result.answers_graded
    if graded:
        decided = graded.get("chosen passed more", 0) + graded.get("rejected passed more", 0)
        lines.append(
            f"two answers, graded: the chosen one passed more tests in {graded.get('chosen passed more', 0)} of the"
            f" {decided} pairs where they differ ({graded.get('same', 0)} pass the same)"
        )
    return lines


def eval_notes(results, family: str) -> list[str]:
    """What the eval table's columns leave unsaid."""
    lines = []
    if any(r.simulator_failures for r in results):
        lines.append(
            f"sim. failures: trajectories where the simulated human failed to reply on some turn; as officially, "
            f"the dialogue went on with the reply {NO_RESPONSE!r} and they are counted like the others"
        )
    if family_named(family).renders_pages and not any(r.metric.startswith("clip") for r in results):
        lines.append("similarity is the weight-free metric named above, not CLIP (pass --clip to rollout for CLIP)")
    return lines
