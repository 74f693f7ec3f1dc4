"""`colbench rollout` and `colbench grade`."""
from __future__ import annotations

import typer

from colbench.cli.common import FAMILY_HELP, Family, console, print_json, reporting, state
from colbench.cli.options import flags_from
from colbench.grading.sandboxes import AUTO as AUTO_SANDBOX, sandbox_help
from colbench.grading.semantics import DEFAULT_GRADING, GRADING_HELP
from colbench.protocol import NO_RESPONSE
from colbench.rollout_config import RolloutConfig


@flags_from(RolloutConfig)
def rollout(config: RolloutConfig,
            as_json: bool = typer.Option(False, "--json", help="Print a machine-readable summary at the end.")) -> None:
    """Roll out a policy against a simulated human on a task split; grade and store everything.

    With no arguments: the embedded SmolLM2-135M-Instruct, the built-in deterministic simulator,
    the built-in backend test tasks, and the bwrap sandbox. Rerunning the same command finishes
    what is missing and duplicates nothing. Every setting is a RolloutConfig field (colbench/rollout_config.py).
    """
    from colbench.rollout import run

    with reporting("rollouts", enabled=not as_json) as on_progress:
        result = run(state.db(), config, on_progress=on_progress)
    stats = result.stats
    if as_json:
        print_json(stats.as_dict() | {"run": result.run, "name": result.name, "continued": result.continued,
                                      "policy": result.policy,
                                      "simulator": result.simulator, "graded_by": result.graded_by,
                                      "engine": result.engine})
        return
    rate = "n/a" if stats.success_rate is None else f"{stats.success_rate:.1%}"
    console.print(
        f"{result.run}"
        + (f" ({result.name})" if result.name else "")
        + (", continued" if result.continued else "")
        + f": {stats.finished} trajectories finished, {stats.already_done} were already done"
        + (f" ({stats.no_replies} simulator replies failed and became {NO_RESPONSE!r})" if stats.no_replies else "")
        + (f" ({stats.leaks} simulator replies leaked the reference: colbench audit simulator {result.run})"
           if stats.leaks else "")
        + f"; {stats.agent_turns} agent turns at {stats.turns_per_s:.2f}/s ({result.engine}); success {rate} of"
        f" {stats.graded} graded"
    )


def grade(
    family: Family = typer.Option(None, "--family", help=f"Only this task family's answers ({FAMILY_HELP}). Default:"
                                  " every family that re-grades stored answers (those graded by tests)."),
    policy: str = typer.Option(None, "--policy", help="Only this policy's trajectories."),
    ungraded_only: bool = typer.Option(False, "--ungraded", help="Only trajectories with no grade yet."),
    sandbox: str = typer.Option(AUTO_SANDBOX, "--sandbox", help=sandbox_help()),
    workers: int = typer.Option(2, "--grade-workers", min=1, help="Sandboxed grading workers (as rollout's)."),
    old_workers: int = typer.Option(None, "--workers", hidden=True, min=1),
    grading: str = typer.Option(DEFAULT_GRADING, "--grading", help="Grading semantics. " + GRADING_HELP),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Re-grade stored answers in their family's environment, the sandbox for families graded by tests (after an
    official import, or under another --grading)."""
    from colbench.regrade import combined, regrade, regrading_families
    from colbench.wiring import build_env

    workers = old_workers or workers  # --workers: the name this flag had before it matched rollout's
    db = state.db()
    by_family = {}
    for name in regrading_families(family and family.value):
        env, close = build_env(db, name, sandbox=sandbox, workers=workers, render_pool=1, grading=grading)
        try:
            with reporting(f"grading {name}", enabled=not as_json) as on_progress:
                by_family[name] = regrade(db, env, policy=policy, ungraded_only=ungraded_only,
                                          on_progress=on_progress)
        finally:
            close()
    total = combined(by_family.values())
    if as_json:
        print_json(total | {"families": by_family})
        return
    console.print(
        f"graded {total['graded']} trajectories ({grading} grading): mean reward {total['mean_reward']:.3f},"
        f" success {total['success_rate']:.1%}"
        + "".join(f"; {name}: {s['graded']}" for name, s in by_family.items() if len(by_family) > 1)
    )


def register(app: typer.Typer) -> None:
    app.command("rollout")(rollout)
    app.command("grade")(grade)
