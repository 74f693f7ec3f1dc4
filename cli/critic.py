"""`colbench critic fit` and `colbench critic score`: the SWEET-RL critic."""
from __future__ import annotations

import typer

from colbench.cli.common import console, print_json, progress_bar, state

app = typer.Typer(help="The SWEET-RL critic: fit it on graded trajectories, score turns with it.", no_args_is_help=True)


@app.command("fit")
def fit(
    model: str = typer.Option(None, "--model", help="Base model: smollm2 (default), a local folder, a hub id, or ckpt:<id> of a policy. Taken from the parent when continuing."),
    parent: str = typer.Option("latest", "--from", help="Critic to continue: ckpt:<id>, or 'latest' (the newest critic with the same base, family and settings; a new one when there is none)."),
    from_scratch: bool = typer.Option(False, "--from-scratch", help="Use all the data. Without an explicit --from: a new critic rather than continuing the latest."),
    family: str = typer.Option("backend", "--family", help="backend or frontend: which tasks' trajectories, and which pair rule."),
    normalize: str = typer.Option("turn", "--normalize", help="Length normalisation of A: turn (paper, default), trajectory (official code), or none (ablation)."),
    pairs: str = typer.Option(None, "--pairs", help="correct (backend default, the paper's: a fully correct trajectory against each lower one) or margin (every two ≥ 0.1 apart; frontend default)."),
    no_training_info: bool = typer.Option(False, "--no-training-info", help="Leave out the reference solution c (the paper's ablation)."),
    beta: float = typer.Option(0.1, "--beta", help="β in Σ_t β·A."),
    lora_rank: int = typer.Option(16, "--lora-rank", min=1, help="LoRA rank (α = 2r)."),
    full: bool = typer.Option(False, "--full", help="Full fine-tuning instead of LoRA."),
    lr: float = typer.Option(None, "--lr", help="Peak learning rate. Default 2e-5 with LoRA, 2e-7 with --full."),
    epochs: int = typer.Option(4, "--epochs", min=1, help="Passes over the pairs (paper: 4 backend, 8 frontend)."),
    batch_size: int = typer.Option(8, "--batch-size", min=1, help="Pairs per forward/backward pass and process."),
    grad_accum: int = typer.Option(1, "--grad-accum", min=1, help="Passes per optimiser step."),
    max_len: int = typer.Option(2048, "--max-len", min=16, help="Most tokens per trajectory (c kept, dialogue cut from the left)."),
    gradient_checkpointing: bool = typer.Option(False, "--gradient-checkpointing", help="Recompute activations in the backward pass (less memory)."),
    heldout: float = typer.Option(0.1, "--heldout", min=0.0, max=0.95, help="Share of tasks held out for pair accuracy."),
    seed: int = typer.Option(0, "--seed"),
    device: str = typer.Option("auto", "--device", help="auto, cpu or cuda."),
    out: str = typer.Option(None, "--out", help="Checkpoint folder (default: checkpoints/critic-<run> beside the database)."),
    as_json: bool = typer.Option(False, "--json", help="Print the run's summary as JSON."),
) -> None:
    """Fit the critic with Bradley-Terry on pairs of graded trajectories of the same task.

    By default it continues the latest matching critic on the trajectories graded since
    that critic's run, and starts a new one when there is none.
    """
    from colbench.training.critic import CriticConfig, fit_critic

    config = CriticConfig(
        family=family, beta=beta, normalize=normalize, pairs=pairs, training_info=not no_training_info, lr=lr, epochs=epochs,
        batch_size=batch_size, grad_accum=grad_accum, max_len=max_len, lora_rank=lora_rank, full=full,
        gradient_checkpointing=gradient_checkpointing, heldout_fraction=heldout, seed=seed, device=device, out=out,
    )
    with progress_bar("critic", None, enabled=not as_json) as advance:
        def on_progress(step: int, total: int, info: dict) -> None:
            advance(1, total=total)

        result = fit_critic(state.db(), config, base_model=model, parent_checkpoint=parent, from_scratch=from_scratch, on_progress=on_progress)
    metrics = result.metrics
    if as_json:
        print_json({"run_id": result.run_id, "checkpoint": f"ckpt:{result.checkpoint_id}", "path": result.path, "metrics": metrics})
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
    critic: str = typer.Option(..., "--critic", help="The critic checkpoint: ckpt:<id>."),
    policy: str = typer.Option(None, "--policy", help="Only trajectories of this policy."),
    limit: int = typer.Option(None, "--limit", min=1, help="Only the newest N trajectories."),
    device: str = typer.Option("auto", "--device", help="auto, cpu or cuda."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Write the critic's per-turn advantage A(o_t,a_t,c) for stored trajectories (see `colbench inspect`)."""
    from colbench.training.scoring import score_turns

    with progress_bar("scoring", None, enabled=not as_json) as advance:
        seen = [0]

        def on_progress(done: int, total: int) -> None:
            advance(done - seen[0], total=total)
            seen[0] = done

        summary = score_turns(state.db(), critic, policy=policy, limit=limit, device=device, on_progress=on_progress)
    if as_json:
        print_json(summary)
        return
    console.print(
        f"critic ckpt:{summary['checkpoint_id']}: {summary['scores_written']} turn scores written for "
        f"{summary['trajectories']} trajectories ({summary['agent_turns']} agent turns)"
    )
