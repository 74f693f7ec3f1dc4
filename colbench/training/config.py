"""What every trainer shares: the optimisation settings, their defaults and documentation,
and the optimiser and schedule built from them."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Iterable

import torch

LORA_LR = 2e-5
FULL_LR = 2e-7
DEFAULT_BATCH_SIZE = 8  # the paper's critic and DPO batch; rejection fine-tuning uses 32 (policy.DEFAULT_BATCH)


def option(default: Any, text: str) -> Any:
    """A dataclass field whose help text is its documentation (``Config.help()``, the CLI)."""
    if isinstance(default, (list, dict, tuple)):
        return field(default_factory=lambda: type(default)(default), metadata={"help": text})
    return field(default=default, metadata={"help": text})


@dataclass
class TrainingConfig:
    """Optimisation settings of every trainer (the critic's and the policy's configs extend it)."""

    lr: float | None = option(
        None,
        f"Peak learning rate. Default {LORA_LR:g} with LoRA, {FULL_LR:g} with full fine-tuning. The paper's 2e-7 is "
        "for full fine-tuning of an 8B model; a rank-16 LoRA adapter (B starts at zero, scale α/r=2) barely moves at "
        "that rate. LoRA wants about 10x a full fine-tune's rate, and this toolkit's models are far smaller than 8B "
        "(which also tolerates larger rates); 2e-5 is 100x.",
    )
    batch_size: int | None = option(None, f"Examples (pairs; trajectory rows for rft) per forward/backward pass and process. Default: {DEFAULT_BATCH_SIZE}, and 32 for rft (the paper's).")
    grad_accum: int = option(1, "Passes per optimiser step. Effective batch = batch_size x grad_accum x processes. Lower batch_size and raise this to save memory.")
    lora_rank: int = option(16, "LoRA rank r (α = 2r, no dropout, every linear layer but the output layer).")
    full: bool = option(False, "Full fine-tuning instead of LoRA. Reference log-probs are computed before training, so no second model is kept; the checkpoint holds full weights.")
    gradient_checkpointing: bool = option(False, "Activation checkpointing: recompute activations in the backward pass (less memory, ~30% slower).")
    seed: int = option(0, "Seed for data selection, sampling, pair picks, data order and torch.")
    warmup_ratio: float = option(0.03, "Linear warm-up as a share of the optimiser steps (rounded down), then cosine decay to 0 (paper: 3%).")
    adam_betas: tuple[float, float] = option((0.9, 0.95), "AdamW betas (paper: 0.9, 0.95).")
    weight_decay: float = option(0.0, "AdamW weight decay.")
    max_grad_norm: float = option(1.0, "Gradient clipping by global norm (paper: 1.0); 0 turns it off.")
    device: str = option("auto", "auto (cuda when available), cpu or cuda. Under accelerate launch each process takes its own GPU.")
    dtype: str | None = option(None, "Model weights' dtype: float32 on CPU, bfloat16 on GPU by default. Log-probs entering a loss are float32 either way.")
    out: str | None = option(None, "Checkpoint folder. Default: checkpoints/<kind>-<run id> beside the database.")

    def __post_init__(self):
        for name in ("batch_size", "grad_accum"):
            if getattr(self, name) is not None and getattr(self, name) < 1:  # None: the algorithm's default
                raise ValueError(f"{name} must be at least 1")
        if not self.full and self.lora_rank < 1:
            raise ValueError("lora_rank must be at least 1 (or use full fine-tuning)")
        if not 0 <= self.warmup_ratio < 1:
            raise ValueError("warmup_ratio must be in [0, 1)")
        self.adam_betas = tuple(self.adam_betas)

    @property
    def learning_rate(self) -> float:
        return self.lr if self.lr is not None else (FULL_LR if self.full else LORA_LR)

    @property
    def on_cpu(self) -> bool:
        return self.device == "cpu" or (self.device == "auto" and not torch.cuda.is_available())

    def to_json(self) -> dict:
        return asdict(self) | {"learning_rate": self.learning_rate, "adam_betas": list(self.adam_betas)}

    @classmethod
    def help(cls) -> dict[str, str]:
        return {f.name: f.metadata.get("help", "") for f in fields(cls)}

    def optimizer_steps(self, examples: int, epochs: int, processes: int = 1) -> int:
        """Optimiser steps for ``epochs`` passes over ``examples`` split across ``processes``."""
        batches = math.ceil(examples / self.batch_size / processes)
        return max(1, epochs * math.ceil(batches / self.grad_accum))

    def optimizer(self, params: Iterable[torch.nn.Parameter], total_steps: int):
        """AdamW with linear warm-up and cosine decay over ``total_steps`` optimiser steps."""
        from transformers import get_cosine_schedule_with_warmup

        optimizer = torch.optim.AdamW(params, lr=self.learning_rate, betas=self.adam_betas, weight_decay=self.weight_decay)
        # Rounded down: a run of a few steps starts at its peak rate rather than spending its first step at 0.
        schedule = get_cosine_schedule_with_warmup(optimizer, int(self.warmup_ratio * total_steps), total_steps)
        return optimizer, schedule
