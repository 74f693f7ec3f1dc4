"""`colbench eval`: policies side by side on a split."""
from __future__ import annotations

import typer
from rich.table import Table

from colbench.cli.common import console, print_json, state


def evaluate(
    tasks: str = typer.Option("backend:test", "--tasks", help="FAMILY:SPLIT to evaluate on."),
    policy: list[str] = typer.Option(None, "--policy", help="Only these policies (repeat the flag). Default: every policy with graded trajectories."),
    simulator: str = typer.Option(None, "--simulator", help="Only trajectories with this simulator."),
    k: int = typer.Option(None, "--k", help="Report best-of-k up to this k (default: as many samples as stored)."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """% tests passed and success rate with 95% bootstrap intervals, and best-of-k, per policy."""
    from colbench.eval import as_dict, evaluate as run_eval
    from colbench.runner import parse_task_selector

    family, split = parse_task_selector(tasks)
    results = run_eval(state.db(), family, split, policies=policy or None, simulator=simulator, max_k=k)
    if as_json:
        print_json([as_dict(r) for r in results])
        return
    if not results:
        console.print(f"no graded {family} trajectories on the {split} split")
        raise typer.Exit(1)
    table = Table(title=f"{family}:{split}", title_justify="left")
    for name in ("policy", "simulator", "tasks", "trajectories", "% tests passed (95% CI)", "success (95% CI)", "best-of-k success"):
        table.add_column(name, justify="left" if name in ("policy", "simulator") else "right")
    for r in results:
        tests, success = r.tests_passed, r.success
        best = "  ".join(f"@{k} {v:.1%}" for k, v in r.best_of_k.items()) if len(r.best_of_k) > 1 else ""
        table.add_row(
            r.policy, r.simulator, str(r.n_tasks), str(r.n_trajectories),
            f"{tests.mean:.1%} [{tests.low:.1%}, {tests.high:.1%}]",
            f"{success.mean:.1%} [{success.low:.1%}, {success.high:.1%}]",
            best,
        )
    console.print(table)


def register(app: typer.Typer) -> None:
    app.command("eval")(evaluate)
