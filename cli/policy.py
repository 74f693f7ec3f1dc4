"""`colbench policy fit` (SWEET-RL, rejection fine-tuning, multi-turn DPO) and `colbench checkpoint`."""
from __future__ import annotations

import typer

from colbench.cli.common import console, main_process, print_json, reporting, state
from colbench.cli.options import flags_from
from colbench.model_refs import DEFAULT_MODEL
from colbench.training.algorithms import ALGORITHMS
from colbench.training.config import PolicyConfig

app = typer.Typer(
    help="Train the agent: SWEET-RL (turn-level DPO with the critic), rft, multi-turn DPO, sft on demonstrations, or"
         " online RL (grpo, rloo).",
    no_args_is_help=True
)
checkpoint_app = typer.Typer(help="Training checkpoints: list them, export them as plain model folders.",
                             no_args_is_help=True)


@app.command("fit")
@flags_from(PolicyConfig)
def fit(
    config: PolicyConfig,
    algo: str = typer.Option(
        ...,
        "--algo",
        help=f"The algorithm: {ALGORITHMS.help()}."
    ),
    model: str = typer.Option(
        None,
        "--model",
        help=(
            f"Base model: {DEFAULT_MODEL} (default), a local folder, a hub id, or ckpt:<id> (a LoRA policy checkpoint"
            " is continued, on all the data)."
        )
    ),
    critic: str = typer.Option(
        None,
        "--critic",
        help=(
            "sweet: the critic checkpoint that scores the candidates, ckpt:<id>; or several, comma-separated: an"
            " ensemble whose scores are averaged. grpo, rloo: the critic of --turn-credit critic."
        )
    ),
    parent: str = typer.Option(
        None, "--from", help="Policy checkpoint to continue, ckpt:<id>: its adapter, on the data graded since its run."
    ),
    from_scratch: bool = typer.Option(
        False, "--from-scratch", help="With --from: read all the data, not only what its run has not consumed."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the run's summary as JSON."),
) -> None:
    """Train a policy on the stored, graded trajectories (or, grpo and rloo, on its own fresh rollouts) and write a
    checkpoint (ckpt:<id>).
    Every setting is a PolicyConfig field (colbench/training/config.py), documented by its help."""
    from colbench.training.policy import fit_policy

    try:
        algorithm = ALGORITHMS.get(algo)
    except ValueError as err:
        raise typer.BadParameter(str(err), param_hint="--algo") from None
    if algorithm.needs_critic and not critic and config.score != "oracle" and config.ranker == "critic":
        raise typer.BadParameter(f"{algo} needs --critic ckpt:<id> (or another --ranker, e.g. oracle on backend-lite)",
                                 param_hint="--critic")
    with reporting(f"policy {algo}", enabled=not as_json and main_process()) as on_progress:
        result = fit_policy(
            state.db(), config, algo=algo, base_model=model, critic_checkpoint=critic, parent_checkpoint=parent,
            on_progress=on_progress, from_scratch=from_scratch,
        )
    if not main_process():
        return
    m = result.metrics
    if as_json:
        print_json({"run_id": result.run_id, "checkpoint": f"ckpt:{result.checkpoint_id}", "path": result.path,
                    "metrics": m})
        return
    if algorithm.online:
        what = (f"{m.get('steps')} online steps, {m.get('dialogues')} dialogues, reward {m.get('first_reward', 0):.3f}"
                f" at the first step and {m.get('last_reward', 0):.3f} at the last (`colbench runs show"
                f" train:{result.run_id}` for every figure)")
        console.print(f"policy:{algo} ckpt:{result.checkpoint_id} (run {result.run_id}): {what}")
        return
    if not algorithm.pairwise:
        what = f"{m.get('trajectories')} successful trajectories, loss {m.get('train_loss', float('nan')):.4f}"
    else:
        what = (
            f"{m.get('pairs')} pairs, loss {m.get('train_loss', float('nan')):.4f}, reward margin"
            f" {m.get('train_reward_margin', float('nan')):+.4f}, reward accuracy"
            f" {m.get('train_reward_accuracy', float('nan')):.1%}"
        )
        if "selected_turns" in m:  # candidates sampled for turns (sweet)
            what += (
                f"; {m.get('selected_turns')} turns ({m.get('turns_sampled')} sampled, {m.get('turns_reused')} reused)"
            )
    console.print(f"policy:{algo} ckpt:{result.checkpoint_id} (run {result.run_id}): {what}, {m.get('steps')} steps")
    if m.get("stopped_early"):
        console.print(f"stopped early: {m['stopped_early']}", highlight=False)


@checkpoint_app.command("ls")
def ls(as_json: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
    """Every checkpoint: id, kind, base model, adapter or full weights, folder."""
    from rich.table import Table

    from colbench.training.checkpoints import list_checkpoints

    rows = list_checkpoints(state.db())
    if as_json:
        print_json(rows)
        return
    if not rows:
        console.print("no checkpoints yet")
        return
    table = Table("ckpt", "kind", "run", "from", "base model", "weights", "steps", "created", "path")
    for r in rows:
        table.add_row(
            r["ref"], r["kind"], str(r["run_id"]), f"ckpt:{r['parent']}" if r["parent"] else "", r["base_model"],
            "LoRA adapter" if r["adapter"] else "full", str(r["step"]), str(r["created_at"])[:19], r["path"],
        )
    console.print(table)


@checkpoint_app.command("export")
def export(
    checkpoint: str = typer.Argument(..., help="The checkpoint: <id> or ckpt:<id>."),
    out: str = typer.Option(..., "--out", help="Folder to write (must be new or empty)."),
    merge: bool = typer.Option(False, "--merge",
                               help="Merge the LoRA adapter into the base weights: a plain HF model folder."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Write a checkpoint as a folder `--model DIR` loads anywhere (merged weights, or adapter and tokenizer)."""
    from colbench.model_refs import checkpoint_id, checkpoint_name
    from colbench.training.checkpoints import export_checkpoint

    folder = export_checkpoint(state.db(), checkpoint, out, merge=merge)
    if as_json:
        print_json({"checkpoint": checkpoint, "path": str(folder), "merged": merge})
        return
    console.print(
        f"{checkpoint_name(checkpoint_id(state.db(), checkpoint))} written to {folder}" + (" (merged)" if merge else "")
    )
