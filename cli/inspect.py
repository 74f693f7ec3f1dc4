"""`colbench inspect <traj-id>`: one trajectory, turn by turn."""
from __future__ import annotations

from pathlib import Path

import typer

from colbench.cli import views
from colbench.cli.common import console, fail, print_json, state


def inspect(
    trajectory_id: int = typer.Argument(..., metavar="TRAJ_ID", help="Trajectory id (see `colbench ls`)."),
    reveal: bool = typer.Option(False, "--reveal", help="Also show the hidden reference solution."),
    side_by_side: Path = typer.Option(None, "--side-by-side", help="Frontend: write a PNG of the final page beside the reference page."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Show a trajectory: header, every turn (agent and human), critic scores, test results."""
    from colbench.store import queries

    with state.db().read() as session:
        found = queries.trajectory_with_task(session, trajectory_id)
        if found is None:
            fail(f"no trajectory with id {trajectory_id}")
        trajectory, task = found
        turns = queries.turns_of(session, trajectory_id)
        tests = queries.test_results_of(session, trajectory_id)
        scores = queries.critic_scores_of(session, trajectory_id)
        shas = {t.screenshot for t in turns if t.screenshot} | {trajectory.screenshot} - {None}
        paths = queries.screenshot_paths(session, shas)
    if side_by_side:
        _write_side_by_side(trajectory, task, paths, side_by_side)
    if as_json:
        print_json(views.trajectory_json(trajectory, task, turns, tests, scores, reveal=reveal))
        return
    console.print(views.trajectory_view(trajectory, task, turns, tests, scores, reveal=reveal, screenshot_paths=paths))


def _write_side_by_side(trajectory, task, paths: dict[str, str], out: Path) -> None:
    """The final page (agent) beside the reference page, rendered now."""
    if task.family != "frontend":
        fail("--side-by-side is for frontend trajectories")
    if not trajectory.screenshot or trajectory.screenshot not in paths:
        fail(f"trajectory {trajectory.id} has no rendered final page yet")
    from colbench.render.browser import Renderer
    from colbench.render.storage import side_by_side

    with Renderer(pool_size=1) as renderer:
        reference = renderer.render(task.ground_truth).png_bytes
    out.write_bytes(side_by_side(Path(paths[trajectory.screenshot]).read_bytes(), reference))
    console.print(f"wrote {out} (agent | reference)")


def register(app: typer.Typer) -> None:
    app.command("inspect")(inspect)
