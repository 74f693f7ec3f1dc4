"""Rich renderers of tasks: their list (`colbench tasks ls`), a validation's report (`colbench tasks
validate`) and what a generation rejected (`colbench tasks generate`)."""
from __future__ import annotations

from typing import Any

from rich.markup import escape
from rich.table import Table
from rich.text import Text


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
