"""Models for training: loading, LoRA, activation checkpointing, and token log-probs.

:class:`TokenLogProbs` is the one forward every trainer uses. It runs the model's
decoder over the whole sequence, then the output layer only at the positions whose
next token is a target (agent tokens), in float32. On SmolLM2 the 49,152-wide output
layer is most of the cost, and agent tokens are a fraction of a critic's input (c and
the human turns are not), so this is both faster and lighter than full logits.

With ``autocast`` (a dtype, e.g. bfloat16) the decoder runs under ``torch.autocast``
while the output layer stays float32: log-probs are differences of logits near 20, where
bfloat16's 3 significant digits would cost ~0.1 nat per token.

It is an ``nn.Module`` so that ``accelerate`` can wrap it (DDP) and its forward is
what runs under the wrapper.
"""
from __future__ import annotations

from contextlib import contextmanager

import torch
from torch import nn

from colbench.model_refs import ModelSource, load_model, quiet_peft_renames
from colbench.training.losses import token_logps_from_logits


def unwrap(model):
    """The plain transformers model under DDP/accelerate and peft wrappers."""
    model = getattr(model, "module", model)
    if isinstance(model, TokenLogProbs):
        model = model.lm
    model = getattr(model, "module", model)
    get_base = getattr(model, "get_base_model", None)
    return get_base() if callable(get_base) else model


def is_peft(model) -> bool:
    model = getattr(model, "module", model)
    if isinstance(model, TokenLogProbs):
        model = model.lm
    return hasattr(model, "disable_adapter") and hasattr(model, "peft_config")


class TokenLogProbs(nn.Module):
    """``forward(input_ids, attention_mask, target_mask) → [batch, positions]`` float32 log-probs.

    Entry ``[b, i]`` is ``log p(input_ids[b, i] | input_ids[b, :i])`` where
    ``target_mask[b, i]`` is set, else 0. Position 0 is never a target.
    """

    def __init__(self, lm, autocast: torch.dtype | None = None):
        super().__init__()
        self.lm = lm
        self.autocast = autocast

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, target_mask: torch.Tensor) -> torch.Tensor:
        base = unwrap(self.lm)
        decoder, head = base.get_decoder(), base.get_output_embeddings()
        with torch.autocast(input_ids.device.type, dtype=self.autocast or torch.bfloat16, enabled=self.autocast is not None):
            hidden = decoder(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).last_hidden_state
        select = target_mask[:, 1:].bool()
        states = hidden[:, :-1][select]
        logits = head(states.to(head.weight.dtype))
        logits = softcap(logits, base.config)
        picked = token_logps_from_logits(logits, input_ids[:, 1:][select])
        out = torch.zeros(select.shape, dtype=torch.float32, device=picked.device).masked_scatter(select, picked)
        return torch.cat([torch.zeros_like(out[:, :1]), out], dim=1)


def softcap(logits: torch.Tensor, config) -> torch.Tensor:
    cap = getattr(config, "final_logitsoftcapping", None)
    if cap:
        logits = torch.tanh(logits.float() / cap) * cap
    return logits


@contextmanager
def adapter_disabled(model):
    """The frozen reference: the same peft model with its adapter off (no second copy)."""
    model = getattr(model, "module", model)
    if isinstance(model, TokenLogProbs):
        model = model.lm
    model = getattr(model, "module", model)
    with model.disable_adapter():
        yield


@contextmanager
def evaluating(model):
    """Eval mode (no dropout) for the duration, then back to what it was."""
    was = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was)


def load_base(source: ModelSource, device: str, dtype=None, *, trainable: bool = True):
    """A transformers model to train or to serve as reference.

    A source with an adapter (a LoRA policy checkpoint used as the starting point) is
    merged into its base: the result is a plain model that a new adapter can go on.
    """
    model = load_model(source, device=device, dtype=dtype, trainable=trainable)
    if source.adapter:
        model = model.merge_and_unload()
    model.train(trainable)
    model.requires_grad_(trainable)
    return model


def attach_lora(model, rank: int, alpha: int, dropout: float = 0.0, target_modules="all-linear"):
    """A fresh LoRA adapter on every linear layer but the output layer (peft's "all-linear").

    peft keeps the adapter's weights in float32 even on a bfloat16 model.
    """
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(r=rank, lora_alpha=alpha, lora_dropout=dropout, target_modules=target_modules, bias="none")
    with quiet_peft_renames():
        return get_peft_model(model, config)


def load_adapter(model, path: str, *, trainable: bool):
    from peft import PeftModel

    with quiet_peft_renames():
        return PeftModel.from_pretrained(model, path, is_trainable=trainable)


def enable_activation_checkpointing(model) -> None:
    """Recompute activations in the backward pass (less memory, ~30% more time)."""
    base = unwrap(model)
    kwargs = {"use_reentrant": False}
    if hasattr(base, "activation_checkpointing_enable"):
        base.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:  # transformers < 5
        base.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    base.config.use_cache = False


def trainable_parameters(model) -> list[nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad]


def model_to_train(source, parent, config, device: str, *, lora_over_full: bool):
    """The model a run trains: the base with a fresh LoRA adapter (or all of it with ``config.full``),
    or, continuing ``parent`` (Checkpoint, TrainingRun), its adapter, or its full weights.

    ``lora_over_full``: a full-weight parent may get a fresh adapter (a policy); otherwise it must
    be continued with ``full`` (a critic, whose frozen reference must stay the initial model).
    """
    from colbench.model_refs import ModelSource

    def fresh_lora(model):
        return model if config.full else attach_lora(model, rank=config.lora_rank, alpha=2 * config.lora_rank)

    if parent is None:
        return fresh_lora(load_base(source, device, config.dtype))
    checkpoint, run = parent
    if checkpoint.adapter:
        if config.full:
            raise ValueError(f"ckpt:{checkpoint.id} is a LoRA {run.kind} checkpoint; continue it without --full")
        return load_adapter(load_base(source, device, config.dtype), checkpoint.path, trainable=True)
    if not (config.full or lora_over_full):
        raise ValueError(f"ckpt:{checkpoint.id} holds full weights; continue it with --full")
    return fresh_lora(load_base(ModelSource(base=checkpoint.path, ref=f"ckpt:{checkpoint.id}"), device, config.dtype))


def accelerator_for(config):
    """Seeded, with the config's gradient accumulation, on the CPU when the config says so."""
    from accelerate import Accelerator

    torch.manual_seed(config.seed)
    return Accelerator(gradient_accumulation_steps=config.grad_accum, cpu=config.on_cpu)


def prepare_training(accelerator, model, config, examples: int, epochs: int):
    """Everything a training loop steps: (scorer, optimizer, loader of example indices, scheduler,
    total optimiser steps), prepared by ``accelerator`` (activation checkpointing when configured)."""
    if config.gradient_checkpointing:
        enable_activation_checkpointing(model)
    model.train()
    params = trainable_parameters(model)
    if not params:
        raise RuntimeError("the model has no trainable parameters")
    total_steps = config.optimizer_steps(examples, epochs, accelerator.num_processes)
    optimizer, scheduler = config.optimizer(params, total_steps)
    generator = torch.Generator().manual_seed(config.seed)
    loader = torch.utils.data.DataLoader(list(range(examples)), batch_size=config.batch_size, shuffle=True, generator=generator, collate_fn=list)
    scorer = TokenLogProbs(model, autocast=config.autocast_dtype(accelerator.device))
    scorer, optimizer, loader, scheduler = accelerator.prepare(scorer, optimizer, loader, scheduler)
    return scorer, optimizer, loader, scheduler, total_steps


def summed_over_processes(accelerator, values: dict[str, float]) -> dict[str, float]:
    """Each number summed over the processes of an ``accelerate launch`` (every process
    calls it with the same keys): a run's figures are the run's, not one process's share."""
    if accelerator.num_processes == 1:
        return dict(values)
    keys = sorted(values)
    local = torch.tensor([float(values[k]) for k in keys], dtype=torch.float64, device=accelerator.device)
    return dict(zip(keys, accelerator.reduce(local, reduction="sum").tolist()))


def optimizer_step(accelerator, scorer, optimizer, scheduler, loss, max_grad_norm: float) -> dict:
    """Backward, then (on an accumulation boundary) clip to ``max_grad_norm`` (0: never), step, schedule, zero.
    Returns the step's learning rate and, on a boundary, the gradients' global norm before clipping."""
    accelerator.backward(loss)
    figures = {"lr": scheduler.get_last_lr()[0]}
    if accelerator.sync_gradients:
        norm = accelerator.clip_grad_norm_(scorer.parameters(), max_grad_norm if max_grad_norm > 0 else float("inf"))
        figures["grad_norm"] = float(norm)
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad()
    return figures
