"""`colbench inspect <traj-id>`: one trajectory, turn by turn."""
from __future__ import annotations

import typer

from colbench.cli import views
from colbench.cli.common import console, fail, print_json, state


def inspect(
    trajectory_id: int = typer.Argument(..., metavar="TRAJ_ID", help="Trajectory id (see `colbench ls`)."),
    reveal: bool = typer.Option(False, "--reveal", help="Also show the hidden reference solution."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Show a trajectory: header, every turn (agent and human), critic scores, test results."""
    from colbench.store import queries
    from colbench.store.models import Task, Trajectory

    with state.db().read() as session:
        trajectory = session.get(Trajectory, trajectory_id)
        if trajectory is None:
            fail(f"no trajectory with id {trajectory_id}")
        task = session.get(Task, trajectory.task_id)
        turns = queries.turns_of(session, trajectory_id)
        tests = queries.test_results_of(session, trajectory_id)
        scores = queries.critic_scores_of(session, trajectory_id)
    if as_json:
        print_json(views.trajectory_json(trajectory, task, turns, tests, scores, reveal=reveal))
        return
    console.print(views.trajectory_view(trajectory, task, turns, tests, scores, reveal=reveal))


def register(app: typer.Typer) -> None:
    app.command("inspect")(inspect)
