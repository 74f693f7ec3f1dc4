"""`colbench compare A B`: two policies or rollout runs on the same tasks, paired."""
from __future__ import annotations

import typer
from rich.table import Table
from rich.text import Text

from colbench.cli.common import console, print_json, state


def compare(
    a: str = typer.Argument(
        ..., metavar="A", help="A rollout run (rollout:<id> or its name) or a policy (e.g. ckpt:3)."
    ),
    b: str = typer.Argument(..., metavar="B", help="The same, for the other side: the difference reported is B − A."),
    tasks: str = typer.Option(
        "backend:test", "--tasks", help="For policies: the task set, FAMILY:SPLIT (a run knows its own)."
    ),
    setting: str = typer.Option(
        "",
        "--setting",
        help=(
            "For policies: the rollout setting (as `colbench ls` shows it in brackets; '' for the protocol's defaults)."
        )
    ),
    metric: str = typer.Option(
        None,
        "--metric",
        help="success (backend default) or reward (share of tests passed; frontend: the page similarity, its default)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Is B better than A on the tasks both were graded on? The mean difference with a paired bootstrap
    95% interval, a paired permutation p-value, the tasks that flipped, and whether the difference exceeds
    the run-to-run noise measured from repeated samples (colbench/compare.py)."""
    from colbench.compare import METRICS, compare as run_compare, side_of

    if metric is not None and metric not in METRICS:
        raise typer.BadParameter(f"takes {' or '.join(METRICS)}", param_hint="--metric")
    db = state.db()
    result = run_compare(side_of(db, a, tasks=tasks, setting=setting), side_of(db, b, tasks=tasks, setting=setting),
                         metric)
    if as_json:
        print_json(result.as_dict())
        return
    console.print(_table(result))
    for line in _verdict(result):
        console.print(line, highlight=False)


def _share(value: float, metric: str) -> str:
    return f"{value:.1%}" if metric == "success" else f"{value:.3f}"


def _table(r) -> Table:
    table = Table(title=f"{r.a.tasks}: {r.n_tasks} tasks graded on both sides ({r.metric})", title_justify="left")
    for name in ("", "run or policy", r.metric, "tasks better", "samples per task"):
        table.add_column(name)
    for key, side, mean, better in (("A", r.a, r.mean_a, r.worse), ("B", r.b, r.mean_b, r.better)):
        counts = sorted({len(side.samples[t]) for t in side.samples})
        table.add_row(key, Text(side.label), _share(mean, r.metric), str(better),
                      "–".join(map(str, (counts[0], counts[-1]))) if len(counts) > 1 else str(counts[0]))
    return table


def _verdict(r) -> list[str]:
    d = r.difference
    unit = (lambda v: f"{v:+.1%}") if r.metric == "success" else (lambda v: f"{v:+.3f}")
    test = "exact" if r.exact else "20,000 random flips"
    lines = [
        f"B − A: {unit(d.mean)} [95% CI {unit(d.low)}, {unit(d.high)}], p = {r.p_value:.3g} (paired sign-flip test,"
        f" {test}); {r.same} tasks unchanged"
    ]
    if r.metric == "success":
        lines.append(
            f"flips: {len(r.gained)} tasks B always solves and A never does"
            f" {r.gained[:10]}{' …' if len(r.gained) > 10 else ''}; {len(r.lost)} the other way"
            f" {r.lost[:10]}{' …' if len(r.lost) > 10 else ''}"
        )
    if r.noise_sd is None:
        lines.append(
            "run-to-run noise: unknown (it needs at least 2 samples of every task on both sides: rollout -k 2)"
        )
    else:
        verdict = "exceeds" if r.exceeds_noise else "is within"
        lines.append(
            f"run-to-run noise: ±{unit(1.96 * r.noise_sd)[1:]} (95%, from the repeated samples); the difference"
            f" {verdict} it"
        )
    return lines


def register(app: typer.Typer) -> None:
    app.command("compare")(compare)
