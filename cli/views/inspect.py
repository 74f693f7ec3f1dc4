"""Rich renderers of one trajectory, turn by turn (`colbench inspect`), and its JSON."""
from __future__ import annotations

import re
from typing import Any

from rich.console import Group
from rich.markup import escape
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from colbench.cli.views.cells import STATUS_STYLE, reward_text
from colbench.cli.views.trajectories import trajectory_summary
from colbench.families import family as family_named
from colbench.protocol import ANSWER_MARKER

_FENCED = re.compile(r"```([a-zA-Z0-9_+-]*)[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)


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
    reward = reward_text(trajectory.reward)
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
            leak = getattr(turn, "leak", None)
            if leak:  # the simulator guard's verdict: what the human handed over, and what the agent was shown
                title += f" · [bold red]leak: {escape(leak.get('kind', '?'))} ({escape(leak.get('action', '?'))})[/]"
                subtitle = f"[red]evidence: {escape(' '.join(str(leak.get('span', '')).split())[:100])}[/]"
            items.append(Panel(Text(turn.content), title=title, subtitle=subtitle, title_align="left",
                               subtitle_align="right", border_style="red" if leak else "green"))

    if trajectory.answer is not None:
        language = family_named(task.family).answer_language
        verdict = "" if trajectory.success is None else (" · success" if trajectory.success else " · not solved")
        graded = (
            f"reward {reward_text(trajectory.reward)} ({trajectory.reward_metric}){verdict}"
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
            "leak": getattr(t, "leak", None),
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
