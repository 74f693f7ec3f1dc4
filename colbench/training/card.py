"""A checkpoint's model card (README.md in its folder): what it was trained from, on what, how,
and how training went; written with the weights, so an exported or shared folder says so.

peft would write an empty template naming a local cache path as its base model; this one
names the hub id of the embedded model, or the colbench checkpoint a run continued.
"""
from __future__ import annotations

import json

from colbench.model_refs import EMBEDDED_ALIASES, checkpoint_part

EMBEDDED_HUB_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
ALGORITHMS = {
    "critic": (
        "SWEET-RL critic: Bradley-Terry on trajectory pairs, its per-turn advantage read with the training-time"
        " information"
    ),
    "policy:sweet": "SWEET-RL: turn-level DPO on candidates ranked by the critic's advantage",
    "policy:rft": "rejection fine-tuning: supervised on successful trajectories",
    "policy:mtdpo": "multi-turn DPO: trajectory-level preference pairs",
    "policy:sft": "supervised fine-tuning on demonstrations",
}
# Figures worth a line on the card, when the run has them.
HEADLINES = ("train_loss", "train_pair_accuracy", "heldout_accuracy", "train_reward_margin", "train_reward_accuracy",
             "pairs", "trajectories", "steps", "train_tokens", "train_seconds")


def hub_base(base_model: str) -> str:
    return EMBEDDED_HUB_ID if base_model.lower() in EMBEDDED_ALIASES else base_model


def model_card(*, kind: str, run_ref: str, name: str | None, base_model: str, adapter: bool, store_id: str,
               config: dict, metrics: dict, data: list[tuple[str, int]]) -> str:
    """Markdown with a YAML header (base_model, library, tags) that the Hugging Face hub reads."""
    base = hub_base(base_model)
    header = [
        "---",
        (
            f"base_model: {json.dumps(base)}"
            if checkpoint_part(base) is None
            else f"# continued from colbench {base} (store {store_id[:8]})"
        ),
        f"library_name: {'peft' if adapter else 'transformers'}",
        "tags: [colbench, " + ("sweet-rl" if kind in ("critic", "policy:sweet") else kind.split(":")[-1]) + "]",
        "---",
    ]
    lines = [
        f"# colbench {kind} {run_ref}" + (f" ({name})" if name else ""),
        "",
        ALGORITHMS.get(kind, kind) + ".",
        "",
        f"- **Base model:** `{base}`"
        + (f" (a colbench checkpoint of store {store_id[:8]})" if checkpoint_part(base) is not None else ""),
        f"- **Weights:** {'a LoRA adapter (peft) over the base model' if adapter else 'full weights'}",
        f"- **Run:** `{run_ref}` of colbench store `{store_id}` (`colbench runs show {run_ref}`)",
        "",
        "## Data",
        "",
    ]
    if data:
        lines += [f"- {count} trajectories of `{rollout}`" for rollout, count in data]
    else:
        lines.append("- (none recorded)")
    lines += ["", "## Results", ""]
    lines += [f"- {key}: {_figure(metrics[key])}" for key in HEADLINES if metrics.get(key) is not None]
    lines += ["", "## Settings", "", "```json", json.dumps(config, indent=2, sort_keys=True, default=str), "```", ""]
    return "\n".join(header + [""] + lines)


def _figure(value) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)
