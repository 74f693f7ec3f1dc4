"""`colbench rollout` and `colbench grade`."""
from __future__ import annotations

from contextlib import contextmanager

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from colbench.cli.common import console, err_console, print_json, progress_bar, state
from colbench.cli.options import flags_from
from colbench.grading.semantics import DEFAULT_GRADING, GRADING_HELP
from colbench.protocol import NO_RESPONSE
from colbench.rollout import RolloutConfig


@flags_from(RolloutConfig)
def rollout(config: RolloutConfig, as_json: bool = typer.Option(False, "--json", help="Print a machine-readable summary at the end.")) -> None:
    """Roll out a policy against a simulated human on a task split; grade and store everything.

    With no arguments: the embedded SmolLM2-135M-Instruct, the built-in deterministic simulator,
    the built-in backend test tasks, and the bwrap sandbox. Rerunning the same command finishes
    what is missing and duplicates nothing. Every setting is a RolloutConfig field (colbench/rollout.py).
    """
    from colbench.rollout import run

    with rollout_progress(enabled=not as_json) as update:
        result = run(state.db(), config, on_progress=update)
    stats = result.stats
    if as_json:
        print_json(stats.as_dict() | {"policy": result.policy, "simulator": result.simulator, "graded_by": result.graded_by})
        return
    rate = "n/a" if stats.success_rate is None else f"{stats.success_rate:.1%}"
    console.print(
        f"{stats.finished} trajectories finished, {stats.already_done} were already done"
        + (f" ({stats.no_replies} simulator replies failed and became {NO_RESPONSE!r})" if stats.no_replies else "") + "; "
        f"{stats.agent_turns} agent turns at {stats.turns_per_s:.2f}/s; success {rate} of {stats.graded} graded"
    )


@contextmanager
def rollout_progress(*, enabled: bool):
    """A bar of finished trajectories with turns/s and success so far; yields the rollout's on_progress."""
    if not enabled or not err_console.is_terminal:
        yield lambda stats: None
        return
    columns = [
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[turns]:.2f} turns/s"),
        TextColumn("success {task.fields[success]}"),
        TimeElapsedColumn(),
    ]
    with Progress(*columns, console=err_console) as progress:
        bar = progress.add_task("rollouts", total=None, turns=0.0, success="–")

        def update(stats):
            success = "–" if stats.success_rate is None else f"{stats.success_rate:.0%} of {stats.graded}"
            progress.update(bar, total=stats.total, completed=stats.already_done + stats.finished, turns=stats.turns_per_s, success=success)

        yield update


def grade(
    policy: str = typer.Option(None, "--policy", help="Only this policy's trajectories."),
    ungraded_only: bool = typer.Option(False, "--ungraded", help="Only trajectories with no grade yet."),
    sandbox: str = typer.Option("auto", "--sandbox", help="auto, docker, bwrap, or none (unsafe)."),
    workers: int = typer.Option(2, "--workers", min=1),
    grading: str = typer.Option(DEFAULT_GRADING, "--grading", help="Grading semantics. " + GRADING_HELP),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Re-grade stored backend answers in the sandbox (e.g. after importing official trajectories, or under another --grading)."""
    from colbench.grading.grader import Grader
    from colbench.grading.regrade import regrade

    with Grader(sandbox=sandbox, workers=workers, grading=grading) as grader, progress_bar("grading", None, enabled=not as_json) as advance:
        summary = regrade(state.db(), grader, policy=policy, ungraded_only=ungraded_only, on_progress=advance)
    if as_json:
        print_json(summary)
        return
    console.print(f"graded {summary['graded']} trajectories ({grading} grading): mean tests passed {summary['mean_reward']:.3f}, success {summary['success_rate']:.1%}")


def register(app: typer.Typer) -> None:
    app.command("rollout")(rollout)
    app.command("grade")(grade)
