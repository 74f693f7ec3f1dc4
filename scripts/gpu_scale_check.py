"""--shard full's GPU path on one GPU, and the throughput docs/scale.md's time estimate rests on.

1. mixed precision: colbench's sharded_scorer (FSDP2 over a one-GPU mesh, nccl) on the tests' tiny Llama,
   weights float32: the decoder layers compute in bfloat16, the output layer in float32; the log-probs
   agree with an unsharded float32 copy within bf16's error; a few AdamW steps; the full state dict
   gathers in float32 with the tied weights once.
2. throughput: an 8B-shaped Llama (Llama-3.1-8B's widths, vocabulary and head, --layers of its 32
   decoder layers, random weights, nothing downloaded) trains full fine-tuning steps as --shard full
   runs it: float32 master weights, bf16 compute, activation checkpointing, AdamW, sequence --seq.
   Prints tokens/s, model TFLOP/s (6 x parameters x tokens + 12 x layers x width x seq x tokens, PaLM's
   count, the embedding lookup left out), MFU against the H100's 989 TFLOP/s dense bf16, and peak memory.

    python3 scripts/gpu_scale_check.py            # on a CUDA machine, colbench importable
    python3 scripts/gpu_scale_check.py --device cpu --layers 1 --seq 256 --width 256   # the script's own bugs
"""
from __future__ import annotations

import argparse
import os
import socket
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
try:
    from plugins.models import TINY_CONFIG  # noqa: E402  (the tests' tiny Llama)
except ImportError:  # a GPU machine without pytest: the same shape
    TINY_CONFIG = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=2,
                       max_position_embeddings=2048, tie_word_embeddings=True, initializer_range=0.5)

H100_BF16_DENSE = 989e12  # NVIDIA H100 SXM, dense bf16 (1,979 with 2:4 sparsity)


def process_group(device: str) -> None:
    import torch.distributed as dist

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
    dist.init_process_group("nccl" if device == "cuda" else "gloo", rank=0, world_size=1)


def mixed_precision(device: str) -> str:
    from transformers import LlamaConfig, LlamaForCausalLM

    from colbench.training.modeling import TokenLogProbs, full_state_dict, sharded_scorer

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=49152, **TINY_CONFIG)
    model = LlamaForCausalLM(config)  # float32, on the CPU, as --shard full loads it
    reference = LlamaForCausalLM(config).to(device)
    reference.load_state_dict(model.state_dict())
    accelerator = SimpleNamespace(device=torch.device(device), num_processes=1)
    settings = SimpleNamespace(gradient_checkpointing=True, dtype=None, autocast_dtype=lambda d: None)
    seen = {}
    layer = model.model.layers[0].self_attn.q_proj  # before sharding wraps the layers for checkpointing
    scorer = sharded_scorer(accelerator, model, settings)
    def note(name):
        def hook(module, inputs, output) -> None:  # what a module computed in: its input's and weight's dtypes
            seen.setdefault(name, (inputs[0].dtype, module.weight.dtype))
        return hook

    layer.register_forward_hook(note("layer"))
    model.lm_head.register_forward_hook(note("head"))
    ids = torch.randint(0, 49152, (2, 64), device=device)
    mask = torch.ones_like(ids)
    target = torch.ones_like(ids, dtype=torch.bool)
    with torch.no_grad():
        sharded = scorer(ids, mask, target)
        exact = TokenLogProbs(reference)(ids, mask, target)
    delta = (sharded - exact).abs()[:, 1:]
    expected_layer = (torch.bfloat16, torch.bfloat16) if device == "cuda" else (torch.float32, torch.float32)
    assert seen["layer"] == expected_layer, seen
    assert seen["head"] == (torch.float32, torch.float32), seen
    assert float(delta.mean()) < 0.25, float(delta.mean())
    from colbench.training.modeling import reshard

    reshard(scorer)
    optimizer = torch.optim.AdamW(scorer.parameters(), lr=1e-3)
    losses = []
    for _ in range(4):
        loss = -scorer(ids, mask, target).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(float(loss))
    assert losses[-1] < losses[0], losses
    state = full_state_dict(scorer, adapter=False)
    assert all(v.dtype == torch.float32 and v.device.type == "cpu" for v in state.values())
    assert state["lm_head.weight"] is state["model.embed_tokens.weight"]  # tied: one tensor, saved once
    return (
        f"layers compute in {seen['layer'][0]}, output layer in {seen['head'][0]}; log-probs vs float32: mean |Δ|"
        f" {float(delta.mean()):.4f}, max {float(delta.max()):.3f} nat; loss {losses[0]:.3f} -> {losses[-1]:.3f} in 4"
        f" steps; {len(state)} tensors gathered"
    )


def throughput(device: str, layers: int, seq: int, width: int, steps: int) -> str:
    from transformers import LlamaConfig, LlamaForCausalLM

    from colbench.training.modeling import reshard, sharded_scorer

    full_width = width == 4096
    config = LlamaConfig(vocab_size=128256 if full_width else 8192, hidden_size=width,
                         intermediate_size=int(width * 3.5),
                         num_hidden_layers=layers, num_attention_heads=32 if full_width else 8,
                         num_key_value_heads=8 if full_width else 2,
                         max_position_embeddings=max(seq, 8192), tie_word_embeddings=False, rope_theta=500000.0)
    with torch.device("cpu"):
        model = LlamaForCausalLM(config)
    params = sum(p.numel() for p in model.parameters())
    embedding = model.model.embed_tokens.weight.numel()
    accelerator = SimpleNamespace(device=torch.device(device), num_processes=1)
    settings = SimpleNamespace(gradient_checkpointing=True, dtype=None, autocast_dtype=lambda d: None)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    scorer = sharded_scorer(accelerator, model, settings)
    reshard(scorer)
    scorer.train()
    optimizer = torch.optim.AdamW(scorer.parameters(), lr=1e-6, betas=(0.9, 0.95))
    ids = torch.randint(0, config.vocab_size, (1, seq), device=device)
    mask = torch.ones_like(ids)
    target = torch.ones_like(ids, dtype=torch.bool)

    def step():
        loss = -scorer(ids, mask, target).mean()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(scorer.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()

    step()  # warm-up: allocations, optimiser state
    if device == "cuda":
        torch.cuda.synchronize()
    started = time.perf_counter()
    for _ in range(steps):
        step()
    if device == "cuda":
        torch.cuda.synchronize()
    seconds = (time.perf_counter() - started) / steps
    tokens = seq / seconds
    flops = (6 * (params - embedding) + 12 * layers * width * seq) * tokens
    peak = torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else float("nan")
    return (
        f"{layers} layers of width {width} + embeddings and head: {params / 1e9:.2f}B parameters; seq {seq}:"
        f" {seconds * 1000:.0f} ms/step, {tokens:,.0f} tokens/s, {flops / 1e12:.0f} model TFLOP/s, MFU"
        f" {flops / H100_BF16_DENSE:.1%} of 989; peak {peak:.1f} GiB"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--seq", type=int, default=4096)
    parser.add_argument("--width", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
    process_group(args.device)
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name() if args.device == 'cuda' else 'cpu'}", flush=True)
    failed = False
    for name, check in (("mixed precision", lambda: mixed_precision(args.device)),
                        ("throughput", lambda: throughput(args.device, args.layers, args.seq, args.width, args.steps))):
        try:
            print(f"PASS {name}: {check()}", flush=True)
        except Exception as exc:  # noqa: BLE001 - each check reports, then the next runs
            import traceback

            traceback.print_exc()
            print(f"FAIL {name}: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}", flush=True)
            failed = True
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
