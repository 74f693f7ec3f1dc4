"""Whether CPU training here lands on the same bits: four AdamW steps of the embedded 135M model on fixed random
tokens, then the sha256 of its weights (amendment 3 of studies/credit-signals/plan.md).

Two runs on one machine print the same digest; on a machine with AVX-512, ATEN_CPU_CAPABILITY=avx2 (PyTorch's AVX2
kernels) prints another. So a study that rebuilds its models in a later session pins the kernels
(scripts/credit_signals.sh does). The pin holds on one machine only: under it, the machine of 2026-12-06 printed
12b0f53f… and another (2026-12-07, AMX and AVX-512 BF16 too) 79012cde…, with transformers 5.23-5.25 alike
(studies/backend-lite-4/plan.md, amendment 3).

    .venv/bin/python scripts/kernel_bits.py
    ATEN_CPU_CAPABILITY=avx2 .venv/bin/python scripts/kernel_bits.py
"""
from __future__ import annotations

import hashlib


def main() -> None:
    import torch

    from colbench.model_refs import load_model

    torch.manual_seed(0)
    model = load_model("smollm2", device="cpu")
    model.train()
    for parameter in model.parameters():
        parameter.requires_grad_(True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    tokens = torch.Generator().manual_seed(0)
    for _ in range(4):
        ids = torch.randint(0, model.config.vocab_size, (4, 256), generator=tokens)
        model(input_ids=ids, labels=ids).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    digest = hashlib.sha256()
    for parameter in model.parameters():
        digest.update(parameter.detach().numpy().tobytes())
    print(f"{digest.hexdigest()}  kernels {torch.backends.cpu.get_cpu_capability()}, {torch.get_num_threads()} threads")


if __name__ == "__main__":
    main()
