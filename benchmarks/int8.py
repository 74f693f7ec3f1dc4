"""int8 against float32 in CTranslate2, per GEMM backend: speed, and how far int8's log-probs drift.

For each backend setting (a child process each, since CTranslate2 picks its backend when it
loads), on the embedded SmolLM2-135M-Instruct and the backend rollout's prompts:

- generated tokens/s of float32 and of int8 (16 prompts x 96 new tokens by default, one
  batch, temperature 1), and their ratio;
- int8's per-token log-prob gap against the float32 policy on int8's own samples (the
  transformers engine's teacher forcing, which float32 CTranslate2 matches within 1e-3):
  mean and max, in nats.

The settings: this machine's default; oneDNN capped at AVX2 (what an AVX2-only AMD CPU runs,
`CT2_USE_MKL=0 ONEDNN_MAX_CPU_ISA=AVX2`); MKL forced (`CT2_USE_MKL=1`). Run on idle cores:

    python benchmarks/int8.py [--settings default,onednn-avx2,mkl] [--prompts 16] [--max-new-tokens 96]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

SETTINGS = {
    "default": {},
    "onednn-avx2": {"CT2_USE_MKL": "0", "ONEDNN_MAX_CPU_ISA": "AVX2"},
    "onednn-avx512-no-vnni": {"CT2_USE_MKL": "0", "ONEDNN_MAX_CPU_ISA": "AVX512_CORE"},
    "mkl": {"CT2_USE_MKL": "1"},
}


def measure(args) -> dict:
    sys.path.insert(0, str(Path(__file__).parent))
    from rollout import benchmark_conversations

    from colbench.engines.base import SamplingParams
    from colbench.engines.ct2 import CT2Engine
    from colbench.engines.ct2_cpu import ct2_backend
    from colbench.engines.hf import HFEngine

    conversations = benchmark_conversations(args.prompts)
    params = SamplingParams(temperature=1.0, max_new_tokens=args.max_new_tokens, seed=1)
    figures = {"backend": ct2_backend().summary()}
    samples = {}
    for compute_type in ("float32", "int8"):
        engine = CT2Engine(args.model, compute_type=compute_type, max_batch_size=args.prompts)
        engine.generate(conversations[:1], SamplingParams(max_new_tokens=2, seed=0))  # warm-up
        started = time.perf_counter()
        generations = engine.generate(conversations, params)
        seconds = time.perf_counter() - started
        engine.close()
        tokens = sum(len(s.token_ids) for g in generations for s in g.samples)
        figures[f"{compute_type}_tokens_per_s"] = round(tokens / seconds, 1)
        samples[compute_type] = generations
    reference = HFEngine(args.model, device="cpu")
    int8 = samples["int8"]
    forced = reference.logprobs([g.prompt_text for g in int8], [g.samples[0].token_ids for g in int8])
    gaps = [abs(a - b) for g, f in zip(int8, forced) for a, b in zip(g.samples[0].token_logprobs, f)]
    figures.update(int8_mean_gap=round(sum(gaps) / len(gaps), 3), int8_max_gap=round(max(gaps), 3),
                   int8_speed_ratio=round(figures["int8_tokens_per_s"] / figures["float32_tokens_per_s"], 2))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--settings", default=",".join(SETTINGS))
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # a child: measure here
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args)))
        return
    rows = []
    for name in args.settings.split(","):
        command = [sys.executable, __file__, "--one", "--model", args.model, "--prompts", str(args.prompts),
                   "--max-new-tokens", str(args.max_new_tokens)]
        done = subprocess.run(command, env={**os.environ, **SETTINGS[name]}, capture_output=True, text=True,
                              check=True)
        rows.append({"setting": name, **json.loads(done.stdout.strip().splitlines()[-1])})
        print(json.dumps(rows[-1]), flush=True)
    print("\n| setting | backend | float32 tok/s | int8 tok/s | int8/float32 | int8 gap mean / max (nats) |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['setting']} | {r['backend']} | {r['float32_tokens_per_s']} | {r['int8_tokens_per_s']} |"
              f" {r['int8_speed_ratio']}x | {r['int8_mean_gap']} / {r['int8_max_gap']} |")


if __name__ == "__main__":
    main()
