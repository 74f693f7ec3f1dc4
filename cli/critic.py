"""`colbench critic fit` and `colbench critic score`: the SWEET-RL critic."""
from __future__ import annotations

from pathlib import Path

import typer

from colbench.cli.views.critic import pairs_notes, pairs_table
from colbench.cli.common import console, fail, main_process, print_json, reporting, state
from colbench.cli.options import flags_from
from colbench.model_refs import DEFAULT_MODEL
from colbench.grading.sandboxes import AUTO as AUTO_SANDBOX, sandbox_help
from colbench.training.config import CriticConfig

app = typer.Typer(
    help="The SWEET-RL critic: fit it on graded trajectories, score turns with it, judge it (eval, pairs).",
    no_args_is_help=True
)


@app.command("fit")
@flags_from(CriticConfig)
def fit(
    config: CriticConfig,
    model: str = typer.Option(
        None,
        "--model",
        help=(
            f"Base model: {DEFAULT_MODEL} (default), a local folder, a hub id, or ckpt:<id> of a policy. Taken from the"
            " parent when continuing."
        )
    ),
    parent: str = typer.Option(
        "latest",
        "--from",
        help=(
            "Critic to continue: ckpt:<id>, or 'latest' (the newest critic with the same base, family and settings; a"
            " new one when there is none)."
        )
    ),
    from_scratch: bool = typer.Option(
        False,
        "--from-scratch",
        help="Use all the data. Without an explicit --from: a new critic rather than continuing the latest."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the run's summary as JSON."),
) -> None:
    """Fit the critic with Bradley-Terry on pairs of graded trajectories of the same task.

    By default it continues the latest matching critic on the trajectories graded since
    that critic's run, and starts a new one when there is none. Every setting is a
    CriticConfig field (colbench/training/config.py), documented by its help.
    """
    from colbench.training.critic import fit_critic

    with reporting("critic", enabled=not as_json and main_process()) as on_progress:
        result = fit_critic(state.db(), config, base_model=model, parent_checkpoint=parent, from_scratch=from_scratch,
                            on_progress=on_progress)
    if not main_process():
        return
    metrics = result.metrics
    if as_json:
        print_json({"run_id": result.run_id, "checkpoint": f"ckpt:{result.checkpoint_id}", "path": result.path,
                    "metrics": metrics})
        return
    accuracy = metrics.get("heldout_accuracy")
    shown = "n/a (no held-out tasks)" if accuracy is None else f"{accuracy:.1%} of {metrics['heldout_pairs']} pairs"
    console.print(
        f"critic ckpt:{result.checkpoint_id} (run {result.run_id}): {metrics['train_pairs']} training pairs from "
        f"{metrics['new_trajectories']} new trajectories, {metrics['steps']} steps, loss {metrics['train_loss']:.4f}; "
        f"held-out pair accuracy {shown}"
    )


@app.command("score")
def score(
    critic: str = typer.Option(..., "--critic", help="The critic checkpoint: ckpt:<id>, or ckpt:<its run's name>."),
    policy: str = typer.Option(None, "--policy", help="Only trajectories of this policy."),
    limit: int = typer.Option(None, "--limit", min=1, help="Only the newest N trajectories."),
    device: str = typer.Option("auto", "--device", help="auto, cpu or cuda."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Write the critic's per-turn advantage A(o_t,a_t,c) for stored trajectories (see `colbench inspect`)."""
    from colbench.model_refs import stored_ref
    from colbench.training.scoring import score_turns

    with reporting("scoring", enabled=not as_json) as on_progress:
        summary = score_turns(state.db(), stored_ref(state.db(), critic), policy=policy, limit=limit, device=device,
                              on_progress=on_progress)
    if as_json:
        print_json(summary)
        return
    console.print(
        f"critic ckpt:{summary['checkpoint_id']}: {summary['scores_written']} turn scores written for "
        f"{summary['trajectories']} trajectories ({summary['agent_turns']} agent turns)"
    )


@app.command("eval")
def evaluate(
    critic: str = typer.Option(..., "--critic", help="The critic checkpoint: ckpt:<id>, or ckpt:<its run's name>."),
    tasks: str = typer.Option(
        "backend-lite:test",
        "--tasks",
        help=(
            "Whose graded trajectories to judge, as rollout's --tasks (held-out tasks: never the critic's training"
            " split)."
        )
    ),
    policies: str = typer.Option(
        None,
        "--policies",
        help="Only trajectories of these policies (comma-separated, a trailing * matches a prefix, e.g. scripted:*)."
    ),
    setting: str = typer.Option(
        None,
        "--setting",
        help=(
            "Only rollouts made with this setting (as shown in brackets after the policy, e.g. max=256,seed=1; '' for"
            " the protocol's defaults): a policy's best-of-N rollouts share its name."
        )
    ),
    pairs: str = typer.Option(
        None, "--pairs", help="Pair rule for the accuracy: correct or margin (default: the family's, as in training)."
    ),
    limit: int = typer.Option(None, "--limit", min=1, help="Only the newest N trajectories."),
    device: str = typer.Option("auto", "--device", help="auto, cpu or cuda."),
    as_json: bool = typer.Option(False, "--json", help="Print the figures as JSON."),
) -> None:
    """How well the critic ranks held-out trajectories (pair accuracy) and credits the turns that
    obtained a hidden fact (backend-lite: rank correlation and within-dialogue AUC)."""
    from colbench.model_refs import stored_ref
    from colbench.training.critic_eval import describe, evaluate_critic

    chosen = [p.strip() for p in policies.split(",") if p.strip()] if policies else None
    with reporting("critic eval", enabled=not as_json) as on_progress:
        result = evaluate_critic(state.db(), stored_ref(state.db(), critic), tasks=tasks, policies=chosen,
                                 setting=setting, rule=pairs, limit=limit, device=device, on_progress=on_progress)
    if as_json:
        print_json(result.as_dict())
        return

    info = "with" if result.training_info else "without"
    console.print(
        f"critic {result.checkpoint} ({info} training-time information) on {result.trajectories} trajectories of"
        f" {result.tasks}: {describe(result.as_dict())}",
        markup=False,
    )


@app.command("pairs")
def pairs(
    run: str = typer.Argument(..., help="A SWEET-RL training run: train:<id>, ckpt:<id> of its policy, or its name."),
    grade: bool = typer.Option(
        False,
        "--grade",
        help="Also grade the pairs of two answers: did the critic choose the one that passes more tests?"
    ),
    sandbox: str = typer.Option(AUTO_SANDBOX, "--sandbox", help="With --grade: " + sandbox_help()),
    study_folder: Path = typer.Option(
        None, "--study",
        help="Also keep the counts in this study folder's pairs.jsonl (colbench/study.py), under --arm and --label, "
             "as `experiment --label` does for the runs it trains; needs --grade."),
    arm: str = typer.Option(None, "--arm", help="With --study: the arm the run trained (sweet, sweet-no-c, ...)."),
    label: str = typer.Option(None, "--label", help="With --study: the study run's label (e.g. final)."),
    as_json: bool = typer.Option(False, "--json", help="Print the counts as JSON."),
) -> None:
    """What a SWEET-RL run's critic taught its policy (backend-lite): each pair's chosen and rejected
    candidate as an answer, or a question that obtained a new fact, re-asked a known one, or obtained
    nothing, judged by the built-in human against the dialogue the candidates continue."""
    from colbench.families.lite_truth import pair_kinds
    from colbench.runs import resolve

    if study_folder is not None and not (grade and arm and label):
        fail("--study needs --grade, --arm and --label: the study's report checks graded pairs, per arm and label")
    db = state.db()
    with db.read() as session:
        found = resolve(session, run)
    if found.kind != "train":
        fail(f"{run} is a {found.kind} run; give a SWEET-RL training run (train:<id> or its name)")
    if grade:
        from colbench.grading.grader import Grader

        with Grader(sandbox=sandbox) as grader:
            result = pair_kinds(db, found.id, grader=grader)
    else:
        result = pair_kinds(db, found.id)
    if not result.pairs:
        fail(f"{run} trained on no SWEET-RL pairs (only `policy fit --algo sweet` runs have them)")
    if study_folder is not None:
        from colbench.study import record_pairs
        from colbench.store.models import TrainingRun

        with db.read() as session:  # the trainer's seed, as the study's trajectories carry it
            seed = (session.get(TrainingRun, found.id).config or {}).get("seed", 0)
        record_pairs(study_folder, arm, label, result.as_dict(), seed=seed)
    if as_json:
        print_json(result.as_dict())
        return
    console.print(pairs_table(result))
    for line in pairs_notes(result):
        console.print(line, highlight=False)
