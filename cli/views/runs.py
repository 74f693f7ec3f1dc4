"""Rich renderers of runs (`colbench runs`), and the terminal sparkline of a training curve."""
from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from colbench.cli.common import duration
from colbench.cli.views.cells import STATUS_STYLE
from colbench.curves import curve_names
from colbench.runs import headline, named, progress, what
from colbench.training.critic_eval import describe

SPARKS = "▁▂▃▄▅▆▇█"


def sparkline(values: list[float], width: int = 40) -> str:
    """Values as a row of block characters, low to high; longer series are averaged into ``width`` buckets."""
    values = [v for v in values if v is not None and v == v]
    if not values:
        return ""
    if len(values) > width:
        size = len(values) / width
        values = [
            sum(chunk) / len(chunk)
            for chunk in (values[int(i * size) : max(int((i + 1) * size), int(i * size) + 1)] for i in range(width))
        ]
    low, high = min(values), max(values)
    span = high - low
    return "".join(SPARKS[int((v - low) / span * (len(SPARKS) - 1)) if span else len(SPARKS) // 2] for v in values)


def _when(value) -> str:
    return str(value)[:16] if value else ""


def _worked(run: dict) -> str | None:
    """How long a finished run worked, and how long it stood stopped between sessions if it did."""
    if run.get("minutes") is None:
        return None
    paused = run.get("paused_minutes") or 0.0
    return duration(run["minutes"] * 60) + (f" (stopped {duration(paused * 60)} between resumes)" if paused else "")


def _status(row: dict) -> Text:
    return Text(progress(row), style=STATUS_STYLE.get(row.get("status"), "") if row["kind"] != "eval" else "")


def _what(row: dict) -> str:
    simulator = "" if row["kind"] == "train" or row["simulator"] in ("builtin", None) else f" · {row['simulator']}"
    return what(row) + simulator


def runs_table(rows: list[dict]) -> Table:
    table = Table(title=f"runs ({len(rows)})", title_justify="left")
    for name in ("run", "name", "tags", "what", "tasks", "status", "result", "created"):
        table.add_column(name, overflow="fold", no_wrap=name in ("run", "status", "created"))
    for row in rows:
        table.add_row(
            row["ref"], escape(row["name"] or ""), escape(", ".join(row["tags"])), escape(_what(row)),
            row.get("tasks", ""), _status(row), escape(headline(row)), _when(row["created_at"]),
        )
    return table


def run_title(run: dict) -> str:
    return named(run["ref"], run.get("name")) + f": {_what(run)}"


def run_view(run: dict) -> Group:
    parts: list[Any] = [Text(run_title(run), style="bold")]
    facts = {"status": _status(run).plain or None, "tags": ", ".join(run["tags"]) or None, "tasks": run.get("tasks"),
             "result": headline(run) or None, "created": _when(run.get("created_at"))}
    if run["kind"] == "train":
        facts |= {"finished": _when(run.get("finished_at")), "worked": _worked(run),
                  "continued from": run.get("parent"), "error": run.get("error")}
    if run["kind"] == "rollout":
        facts |= {"trajectories": ", ".join(f"{n} {s}" for s, n in run["by_status"].items() if n),
                  "trained": ", ".join(run["trained"]) or None}
        leaks = run.get("simulator_leaks") or {}
        if leaks:
            facts["simulator leaks"] = (
                f"{sum(leaks.values())} replies in {run['dialogues_leaking']} dialogues ("
                + ", ".join(f"{n} {action}" for action, n in sorted(leaks.items()))
                + f"); colbench audit simulator {run['ref']}")
    for key, value in facts.items():
        if value:
            parts.append(Text.assemble((f"{key}: ", "dim"), str(value)))
    if run.get("data"):
        parts.append(Text("trained on:", style="bold"))
        for item in run["data"]:
            name = f" ({item['name']})" if item.get("name") else ""
            parts.append(Text(f"  {item['trajectories']} trajectories of {item['rollout']}{name}"))
    for ref, path in (run.get("checkpoint_paths") or {}).items():
        parts.append(Text.assemble((f"{ref}: ", "dim"), path))
    steps = run.get("steps") or []
    if steps:
        curves = Table(title=f"per step ({len(steps)} steps)", title_justify="left", box=None)
        for name in ("figure", "first", "last", "min", "max", "curve"):
            curves.add_column(name, justify="right" if name in ("first", "last", "min", "max") else "left")
        for name in curve_names(steps):
            values = [s[name] for s in steps if isinstance(s.get(name), (int, float))]
            if values:
                curves.add_row(name, f"{values[0]:.4g}", f"{values[-1]:.4g}", f"{min(values):.4g}",
                               f"{max(values):.4g}", sparkline(values))
        parts.append(curves)
    diagnostics = diagnostic_lines(run.get("metrics") or {}) if run["kind"] == "train" else []
    if diagnostics:
        parts.append(Text("diagnostics:", style="bold"))
        parts += [Text(f"  {line}") for line in diagnostics]
    config = run.get("config") or {}
    if config:
        settings = Table(title="settings", title_justify="left", box=None, show_header=False)
        settings.add_column(style="dim")
        settings.add_column(overflow="fold")
        for key, value in config.items():
            settings.add_row(key, escape(str(value)))
        parts.append(settings)
    return Group(*parts)


def diagnostic_lines(metrics: dict) -> list[str]:
    """What a training run's figures say about whether it learned what it should: a critic's
    held-out pair accuracy and its turn credit against the lite human's ground truth; a DPO
    policy's chosen and rejected rewards and the chosen side's NLL, first steps against last."""
    lines = []
    if metrics.get("heldout_accuracy") is not None:
        lines.append(
            f"held-out pair accuracy {metrics['heldout_accuracy']:.1%} of {metrics.get('heldout_pairs')} pairs"
        )
    judged = metrics.get("eval") or {}
    if judged:
        lines.append(f"judged on {judged.get('trajectories')} dialogues of {judged.get('tasks')}: {describe(judged)}")
    if "pairs_answer_over_reask" in metrics:
        lines.append(
            f"its pairs chose answering over re-asking a stated fact {metrics['pairs_answer_over_reask']} times, the"
            f" other way {metrics['pairs_reask_over_answer']}; a question obtaining a new fact over one obtaining"
            f" nothing {metrics['pairs_new_over_nothing']} times, the other way {metrics['pairs_nothing_over_new']}"
        )
    if metrics.get("last_chosen_reward") is not None:
        lines.append(
            f"last {metrics['last_steps']} steps: chosen reward {metrics['last_chosen_reward']:+.3f}, rejected"
            f" {metrics['last_rejected_reward']:+.3f}; chosen NLL {metrics['first_nll']:.3f} at the start,"
            f" {metrics['last_nll']:.3f} at the end"
        )
        if metrics["last_chosen_reward"] < 0:
            lines.append("the chosen turns became less likely than under the starting policy (likelihood displacement)")
    if metrics.get("stopped_early"):
        lines.append(f"stopped early: {metrics['stopped_early']}")
    return lines


def removal_text(removal) -> str:
    if removal.ref.startswith("rollout:"):
        return f"{removal.ref} ({removal.trajectories} trajectories)"
    if removal.ref.startswith("train:"):
        return f"{removal.ref}" + (f" and {', '.join(removal.checkpoints)}" if removal.checkpoints else "")
    return removal.ref
