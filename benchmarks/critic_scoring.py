"""Critic candidate scoring: shared-prefix (KV cache reuse) against naive full forwards.

16 candidate agent turns (~64 tokens each) follow one dialogue prefix (~1,500 tokens:
the reference solution c plus a few turns). The shared-prefix path runs the prefix
once per model (critic, then reference with the adapter disabled) and only the
candidates' tokens after it; the naive path runs prefix + candidate through the model
for every candidate, in batches of the same size. Both compute the output layer only
at candidate positions, so the difference is the prefix work alone. Same process,
same inputs, run alternately, checked to agree; the ratio is naive time / shared time (target >= 3x).

    python benchmarks/critic_scoring.py [--model tiny|smollm2|PATH] [--prefix-tokens 1500]
        [--candidates 16] [--candidate-tokens 64] [--batch-size 16] [--repeats 3] [--device cpu]

The default model is a tiny random Llama (2 layers, hidden 64) with the real SmolLM2
tokenizer, as in the tests; --model smollm2 uses the embedded 135M model.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch


def build_model(name: str, device: str):
    from transformers import AutoModelForCausalLM

    from colbench.model_refs import load_tokenizer, resolve_model
    from tiny_model import tiny_model_folder

    if name == "tiny":
        name = tiny_model_folder("critic-bench-tiny-")
    source = resolve_model(name)
    tokenizer = load_tokenizer(source)
    model = AutoModelForCausalLM.from_pretrained(source.base, dtype=torch.float32).to(device)
    return model, tokenizer


def make_inputs(tokenizer, prefix_tokens: int, candidates: int, candidate_tokens: int):
    """A realistic dialogue whose critic prefix is about prefix_tokens long, and candidate turns."""
    from colbench.training import data as D
    from colbench.training import sequences as S

    def critic_prefix(dialogue, reference):  # c + the prompt the policy would be given
        prompt = tokenizer.apply_chat_template(S.conversation("backend", dialogue), tokenize=False,
                                               add_generation_prompt=True)
        return D.training_info_ids(tokenizer, reference) + S.encode_text(tokenizer, prompt)

    reference = "\n".join(
        (
            f"def step_{i}(orders, rate):\n    total = sum(o['qty'] * o['price'] for o in orders)\n    return"
            " round(total * (1 + rate / 100), 2)"
        )
        for i in range(40)
    )
    dialogue = [
        {
            "role": "user",
            "content": (
                "I need a function that prices an order with tax. The signature of the function is: def price(orders,"
                " rate)"
            )
        }
    ]
    turn = 0
    while len(critic_prefix(dialogue, reference)) < prefix_tokens:
        dialogue += [
            {"role": "assistant",
             "content": f"Question {turn}: should the tax rate be a percentage, and how should I round the total?"},
            {"role": "user",
             "content": "It is a percentage; round to two decimals. Orders are dicts with qty and price."},
        ]
        turn += 1
    # Shorten c until the prefix fits.
    while len(critic_prefix(dialogue, reference)) > prefix_tokens and "\n" in reference:
        reference = reference.rsplit("\n", 1)[0]
    prefix = critic_prefix(dialogue, reference)
    vocab = [i for i in range(1000, 20000)]
    generator = torch.Generator().manual_seed(1)
    cands = [
        [vocab[int(j)] for j in torch.randint(0, len(vocab), (candidate_tokens,), generator=generator)]
        for _ in range(candidates)
    ]  # sampled ids are scored exactly as they are
    return prefix, cands


def interleaved(first, second, repeats: int):
    """Median seconds of each, run alternately so that load on a shared machine hits both alike."""
    times: tuple[list, list] = ([], [])
    results = [None, None]
    for _ in range(repeats):
        for k, fn in enumerate((first, second)):
            started = time.perf_counter()
            results[k] = fn()
            times[k].append(time.perf_counter() - started)
    return statistics.median(times[0]), results[0], statistics.median(times[1]), results[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--prefix-tokens", type=int, default=1500)
    parser.add_argument("--candidates", type=int, default=16)
    parser.add_argument("--candidate-tokens", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()

    from colbench.training.modeling import attach_lora
    from colbench.training.scoring import CriticModel

    model, tokenizer = build_model(args.model, args.device)
    model = attach_lora(model, rank=16, alpha=32)
    with torch.no_grad():  # a critic that differs from its reference
        for name, parameter in model.named_parameters():
            if "lora_B" in name:
                parameter.normal_(std=0.02)
    critic = CriticModel(model, tokenizer)
    prefix, cands = make_inputs(tokenizer, args.prefix_tokens, args.candidates, args.candidate_tokens)

    with torch.inference_mode():
        critic.score_candidates(prefix, cands[:2], batch_size=args.batch_size)  # warm-up
        shared_s, shared, naive_s, naive = interleaved(
            lambda: critic.score_candidates(prefix, cands, batch_size=args.batch_size),
            lambda: critic.score_candidates_naive(prefix, cands, batch_size=args.batch_size),
            args.repeats,
        )
    worst = max(abs(a.advantage - b.advantage) for a, b in zip(shared, naive))
    tokens = sum(s.tokens for s in shared)
    print(
        f"model {args.model} on {args.device}: prefix {len(prefix)} tokens, {len(cands)} candidates x "
        f"{tokens // len(cands)} tokens, batch {args.batch_size}, median of {args.repeats}"
    )
    print(f"shared prefix : {shared_s:8.3f} s  ({tokens / shared_s:8.1f} candidate tokens/s)")
    print(f"naive forwards: {naive_s:8.3f} s  ({tokens / naive_s:8.1f} candidate tokens/s)")
    print(f"speed-up      : {naive_s / shared_s:8.2f}x   (max |advantage difference| {worst:.2e})")


if __name__ == "__main__":
    main()
