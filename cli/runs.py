"""`colbench runs ls|show|rm`: rollouts, training runs and evaluations as named, comparable runs."""
from __future__ import annotations

from enum import Enum
from pathlib import Path

import typer

from colbench.cli.views.runs import removal_text, run_title, run_view, runs_table
from colbench.cli.common import console, err_console, fail, print_json, state

app = typer.Typer(
    help="Runs: every rollout, training run and evaluation, by reference (rollout:3, train:5, eval:2, ckpt:7) or name.",
    no_args_is_help=True
)


class RunKind(str, Enum):
    rollout = "rollout"
    train = "train"
    eval = "eval"


@app.command("ls")
def ls(
    kind: RunKind = typer.Option(None, "--kind", help="Only rollouts, training runs or evaluations."),
    tag: str = typer.Option(None, "--tag", help="Only runs with this tag."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Every run: its reference, name and tags, what it ran (policy, setting and task set; or kind and base
    model), its status and its headline figure."""
    from colbench.runs import listing
    from colbench.training.checkpoints import fail_stale_runs

    if not state.db().read_only:
        fail_stale_runs(state.db())
    rows = listing(state.db(), kind=kind and kind.value, tag=tag)
    if as_json:
        print_json(rows)
        return
    if not rows:
        console.print("no runs yet" + (f" with the tag {tag!r}" if tag else ""))
        return
    console.print(runs_table(rows))


@app.command("show")
def show(
    ref: str = typer.Argument(
        ..., metavar="RUN", help="rollout:<id>, train:<id>, eval:<id>, ckpt:<id> or a run's name."
    ),
    plot: Path = typer.Option(
        None, "--plot", help="Training runs: write the per-step curves (loss, learning rate, grad norm, ...) as a PNG."
    ),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output (a training run's steps included)."),
) -> None:
    """One run in full: settings, figures, data and checkpoints; a training run's per-step curves as
    sparklines (and a PNG with --plot)."""
    from colbench.runs import details

    found = details(state.db(), ref)
    if plot is not None:
        if found["kind"] != "train":
            fail("--plot draws a training run's curves; this is a " + found["kind"] + " run")
        if not found["steps"]:
            fail(f"{found['ref']} has no per-step figures (it ran before they were recorded, or took no step)")
        from colbench.curves import plot_steps

        plot_steps(found["steps"], plot, title=run_title(found))
    if as_json:
        print_json(found)
        return
    console.print(run_view(found))
    if plot is not None:
        console.print(f"wrote {plot}", highlight=False)


@app.command("rm")
def rm(
    ref: str = typer.Argument(
        ..., metavar="RUN", help="rollout:<id>, train:<id>, eval:<id>, ckpt:<id> or a run's name."
    ),
    unfinished: bool = typer.Option(
        False,
        "--unfinished",
        help="Rollouts: remove only the pending, running and failed trajectories (what an interrupted rollout left)."
    ),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Remove a run and what only it made (a rollout's trajectories, a training run's checkpoints, steps and
    their folders). Refused while another run needs it: a training run that trained on the rollout, a
    rollout or run that used the checkpoint."""
    from colbench.runs import remove
    from colbench.training.checkpoints import fail_stale_runs

    db = state.db()
    fail_stale_runs(db)  # a run whose process died is not "still running"
    plan = remove(db, ref, unfinished_only=unfinished, dry_run=True)
    if plan.blocked_by:
        fail(f"{plan.ref} is still needed: " + "; ".join(plan.blocked_by))
    if not yes:
        if not console.is_terminal:
            fail(f"removing {removal_text(plan)} needs --yes when not asked at a terminal")
        if not typer.confirm(f"remove {removal_text(plan)}?"):
            raise typer.Exit(1)
    done = remove(db, ref, unfinished_only=unfinished)
    if done.blocked_by:  # something started needing it since the question
        fail(f"{done.ref} is still needed: " + "; ".join(done.blocked_by))
    if as_json:
        print_json(done.as_dict())
        return
    console.print(f"removed {removal_text(done)}", highlight=False, markup=False)
    for folder in done.kept_folders:
        err_console.print(
            f"kept {folder}: it is outside the store's checkpoint folder (an --out folder); delete it yourself",
            highlight=False,
            markup=False
        )


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="runs")
