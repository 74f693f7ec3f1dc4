"""Our DPO step against TRL's DPOTrainer: tokens/s and peak memory, same model, same batch.

One run, three worker processes (so each one's peak memory is its own), on the very
same token ids (TRL tokenizes the pairs first; its ids are what the others train on):

- ``trl``: ``trl.DPOTrainer`` with a peft LoRA config (reference = adapter disabled,
  computed on the fly each step), loss sigmoid DPO + 0.01 · SFT (NLL on chosen).
- ``ours``: the same step with our code (TokenLogProbs + policy_dpo_loss), the reference
  also computed on the fly with the adapter disabled: the like-for-like comparison.
- ``ours-recipe``: ``PolicyTrainer`` exactly as ``colbench policy fit`` runs it: the
  reference log-probs are computed once before training, then each step is one
  forward/backward. Its tokens/s is given per step and with the reference pass spread
  over the steps.

All: LoRA rank r (α = 2r) on every linear layer but the output layer, AdamW, same lr,
β = 0.1, float32 on CPU (bfloat16 weights for ours, bf16 autocast for TRL on CUDA),
no activation checkpointing unless --gradient-checkpointing. Tokens per step = the
chosen and rejected sequences' lengths (prompt + completion) summed over the batch.
Peak memory: on CUDA the peak allocated during the steps; on CPU the peak resident
set size during the steps, sampled every 2 ms, and its rise over the RSS just before
the first step. The ratio printed is ours ÷ TRL tokens/s (target ≥ 1.0x).

    python benchmarks/dpo_step.py [--model tiny|smollm2|PATH] [--pairs 4] [--prompt-tokens 256]
        [--completion-tokens 64] [--steps 3] [--warmup 1] [--lora-rank 16] [--device cpu]
        [--gradient-checkpointing] [--repeats 1]

Needs ``trl`` (a benchmark-only dependency: pip install trl).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import torch

LR = 1e-4
BETA = 0.1
NLL = 0.01


# ---------------------------------------------------------------- inputs


def model_folder(name: str) -> str:
    from colbench.model_refs import resolve_model
    from tiny_model import tiny_model_folder

    if name != "tiny":
        return resolve_model(name).base
    return tiny_model_folder("dpo-bench-tiny-")


def make_pairs(folder: str, count: int, prompt_tokens: int, completion_tokens: int) -> list[dict]:
    """Text pairs: a chat-templated dialogue prompt of about prompt_tokens, two different completions."""
    from transformers import AutoTokenizer

    from colbench.training.sequences import conversation

    tokenizer = AutoTokenizer.from_pretrained(folder)
    words = ("weight", "express", "rate", "total", "shipping", "round", "kilograms", "price", "zone", "discount")
    pairs = []
    for i in range(count):
        dialogue = [{"role": "user", "content": (
            f"I need a function for shop {i} that works out shipping. The signature of the function is: def"
            " ship(weight, express)"
        )}]
        k = 0
        while len(tokenizer(tokenizer.apply_chat_template(conversation("backend", dialogue), tokenize=False,
                                                          add_generation_prompt=True),
                                                          add_special_tokens=False)["input_ids"]) < prompt_tokens:
            dialogue += [
                {"role": "assistant",
                 "content": f"Question {k}: is the {words[(i + k) % 10]} in {words[(i + 2 * k) % 10]}?"},
                {"role": "user", "content": f"Yes, and round the {words[(i + 3 * k) % 10]} to {k % 3} decimals."},
            ]
            k += 1
        prompt = tokenizer.apply_chat_template(conversation("backend", dialogue), tokenize=False,
                                               add_generation_prompt=True)

        def completion(seed: int) -> str:
            text, n = "I WANT TO ANSWER:\ndef ship(weight, express):\n", 0
            while len(tokenizer(text, add_special_tokens=False)["input_ids"]) < completion_tokens - 1:
                text += f"    x{n} = weight * {seed + n} + {words[(seed + n) % 10]!r}.__len__()\n"
                n += 1
            return text

        pairs.append({"prompt": prompt, "chosen": completion(i), "rejected": completion(i + 97)})
    return pairs


# ---------------------------------------------------------------- measuring


class Peak:
    """Peak memory during the steps: CUDA allocated, or CPU RSS sampled every 2 ms."""

    def __init__(self, device: str):
        self.cuda = device.startswith("cuda")
        self.peak = 0
        self.base = 0
        self._stop = threading.Event()

    @staticmethod
    def rss() -> int:
        with open("/proc/self/statm") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def start(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self.base = torch.cuda.memory_allocated()
            return
        self.base = self.peak = self.rss()

        def sample():
            while not self._stop.wait(0.002):
                self.peak = max(self.peak, self.rss())

        self._thread = threading.Thread(target=sample, daemon=True)
        self._thread.start()

    def stop(self) -> dict:
        if self.cuda:
            torch.cuda.synchronize()
            self.peak = torch.cuda.max_memory_allocated()
        else:
            self._stop.set()
            self._thread.join()
            self.peak = max(self.peak, self.rss())
        return {"peak_mib": self.peak / 2**20, "rise_mib": (self.peak - self.base) / 2**20,
                "kind": "cuda allocated" if self.cuda else "cpu rss"}


def summary(times: list[float], tokens: list[int], warmup: int, extra: dict | None = None) -> dict:
    t, n = times[warmup:], tokens[warmup:]
    return {"steps": len(t), "seconds_per_step": sum(t) / len(t), "tokens_per_step": sum(n) / len(n),
            "tokens_per_second": sum(n) / sum(t)} | (extra or {})


# ---------------------------------------------------------------- workers


def worker_trl(args, pairs: list[dict]) -> dict:
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import DPOConfig, DPOTrainer

    cuda = args.device.startswith("cuda")
    tokenizer = AutoTokenizer.from_pretrained(args.folder)
    model = AutoModelForCausalLM.from_pretrained(args.folder, dtype=torch.float32).to(args.device)
    config = DPOConfig(
        output_dir=tempfile.mkdtemp(prefix="dpo-bench-trl-"), per_device_train_batch_size=args.pairs,
        max_steps=args.warmup + args.steps,
        learning_rate=LR, lr_scheduler_type="constant", warmup_steps=0, beta=BETA, loss_type=["sigmoid", "sft"],
        loss_weights=[1.0, NLL],
        max_length=None, report_to="none", logging_steps=10_000, save_strategy="no", use_cpu=not cuda, bf16=cuda,
        gradient_checkpointing=args.gradient_checkpointing, dataloader_num_workers=0, seed=0, adam_beta1=0.9,
        adam_beta2=0.95,
        max_grad_norm=1.0, dataset_num_proc=None, remove_unused_columns=False,
    )
    lora = LoraConfig(r=args.lora_rank, lora_alpha=2 * args.lora_rank, lora_dropout=0.0, target_modules="all-linear",
                      bias="none")
    trainer = DPOTrainer(model=model, args=config, train_dataset=Dataset.from_list(pairs), processing_class=tokenizer,
                         peft_config=lora)
    data = trainer.train_dataset
    ids = [
        {"prompt_ids": r["prompt_ids"], "chosen_ids": r["chosen_ids"], "rejected_ids": r["rejected_ids"]} for r in data
    ]
    Path(args.ids).write_text(json.dumps(ids))
    # The trainer reads pairs in a shuffled order; the token count is the same per batch on average,
    # so count each step's own tokens from its input batch.
    times, tokens, peak = [], [], Peak(args.device)

    class Clock(TrainerCallback):
        def on_step_begin(self, *a, **k):
            if cuda:
                torch.cuda.synchronize()
            if len(times) == args.warmup and not hasattr(self, "started"):
                self.started = True
                peak.start()
            self.t0 = time.perf_counter()

        def on_step_end(self, *a, **k):
            if cuda:
                torch.cuda.synchronize()
            times.append(time.perf_counter() - self.t0)

    original = trainer.compute_loss

    def counting(model, inputs, *a, **k):
        tokens.append(int(inputs["attention_mask"].sum()))
        return original(model, inputs, *a, **k)

    trainer.compute_loss = counting
    trainer.add_callback(Clock())
    trainer.train()
    memory = peak.stop()
    return summary(times, tokens, args.warmup,
                   {"memory": memory,
                    "trainable_parameters": sum(p.numel() for p in trainer.model.parameters() if p.requires_grad)})


def _our_items(args):
    from colbench.training.trainer import PairItem
    from colbench.training.sequences import turn_row

    rows = json.loads(Path(args.ids).read_text())
    return [
        PairItem(
            [turn_row([], r["prompt_ids"], r["chosen_ids"], None)],
            [turn_row([], r["prompt_ids"], r["rejected_ids"], None)]
        )
        for r in rows
    ]


def worker_ours(args) -> dict:
    """Like for like: the reference forward (adapter disabled) inside every step."""
    from colbench.model_refs import ModelSource, load_tokenizer
    from colbench.training.losses import sequence_logps
    from colbench.training.modeling import (
        TokenLogProbs,
        adapter_disabled,
        attach_lora,
        enable_activation_checkpointing,
        load_base
    )
    from colbench.training.data import collate
    from colbench.training.losses import policy_dpo_loss

    cuda = args.device.startswith("cuda")
    torch.manual_seed(0)
    items = _our_items(args)
    source = ModelSource(base=args.folder)
    tokenizer = load_tokenizer(source)
    model = attach_lora(load_base(source, args.device), rank=args.lora_rank, alpha=2 * args.lora_rank)
    if args.gradient_checkpointing:
        enable_activation_checkpointing(model)
    model.train()
    scorer = TokenLogProbs(model)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=LR, betas=(0.9, 0.95))
    times, tokens, peak = [], [], Peak(args.device)
    for step in range(args.warmup + args.steps):
        batch = items[step * args.pairs : (step + 1) * args.pairs]
        seqs = [it.chosen[0] for it in batch] + [it.rejected[0] for it in batch]
        owner = torch.arange(2 * len(batch), device=args.device)
        if step == args.warmup:
            peak.start()
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        ids, mask, turns = (t.to(args.device) for t in collate(seqs, tokenizer.pad_token_id))
        target = turns >= 0
        with torch.no_grad(), adapter_disabled(model):
            ref = sequence_logps(scorer(ids, mask, target), target)
        logps = scorer(ids, mask, target)
        loss, _ = policy_dpo_loss(logps, turns, owner, ref[: len(batch)], ref[len(batch) :], BETA, NLL)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        optimizer.zero_grad()
        if cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        tokens.append(int(mask.sum()))
    memory = peak.stop()
    return summary(times, tokens, args.warmup,
                   {"memory": memory, "trainable_parameters": sum(p.numel() for p in params)})


def worker_recipe(args) -> dict:
    """PolicyTrainer as `colbench policy fit` runs it: reference log-probs once, then the steps."""
    from colbench.model_refs import ModelSource
    from colbench.training.trainer import PolicyConfig, PolicyTrainer

    cuda = args.device.startswith("cuda")
    items = _our_items(args)[: args.pairs * (args.warmup + args.steps)]
    config = PolicyConfig(lr=LR, epochs=1, batch_size=args.pairs, lora_rank=args.lora_rank, device=args.device,
                          warmup_ratio=0.0,
                          gradient_checkpointing=args.gradient_checkpointing, max_len=100_000)
    times, tokens, peak = [], [], Peak(args.device)
    clock = {"t": 0.0}

    def on_progress(stage, done, total, info):
        if cuda:
            torch.cuda.synchronize()
        now = time.perf_counter()
        times.append(now - clock["t"])
        clock["t"] = now
        if done == args.warmup:
            peak.start()
            clock["t"] = time.perf_counter()

    recipe = PolicyTrainer(None, config, "sweet", ModelSource(base=args.folder), None, on_progress)
    recipe.setup_model()
    t0 = time.perf_counter()
    recipe.setup_training(items)  # computes the reference log-probs
    reference_seconds = time.perf_counter() - t0
    lengths = {id(it): sum(len(row.input_ids) for row in it.chosen + it.rejected) for it in items}
    original = recipe.step_loss

    def counting(scorer, batch):
        tokens.append(sum(lengths[id(recipe.items[i])] for i in batch))
        return original(scorer, batch)

    recipe.step_loss = counting
    if args.warmup == 0:
        peak.start()
    clock["t"] = time.perf_counter()
    recipe.train()
    memory = peak.stop()
    result = summary(times, tokens, args.warmup, {"memory": memory, "reference_seconds": reference_seconds})
    per_step_reference = reference_seconds / max(len(times), 1)
    result["tokens_per_second_with_reference"] = result["tokens_per_step"] / (
        result["seconds_per_step"] + per_step_reference
    )
    return result


# ---------------------------------------------------------------- driver


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="tiny",
                        help="tiny (random 2-layer Llama, SmolLM2 tokenizer), smollm2, or a model folder")
    parser.add_argument("--pairs", type=int, default=4, help="pairs per step (batch)")
    parser.add_argument("--prompt-tokens", type=int, default=256)
    parser.add_argument("--completion-tokens", type=int, default=64)
    parser.add_argument("--steps", type=int, default=3, help="measured steps")
    parser.add_argument("--warmup", type=int, default=1, help="unmeasured steps first")
    parser.add_argument("--lora-rank", type=int, default=16)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--gradient-checkpointing", action="store_true")
    parser.add_argument("--repeats", type=int, default=1,
                        help="rounds of the three workers; each worker's best round is reported")
    parser.add_argument("--worker", choices=("trl", "ours", "ours-recipe"), help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    parser.add_argument("--ids", help=argparse.SUPPRESS)
    parser.add_argument("--pairs-file", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker:
        torch.manual_seed(0)
        if args.worker == "trl":
            result = worker_trl(args, json.loads(Path(args.pairs_file).read_text()))
        elif args.worker == "ours":
            result = worker_ours(args)
        else:
            result = worker_recipe(args)
        Path(args.result).write_text(json.dumps(result))
        return

    folder = model_folder(args.model)
    work = Path(tempfile.mkdtemp(prefix="dpo-bench-"))
    pairs = make_pairs(folder, args.pairs * (args.warmup + args.steps), args.prompt_tokens, args.completion_tokens)
    (work / "pairs.json").write_text(json.dumps(pairs))
    common = [
        "--folder", folder, "--ids", str(work / "ids.json"), "--pairs-file", str(work / "pairs.json"), "--pairs",
        str(args.pairs),
        "--steps", str(args.steps), "--warmup", str(args.warmup), "--lora-rank", str(args.lora_rank), "--device",
        args.device,
    ] + (["--gradient-checkpointing"] if args.gradient_checkpointing else [])
    results: dict[str, dict] = {}
    workers = ["trl", "ours", "ours-recipe"]  # trl first: its tokenization is what all three train on
    for repeat in range(args.repeats):
        # On a shared, noisy machine: alternate the order and keep each worker's best round.
        for worker in workers if repeat % 2 == 0 else [workers[0]] + workers[:0:-1]:
            out = work / f"{worker}.json"
            done = subprocess.run([sys.executable, __file__, "--worker", worker, "--result", str(out), *common],
                                  capture_output=True, text=True)
            if done.returncode != 0:
                sys.exit(f"{worker} worker failed:\n{done.stderr[-4000:]}")
            result = json.loads(out.read_text())
            if worker not in results or result["tokens_per_second"] > results[worker]["tokens_per_second"]:
                results[worker] = result

    trl, ours, recipe = results["trl"], results["ours"], results["ours-recipe"]
    print(
        f"model {args.model} on {args.device}: {args.pairs} pairs/step, prompt ~{args.prompt_tokens} + completion"
        f" ~{args.completion_tokens} tokens, LoRA r{args.lora_rank}, {args.steps} measured steps after"
        f" {args.warmup} warm-up, checkpointing {'on' if args.gradient_checkpointing else 'off'}, best of"
        f" {args.repeats} round(s)"
    )
    print(f"{'':34} {'tokens/step':>11} {'s/step':>8} {'tokens/s':>10} {'peak MiB':>9} {'rise MiB':>9}")
    rows = [("TRL DPOTrainer (ref on the fly)", trl), ("ours, ref on the fly", ours),
            ("ours, fit_policy recipe (ref once)", recipe)]
    for name, r in rows:
        m = r["memory"]
        print(
            f"{name:34} {r['tokens_per_step']:11.0f} {r['seconds_per_step']:8.3f} {r['tokens_per_second']:10.1f}"
            f" {m['peak_mib']:9.0f} {m['rise_mib']:9.0f}"
        )
    print(
        "recipe incl. its one-off reference pass spread over the steps:"
        f" {recipe['tokens_per_second_with_reference']:.1f} tokens/s"
    )
    print(f"memory is {trl['memory']['kind']}")
    print(f"ratio ours/TRL tokens/s: {ours['tokens_per_second'] / trl['tokens_per_second']:.2f}x like for like; "
          f"{recipe['tokens_per_second'] / trl['tokens_per_second']:.2f}x for the recipe's step "
          f"({recipe['tokens_per_second_with_reference'] / trl['tokens_per_second']:.2f}x with its reference pass)")
    print(
        f"peak memory rise ours/TRL: {ours['memory']['rise_mib'] / max(trl['memory']['rise_mib'], 1e-9):.2f}x like for"
        " like"
    )
    print(json.dumps(results))


if __name__ == "__main__":
    main()
