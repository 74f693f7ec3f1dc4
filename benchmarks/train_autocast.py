"""Training speed with bf16 autocast against float32, on SmolLM2-135M, in the same run.

A full fine-tuning step (forward through TokenLogProbs, the trainers' one forward,
backward, AdamW) on a batch of random token ids, alternating the two modes so that a
noisy machine hurts both alike. Prints tokens/s of each and the ratio. On CPUs without
native bfloat16 (no AVX512-BF16 or AMX) autocast is emulated and the ratio drops below 1:
`--autocast auto` then stays off.

    .venv/bin/python benchmarks/train_autocast.py                 # batch 8 x 450 tokens, 3 rounds
"""
from __future__ import annotations

import argparse
import time

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=450)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    from colbench.model_cache import embedded_model_dir
    from colbench.model_refs import load_model
    from colbench.training.config import cpu_has_native_bf16
    from colbench.training.modeling import TokenLogProbs

    torch.manual_seed(0)
    model = load_model(str(embedded_model_dir()), device="cpu", dtype=torch.float32, trainable=True)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6)
    ids = torch.randint(0, 49_000, (args.batch, args.tokens))
    mask, target = torch.ones_like(ids), torch.ones_like(ids, dtype=torch.bool)
    speed: dict[str, list[float]] = {"float32": [], "bf16 autocast": []}
    for _ in range(args.rounds):
        for name, autocast in (("float32", None), ("bf16 autocast", torch.bfloat16)):
            scorer = TokenLogProbs(model, autocast=autocast)
            started = time.perf_counter()
            loss = -scorer(ids, mask, target).mean()
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            speed[name].append(ids.numel() / (time.perf_counter() - started))
    best = {name: max(values) for name, values in speed.items()}
    print(f"native bf16: {cpu_has_native_bf16()}; batch {args.batch} x {args.tokens} tokens, best of {args.rounds}")
    for name, value in best.items():
        print(f"{name:>14}: {value:7.1f} tokens/s")
    print(f"ratio bf16 autocast / float32: {best['bf16 autocast'] / best['float32']:.2f}")


if __name__ == "__main__":
    main()
