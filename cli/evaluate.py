"""`colbench eval`: policies side by side on a split."""
from __future__ import annotations

import typer
from rich.table import Table

from colbench.cli.common import console, print_json, state
from colbench.protocol import NO_RESPONSE


def evaluate(
    tasks: str = typer.Option("backend:test", "--tasks", help="FAMILY:SPLIT to evaluate on."),
    policy: list[str] = typer.Option(None, "--policy", help="Only these policies (repeat the flag). Default: every policy with graded trajectories."),
    simulator: str = typer.Option(None, "--simulator", help="Only trajectories with this simulator."),
    setting: str = typer.Option(None, "--setting", help="Only rollouts made with this setting (as shown in brackets after the policy; '' for the protocol's defaults)."),
    k: int = typer.Option(None, "--k", help="Report best-of-k up to this k (default: as many samples as stored)."),
    grading: str = typer.Option(None, "--grading", help="Backend: only grades made under this grading (official or strict). Default: every grading, each in its own rows."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Per policy, side by side: backend % tests passed and success (95% bootstrap CIs, best-of-k);
    frontend mean similarity (95% CI) and win rate against the other policies. Every graded trajectory
    counts; "sim. failures" is how many had a turn where the simulated human failed to reply. Backend rows
    name the grading their rewards were made under (official: the official ColBench grader's semantics)."""
    from colbench.eval import as_dict, evaluate as run_eval
    from colbench.wiring import parse_task_selector

    family, split = parse_task_selector(tasks)
    results = run_eval(state.db(), family, split, policies=policy or None, simulator=simulator, setting=setting, max_k=k, grading=grading)
    if as_json:
        print_json([as_dict(r) for r in results])
        return
    if not results:
        console.print(f"no graded {family} trajectories on the {split} split")
        raise typer.Exit(1)
    table = Table(title=f"{family}:{split}", title_justify="left")
    if family == "backend":
        headers = ("policy", "simulator", "grading", "tasks", "trajectories", "sim. failures", "% tests passed (95% CI)", "success (95% CI)", "best-of-k success")
    else:
        headers = ("policy", "simulator", "tasks", "trajectories", "sim. failures", "similarity (95% CI)", "metric", "win rate vs")
    for name in headers:
        table.add_column(name, justify="left" if name in ("policy", "simulator", "grading", "metric", "win rate vs") else "right")
    for r in results:
        counts = (r.label, r.simulator) + ((r.grading or "–",) if family == "backend" else ()) + (str(r.n_tasks), str(r.n_trajectories), str(r.simulator_failures))
        reward = f"{r.reward.mean:.1%} [{r.reward.low:.1%}, {r.reward.high:.1%}]"
        if family == "backend":
            success = f"{r.success.mean:.1%} [{r.success.low:.1%}, {r.success.high:.1%}]"
            best = "  ".join(f"@{k} {v:.1%}" for k, v in r.best_of_k.items()) if len(r.best_of_k) > 1 else ""
            table.add_row(*counts, reward, success, best)
        else:
            wins = "  ".join(f"{other} {rate:.1%}" for other, rate in r.win_rate.items())
            table.add_row(*counts, f"{r.reward.mean:.3f} [{r.reward.low:.3f}, {r.reward.high:.3f}]", r.metric, wins)
    console.print(table)
    if any(r.simulator_failures for r in results):
        console.print(f"sim. failures: trajectories where the simulated human failed to reply on some turn; as officially, "
                      f"the dialogue went on with the reply {NO_RESPONSE!r} and they are counted like the others")
    if family == "frontend" and not any(r.metric.startswith("clip") for r in results):
        console.print("similarity is the weight-free metric named above, not CLIP (pass --clip to rollout for CLIP)")


def register(app: typer.Typer) -> None:
    app.command("eval")(evaluate)
