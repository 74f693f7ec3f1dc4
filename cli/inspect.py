"""`colbench inspect <traj-id>`: one trajectory, turn by turn."""
from __future__ import annotations

from pathlib import Path

import typer

from colbench.cli.views.inspect import trajectory_json, trajectory_view
from colbench.families import family as family_named
from colbench.tasks.rows import spec_of
from colbench.cli.common import console, fail, print_json, state


def inspect(
    trajectory_id: int = typer.Argument(..., metavar="TRAJ_ID", help="Trajectory id (see `colbench ls`)."),
    reveal: bool = typer.Option(False, "--reveal", help="Also show the hidden reference solution."),
    side_by_side: Path = typer.Option(
        None,
        "--side-by-side",
        help=(
            "Frontend: write a PNG of the final page beside the reference page, titled with the task, score and metric."
        )
    ),
    filmstrip: bool = typer.Option(
        False, "--filmstrip", help="With --side-by-side: every page the agent showed, turn by turn, then the reference."
    ),
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
    if filmstrip and not side_by_side:
        fail("--filmstrip goes with --side-by-side FILE")
    if side_by_side:
        _write_side_by_side(trajectory, task, turns, paths, side_by_side, filmstrip)
    if as_json:
        print_json(trajectory_json(trajectory, task, turns, tests, scores, reveal=reveal))
        return
    console.print(trajectory_view(trajectory, task, turns, tests, scores, reveal=reveal, screenshot_paths=paths))


def _write_side_by_side(trajectory, task, turns, paths: dict[str, str], out: Path, filmstrip: bool) -> None:
    """The final page (or each turn's page) beside the reference page, rendered now, under a title
    naming the task, the score and its metric."""
    reference_page = family_named(task.family).reference_page(spec_of(task))
    if reference_page is None:
        fail(f"--side-by-side shows pages: a {task.family} task's reference is none")
    from colbench.render.browser import Renderer
    from colbench.render.pictures import contact_sheet

    def page(sha: str | None) -> bytes | None:
        return Path(paths[sha]).read_bytes() if sha in paths else None

    score = "not graded" if trajectory.reward is None else f"{trajectory.reward_metric} {trajectory.reward:.3f}"
    title = (
        f"trajectory {trajectory.id} · task {task.id}: {' '.join(task.problem_description.split())[:160]} ·"
        f" {trajectory.policy} · {score}"
    )
    with Renderer(pool_size=1) as renderer:
        reference = renderer.render(reference_page).png_bytes
    if filmstrip:
        shown = [t for t in turns if t.role == "assistant"]
        frames = [(f"turn {k}", page(t.screenshot)) for k, t in enumerate(shown, 1)] + [("reference", reference)]
        out.write_bytes(contact_sheet(frames, title=title, frame_width=480))
    else:
        out.write_bytes(contact_sheet([("agent: final page", page(trajectory.screenshot)), ("reference", reference)],
                                      title=title))
    console.print(f"wrote {out} ({'each turn' if filmstrip else 'final page'} | reference)", highlight=False,
                  markup=False)


def register(app: typer.Typer) -> None:
    app.command("inspect")(inspect)
