"""`colbench policy fit` (SWEET-RL, rejection fine-tuning, multi-turn DPO) and `colbench checkpoint`."""
from __future__ import annotations

import typer

from colbench.cli.common import console, print_json, progress_bar, state

app = typer.Typer(help="Train the agent: SWEET-RL (turn-level DPO with the critic), rft or multi-turn DPO.", no_args_is_help=True)
checkpoint_app = typer.Typer(help="Training checkpoints: list them, export them as plain model folders.", no_args_is_help=True)

@app.command("fit")
def fit(
    algo: str = typer.Option(..., "--algo", help="sweet (turn-level DPO on critic-ranked candidates), rft (SFT on successful trajectories) or mtdpo (trajectory-level DPO)."),
    model: str = typer.Option(None, "--model", help="Base model: smollm2 (default), a local folder, a hub id, or ckpt:<id> (a LoRA policy checkpoint is continued, on all the data)."),
    critic: str = typer.Option(None, "--critic", help="sweet: the critic checkpoint that scores the candidates, ckpt:<id>."),
    parent: str = typer.Option(None, "--from", help="Policy checkpoint to continue, ckpt:<id>: its adapter, on the data graded since its run."),
    from_scratch: bool = typer.Option(False, "--from-scratch", help="With --from: read all the data, not only what its run has not consumed."),
    family: str = typer.Option("backend", "--family", help="backend or frontend."),
    fraction: float = typer.Option(0.1, "--fraction", min=0.0, max=1.0, help="sweet: share of the stored data to sample candidates for (see --selection)."),
    selection: str = typer.Option("trajectories", "--selection", help="sweet: trajectories (the official first --fraction of trajectories, every turn) or turns (a hashed --fraction of agent turns)."),
    candidates: int = typer.Option(16, "--candidates", min=2, help="sweet: candidates per turn."),
    pairs_per_turn: int = typer.Option(4, "--pairs-per-turn", min=1, help="sweet: top-half vs bottom-half pairs per turn."),
    score: str = typer.Option("sampler", "--score", help="sweet: 'sampler' (critic log-prob with c minus the sampler's, the paper) or 'critic' (the critic's own advantage)."),
    max_new_tokens: int = typer.Option(1024, "--max-new-tokens", min=1, help="sweet: most tokens per candidate."),
    sample_batch_size: int = typer.Option(16, "--sample-batch-size", min=1, help="sweet: rows decoded together when sampling."),
    rft_threshold: float = typer.Option(None, "--rft-threshold", help="rft: per task, keep its best trajectory when its reward reaches this. Default: backend, every fully correct trajectory (paper); frontend 0.8."),
    pairs: str = typer.Option(None, "--pairs", help="mtdpo: correct (backend default, the paper's) or margin (every two trajectories ≥ 0.1 apart; frontend default)."),
    beta: float = typer.Option(0.1, "--beta", help="DPO β."),
    nll: float = typer.Option(0.01, "--nll", help="Weight of the NLL term on chosen (DPO)."),
    lora_rank: int = typer.Option(16, "--lora-rank", min=1, help="LoRA rank (α = 2r)."),
    full: bool = typer.Option(False, "--full", help="Full fine-tuning instead of LoRA."),
    lr: float = typer.Option(None, "--lr", help="Peak learning rate. Default 2e-5 with LoRA, 2e-7 with --full."),
    epochs: int = typer.Option(None, "--epochs", min=1, help="Passes over the data (default: 1 for sweet and mtdpo, 4 for rft)."),
    batch_size: int = typer.Option(None, "--batch-size", min=1, help="Pairs or trajectory rows per forward/backward pass and process (default: 32 for rft, 8 for sweet and mtdpo)."),
    grad_accum: int = typer.Option(1, "--grad-accum", min=1, help="Passes per optimiser step."),
    max_len: int = typer.Option(2048, "--max-len", min=16, help="Most tokens per sequence (cut from the left)."),
    gradient_checkpointing: bool = typer.Option(False, "--gradient-checkpointing", help="Recompute activations in the backward pass (less memory)."),
    seed: int = typer.Option(0, "--seed"),
    device: str = typer.Option("auto", "--device", help="auto, cpu or cuda."),
    dtype: str = typer.Option(None, "--dtype", help="Weights' dtype (default float32 on CPU, bfloat16 on GPU)."),
    out: str = typer.Option(None, "--out", help="Checkpoint folder (default: checkpoints/policy-<run> beside the database)."),
    as_json: bool = typer.Option(False, "--json", help="Print the run's summary as JSON."),
) -> None:
    """Train a policy on the stored, graded trajectories and write a checkpoint (ckpt:<id>)."""
    from colbench.training.policy import fit_policy
    from colbench.training.trainer import PolicyConfig

    if algo == "sweet" and not critic:
        raise typer.BadParameter("sweet needs --critic ckpt:<id>", param_hint="--critic")
    config = PolicyConfig(
        family=family, beta=beta, nll_weight=nll, fraction=fraction, selection=selection, candidates=candidates, pairs_per_turn=pairs_per_turn,
        score=score, max_new_tokens=max_new_tokens, sample_batch_size=sample_batch_size, rft_threshold=rft_threshold, pairs=pairs, lr=lr,
        epochs=epochs, batch_size=batch_size, grad_accum=grad_accum, max_len=max_len, lora_rank=lora_rank, full=full,
        gradient_checkpointing=gradient_checkpointing, seed=seed, device=device, dtype=dtype, out=out,
    )
    with progress_bar(f"policy {algo}", None, enabled=not as_json) as advance:
        seen = {"stage": None, "done": 0}

        def on_progress(stage: str, done: int, total: int, info: dict) -> None:
            if stage != seen["stage"]:  # sampling, then training: one bar, restarted
                advance(-seen["done"], total=total)
                seen["stage"], seen["done"] = stage, 0
            advance(done - seen["done"], total=total)
            seen["done"] = done

        result = fit_policy(
            state.db(), config, algo=algo, base_model=model, critic_checkpoint=critic, parent_checkpoint=parent,
            on_progress=on_progress, from_scratch=from_scratch,
        )
    m = result.metrics
    if as_json:
        print_json({"run_id": result.run_id, "checkpoint": f"ckpt:{result.checkpoint_id}", "path": result.path, "metrics": m})
        return
    if algo == "rft":
        what = f"{m.get('trajectories')} successful trajectories, loss {m.get('train_loss', float('nan')):.4f}"
    else:
        what = (
            f"{m.get('pairs')} pairs, loss {m.get('train_loss', float('nan')):.4f}, "
            f"reward margin {m.get('train_reward_margin', float('nan')):+.4f}, reward accuracy {m.get('train_reward_accuracy', float('nan')):.1%}"
        )
        if algo == "sweet":
            what += f"; {m.get('selected_turns')} turns ({m.get('turns_sampled')} sampled, {m.get('turns_reused')} reused)"
    console.print(f"policy:{algo} ckpt:{result.checkpoint_id} (run {result.run_id}): {what}, {m.get('steps')} steps")


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
    merge: bool = typer.Option(False, "--merge", help="Merge the LoRA adapter into the base weights: a plain HF model folder."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Write a checkpoint as a folder that `--model DIR` loads anywhere (merged weights, or the adapter with its tokenizer)."""
    from colbench.training.checkpoints import export_checkpoint

    folder = export_checkpoint(state.db(), checkpoint, out, merge=merge)
    if as_json:
        print_json({"checkpoint": checkpoint, "path": str(folder), "merged": merge})
        return
    console.print(f"{checkpoint if str(checkpoint).startswith('ckpt:') else 'ckpt:' + str(checkpoint)} written to {folder}" + (" (merged)" if merge else ""))
