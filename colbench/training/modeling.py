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
        with torch.autocast(input_ids.device.type, dtype=self.autocast or torch.bfloat16,
                            enabled=self.autocast is not None):
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


def prepare_training(accelerator, model, config, examples: int, epochs: int, scorer=None, processes: int | None = None):
    """Everything a training loop steps: (scorer, optimizer, loader of example indices, scheduler,
    total optimiser steps), prepared by ``accelerator`` (activation checkpointing when configured).

    ``scorer``: the model's :func:`sharded_scorer` under ``--shard full`` (accelerate then prepares the
    optimizer and the loader but not the scorer, which FSDP2 already distributes); else None, and the
    scorer is made here and wrapped by accelerate (DDP under several processes). The scheduler is
    stepped by :func:`optimizer_step`, once per optimiser step, never by accelerate (which would step it
    once per process per step, running the schedule N times too fast under N processes). ``processes``: how many
    processes the examples are split across (default: all of them; 1 where every process takes a share of each
    minibatch, as online RL's update does, so that the schedule counts the minibatches)."""
    if config.gradient_checkpointing and scorer is None:
        enable_activation_checkpointing(model)
    model.train()
    if scorer is not None:
        reshard(scorer)  # the optimizer must get the shards, not what a forward left gathered
    params = trainable_parameters(scorer if scorer is not None else model)
    if not params:
        raise RuntimeError("the model has no trainable parameters")
    total_steps = config.optimizer_steps(examples, epochs, processes or accelerator.num_processes)
    optimizer, scheduler = config.optimizer(params, total_steps)
    generator = torch.Generator().manual_seed(config.seed)
    loader = torch.utils.data.DataLoader(list(range(examples)), batch_size=config.batch_size, shuffle=True,
                                         generator=generator, collate_fn=list)
    if scorer is None:
        scorer = TokenLogProbs(model, autocast=config.autocast_dtype(accelerator.device))
        scorer, optimizer, loader = accelerator.prepare(scorer, optimizer, loader)
    else:
        scorer.train()
        optimizer, loader = accelerator.prepare(optimizer, loader)
    return scorer, optimizer, loader, scheduler, total_steps


# ---------------------------------------------------------------- sharding (FSDP2)


def sharding(config, accelerator) -> bool:
    """Whether this run shards its model: ``--shard full`` under several processes."""
    return getattr(config, "shard", "none") == "full" and accelerator.num_processes > 1


def load_device(config, accelerator) -> str:
    """Where to load the model to train: the CPU when it is about to be sharded (fully_shard moves each
    process's shards to its device, one layer at a time), else this process's device."""
    return "cpu" if sharding(config, accelerator) else str(accelerator.device)


def load_dtype(config, accelerator):
    """The weights' dtype as loaded. Sharded on a GPU: float32 (the master weights AdamW updates; the
    layers compute in bfloat16 through FSDP2's MixedPrecisionPolicy) unless --dtype names one."""
    if sharding(config, accelerator) and config.dtype is None and accelerator.device.type == "cuda":
        return "float32"
    return config.dtype


def decoder_layers(model) -> list[nn.Module]:
    """The repeated blocks of a transformers model (its ``_no_split_modules`` classes, e.g. LlamaDecoderLayer)."""
    base = unwrap(model)
    names = set(getattr(base, "_no_split_modules", None) or ())
    layers = [m for m in base.modules() if type(m).__name__ in names]
    if not layers:
        decoder = base.get_decoder()
        layers = list(getattr(decoder, "layers", []))
    if not layers:
        raise ValueError(f"cannot shard {type(base).__name__}: no decoder layers found")
    return layers


def sharded_scorer(accelerator, model, config) -> TokenLogProbs:
    """``model`` sharded over the processes with FSDP2, as the :class:`TokenLogProbs` every trainer runs.

    Each decoder layer is one FSDP unit (gathered for its forward and backward, then freed); the
    scorer is the root unit, holding the rest: embeddings, final norm and output layer (tied or not),
    gathered in float32, so the output layer and log-probs stay float32 as without sharding. On a GPU
    with float32 weights (the default, :func:`load_dtype`) the layers compute in bfloat16 and reduce
    gradients in float32. Gradients are reduce-scattered (averaged) at every backward, so under
    gradient accumulation each process keeps only its shard of them.

    Every process must run the scorer's forwards in step with the others (each gathers a layer from
    all): the trainers give every process the same number of batches.
    """
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    device = accelerator.device
    mesh = init_device_mesh(device.type, (accelerator.num_processes,))
    weights = next(model.parameters()).dtype
    compute = torch.bfloat16 if device.type == "cuda" and weights == torch.float32 and config.dtype is None else None
    layer_policy = MixedPrecisionPolicy(param_dtype=compute, reduce_dtype=torch.float32 if compute else None)
    layers = decoder_layers(model)
    if config.gradient_checkpointing:
        layers = checkpointed(model, layers)
    for layer in layers:
        fully_shard(layer, mesh=mesh, mp_policy=layer_policy)
    scorer = TokenLogProbs(model, autocast=None if compute else config.autocast_dtype(device))
    fully_shard(scorer, mesh=mesh)
    return scorer


def reshard(module) -> None:
    """Free what FSDP2 left gathered: after a forward without backward (reference log-probs, held-out
    scores) the root unit keeps its parameters whole, and ``parameters()`` would give those instead of
    the shards."""
    from torch.distributed.fsdp import FSDPModule

    for m in module.modules():
        if isinstance(m, FSDPModule):
            m.reshard()


def checkpointed(model, layers: list[nn.Module]) -> list[nn.Module]:
    """Each layer replaced by itself under activation checkpointing (torch's checkpoint_wrapper), for
    FSDP2 to shard from outside: its hooks then gather and cast to bfloat16 before the checkpointed
    region, whose recomputation in the backward pass reads the same bfloat16 inputs. (transformers'
    own checkpointing wraps the layer's call from outside FSDP's hooks, so the recomputation gets the
    float32 inputs FSDP2 does not cast again: float32 queries against bfloat16 values.) The saved
    state dict's names are the layers' own: the wrapper's prefix is left out."""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointImpl, checkpoint_wrapper

    parents = {id(child): (parent, name) for parent in model.modules() for name, child in parent.named_children()}
    wrapped = []
    for layer in layers:
        parent, name = parents[id(layer)]
        wrapper = checkpoint_wrapper(layer, checkpoint_impl=CheckpointImpl.NO_REENTRANT)
        setattr(parent, name, wrapper)
        wrapped.append(wrapper)
    unwrap(model).config.use_cache = False
    return wrapped


@contextmanager
def without_checkpoint_wrappers(model):
    """The model with its layers in place of their checkpoint wrappers for the duration (then back):
    what peft's and transformers' saves expect to find (peft matches the adapter's weights by the
    modules' own names)."""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointWrapper

    swapped = [
        (parent, name, child)
        for parent in model.modules()
        for name, child in parent.named_children()
        if isinstance(child, CheckpointWrapper)
    ]
    for parent, name, wrapper in swapped:
        setattr(parent, name, wrapper._checkpoint_wrapped_module)
    try:
        yield model
    finally:
        for parent, name, wrapper in swapped:
            setattr(parent, name, wrapper)


def is_sharded(module) -> bool:
    from torch.distributed.fsdp import FSDPModule

    return isinstance(getattr(module, "module", module), FSDPModule)


def lockstep_batches(accelerator, ids: list, batch_size: int, sharded: bool):
    """This process's share of ``ids`` (every n-th), in batches: (batch, keep). Sharded, every process
    runs as many batches as the busiest one (FSDP2's gathers are collective): a process with fewer
    repeats a batch (``keep`` False: its results are dropped)."""
    n, rank = accelerator.num_processes, accelerator.process_index
    mine = ids[rank::n]
    batches = [(mine[i : i + batch_size], True) for i in range(0, len(mine), batch_size)]
    if sharded and ids:
        most = -(-len(ids[0::n]) // batch_size)
        filler = batches[0][0] if batches else ids[:1]
        batches += [(filler, False)] * (most - len(batches))
    return batches


def full_state_dict(scorer, adapter: bool) -> dict:
    """The sharded model's weights gathered whole on rank 0 (float32, on the CPU; the other ranks get
    an empty dict). Every process must call it. ``adapter``: only the trainable (LoRA) weights."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    options = StateDictOptions(full_state_dict=True, cpu_offload=True, ignore_frozen_params=adapter)
    reshard(scorer)
    state = get_model_state_dict(scorer, options=options)
    # A parameter shared by two modules (tied embeddings and output layer) is gathered twice: make it
    # one tensor again, so the model's save drops the tied copy as it does unsharded.
    first: dict[int, str] = {}
    for name, param in scorer.named_parameters(remove_duplicate=False):
        if first.setdefault(id(param), name) != name and name in state and first[id(param)] in state:
            state[name] = state[first[id(param)]]
    return {k.removeprefix("lm."): v for k, v in state.items()}


def held_bytes(accelerator, scorer, optimizer) -> dict:
    """What each process holds, measured from its local tensors (a sharded parameter's local shard):
    bytes of parameters (all, and trainable) and of optimiser state, one entry per process."""
    from accelerate.utils import gather_object
    from torch.distributed.tensor import DTensor

    def size(t) -> int:
        t = t.to_local() if isinstance(t, DTensor) else t
        return t.numel() * t.element_size()

    params = list(scorer.parameters())
    state = getattr(optimizer, "optimizer", optimizer).state
    mine = {
        "parameter_bytes": sum(size(p) for p in params),
        "trainable_parameter_bytes": sum(size(p) for p in params if p.requires_grad),
        "optimizer_bytes": sum(size(v) for s in state.values() for v in s.values() if torch.is_tensor(v)),
    }
    found = gather_object([mine]) if accelerator.num_processes > 1 else [mine]
    return {k: [f[k] for f in found] for k in mine}


def on_main(state, work):
    """``work()`` run on the main process (``state``: an Accelerator or PartialState), its result handed to every
    process, or the error it raised raised on every process (the others would otherwise wait for it forever)."""
    result, error = None, None
    if state.is_main_process:
        try:
            result = work()
        except Exception as exc:
            error = exc
    if state.num_processes > 1:
        from accelerate.utils import broadcast_object_list

        result, error = broadcast_object_list([result, error])
    if error is not None:
        raise error
    return result


def summed_over_processes(accelerator, values: dict[str, float]) -> dict[str, float]:
    """Each number summed over the processes of an ``accelerate launch`` (every process
    calls it with the same keys): a run's figures are the run's, not one process's share."""
    if accelerator.num_processes == 1:
        return dict(values)
    keys = sorted(values)
    local = torch.tensor([float(values[k]) for k in keys], dtype=torch.float64, device=accelerator.device)
    return dict(zip(keys, accelerator.reduce(local, reduction="sum").tolist()))


def optimizer_step(accelerator, scorer, optimizer, scheduler, loss, max_grad_norm: float) -> dict:
    """Backward (``loss`` None: the caller has run it), then (on an accumulation boundary) clip to
    ``max_grad_norm`` (0: never), step, schedule, zero. Returns the step's learning rate and, on a boundary, the
    gradients' global norm before clipping (over every shard when the model is sharded)."""
    if loss is not None:
        accelerator.backward(loss)
    figures = {"lr": scheduler.get_last_lr()[0]}
    if accelerator.sync_gradients:
        norm = accelerator.clip_grad_norm_(scorer.parameters(), max_grad_norm if max_grad_norm > 0 else float("inf"))
        if norm is not None:  # DeepSpeed reports none before its first step
            figures["grad_norm"] = float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)
    optimizer.step()  # accelerate's optimizer steps and zeroes on a boundary only
    if accelerator.sync_gradients:
        scheduler.step()
    optimizer.zero_grad()
    return figures


@contextmanager
def accumulating(accelerator, model, boundary: bool):
    """One minibatch of an accumulation group whose end the caller knows, in place of ``accelerator.accumulate``
    (which counts minibatches across calls, so a group could spill over into the next online step's update): the
    gradients are synchronised across processes, and the optimiser and the schedule step, exactly when
    ``boundary``."""
    accelerator.gradient_state._set_sync_gradients(boundary)  # what accelerate.accumulate sets from its counter
    if boundary:
        yield
    else:
        with accelerator.no_sync(model):
            yield


def max_over_processes(accelerator, value: float) -> float:
    """The largest of the processes' ``value`` (every process calls it)."""
    if accelerator.num_processes == 1:
        return value
    import torch.distributed as dist

    found = torch.tensor([float(value)], dtype=torch.float64, device=accelerator.device)
    dist.all_reduce(found, op=dist.ReduceOp.MAX)
    return float(found)


def means_over_processes(accelerator, values: dict[str, float]) -> dict[str, float]:
    """Each number averaged over the processes (every process calls it with the same keys): a step's
    loss statistics under several processes are the whole step's, not rank 0's share."""
    if accelerator.num_processes == 1:
        return dict(values)
    return {k: v / accelerator.num_processes for k, v in summed_over_processes(accelerator, values).items()}
