"""Generation with a transformers model in this process (CPU or one GPU).

A small sampling loop of our own rather than ``model.generate``: it makes the two things
SWEET-RL needs explicit and easy to check:

- the log-prob of every sampled token under the model's *raw* distribution
  (temperature 1, no top-k/top-p), whatever temperature was used to sample;
- the very same numbers can be recomputed by teacher forcing (``HFEngine.logprobs``).

All conversations of one call (times ``n`` samples) are left-padded into micro-batches
of at most ``max_batch_size`` rows and decoded together with a KV cache.
"""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager

import torch

from colbench.engines.base import EngineError, Generation, Sample, SamplingParams, TokenizerEngine, token_ids
from colbench.model_refs import (
    ModelSource, kv_cache_argument, kv_cache_of, load_model, load_tokenizer, resolve_model,
)


class HFEngine(TokenizerEngine):
    """A transformers causal LM, loaded from a ModelSource (or a reference to resolve),
    or wrapping a model and tokenizer that are already loaded (e.g. by training code)."""

    kind = "hf"

    def __init__(
        self,
        source: ModelSource | str | None = None,
        *,
        model=None,
        tokenizer=None,
        device: str = "auto",
        dtype=None,
        max_batch_size: int = 8,
        model_ref: str | None = None,
        checkpoint_lookup=None,
    ):
        if model is None:
            if source is None:
                raise ValueError("HFEngine needs a model source, or a model and its tokenizer")
            if not isinstance(source, ModelSource):
                source = resolve_model(source, checkpoint_lookup)
            tokenizer = tokenizer or load_tokenizer(source)
            model = load_model(source, device=device, dtype=dtype)
            model_ref = model_ref or source.ref
        elif tokenizer is None:
            raise ValueError("pass the tokenizer along with the model")
        self.model = model
        self.tokenizer = tokenizer
        self.model_ref = model_ref or f"hf:{getattr(model.config, '_name_or_path', '') or 'in-memory'}"
        self.max_batch_size = max(1, int(max_batch_size))
        self.eos_ids = _eos_ids(model, tokenizer)
        if not self.eos_ids:
            raise EngineError(f"model {self.model_ref} has no EOS token: generation could not stop")
        pad = tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else min(self.eos_ids)
        self._stopping = threading.Event()  # stop() sets it; a sampling loop under way then ends

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    # ------------------------------------------------------------------ sampling (prompts: TokenizerEngine)

    def generate_from_prompts(self, prompts: list[str] | list[list[int]], params: SamplingParams) -> list[Generation]:
        """Continue prompts that are already templated (e.g. a stored turn's exact prompt), as text or token ids."""
        prompt_ids = [list(p) if isinstance(p, (list, tuple)) else self.encode(p) for p in prompts]
        prompts = [p if isinstance(p, str) else self.tokenizer.decode(p) for p in prompts]
        # One row per (conversation, sample). Sorting rows by prompt length keeps padding
        # small; the n samples of a conversation stay together (stable sort).
        rows = [c for c in range(len(prompts)) for _ in range(params.n)]
        order = sorted(range(len(rows)), key=lambda r: len(prompt_ids[rows[r]]))
        generator = None
        if params.seed is not None:
            generator = torch.Generator(device=self.device).manual_seed(params.seed)

        results: list[Sample | None] = [None] * len(rows)
        latency = [0.0] * len(prompts)
        with self._eval_mode():
            for start in range(0, len(order), self.max_batch_size):
                chunk = order[start : start + self.max_batch_size]
                t0 = time.perf_counter()
                samples = self._sample_batch([prompt_ids[rows[r]] for r in chunk], params, generator)
                elapsed = time.perf_counter() - t0
                for r, sample in zip(chunk, samples):
                    results[r] = sample
                for c in {rows[r] for r in chunk}:
                    latency[c] += elapsed

        return [
            Generation(
                prompt_text=prompts[c],
                prompt_tokens=len(prompt_ids[c]),
                samples=[results[r] for r in range(len(rows)) if rows[r] == c],
                latency_s=latency[c],
            )
            for c in range(len(prompts))
        ]

    @torch.inference_mode()
    def _sample_batch(self, prompts: list[list[int]], params: SamplingParams, generator) -> list[Sample]:
        ids, mask = _left_pad(prompts, self.pad_id, self.device)
        positions = _positions(mask)
        eos = torch.tensor(sorted(self.eos_ids), device=self.device)
        batch = len(prompts)
        done = torch.zeros(batch, dtype=torch.bool, device=self.device)
        lengths = torch.zeros(batch, dtype=torch.long, device=self.device)  # tokens up to and including EOS
        tokens, logprobs = [], []
        cache = None
        for _ in range(params.max_new_tokens):
            if self._stopping.is_set():  # Ctrl-C: the caller wants nothing more from us
                break
            out = self.model(
                input_ids=ids,
                attention_mask=mask,
                position_ids=positions,
                **kv_cache_argument(cache),
                use_cache=True,
                logits_to_keep=1,  # only the last position: the full [batch, len, vocab] is large
            )
            cache = kv_cache_of(out)
            logits = out.logits[:, -1, :].float()
            if params.temperature <= 0:
                next_ids = logits.argmax(-1)
            else:
                probs = torch.softmax(logits / params.temperature, dim=-1)
                next_ids = torch.multinomial(probs, 1, generator=generator).squeeze(1)
            next_ids = torch.where(done, torch.full_like(next_ids, self.pad_id), next_ids)
            # The raw (temperature 1) log-prob of the chosen token.
            token_logprobs = logits.gather(1, next_ids[:, None]).squeeze(1) - torch.logsumexp(logits, dim=-1)
            tokens.append(next_ids)
            logprobs.append(token_logprobs)
            lengths += (~done).long()
            done |= torch.isin(next_ids, eos)
            if bool(done.all()):
                break
            ids = next_ids[:, None]
            mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
            positions = positions[:, -1:] + 1

        if not tokens:  # max_new_tokens == 0
            return [Sample(text="", finish_reason="length") for _ in prompts]
        tokens = torch.stack(tokens, dim=1).tolist()
        logprobs = torch.stack(logprobs, dim=1).tolist()
        samples = []
        for i in range(batch):
            n = int(lengths[i])
            ids_i = tokens[i][:n]
            stopped = bool(ids_i) and ids_i[-1] in self.eos_ids
            samples.append(
                Sample(
                    text=self.tokenizer.decode(ids_i, skip_special_tokens=True),
                    token_ids=ids_i,
                    token_logprobs=logprobs[i][:n],
                    finish_reason="stop" if stopped else "length",
                )
            )
        return samples

    # ------------------------------------------------------------------ scoring

    def logprobs(self, prompts: list[str], completions: list[str] | list[list[int]]) -> list[list[float]]:
        """Teacher-forced log-probs (temperature 1) of each completion's tokens given its prompt.

        A completion is text (tokenized without special tokens) or a list of token ids;
        pass the ids a sample recorded to score exactly the tokens that were sampled.
        """
        if len(prompts) != len(completions):
            raise ValueError("prompts and completions must have the same length")
        pairs = []
        for prompt, completion in zip(prompts, completions):
            prompt_ids = self.encode(prompt)
            if not prompt_ids:
                raise ValueError("an empty prompt gives the first completion token no context")
            completion_ids = self.encode(completion) if isinstance(completion, str) else list(completion)
            pairs.append((prompt_ids, completion_ids))

        order = sorted(range(len(pairs)), key=lambda i: sum(map(len, pairs[i])))
        results: list[list[float]] = [[] for _ in pairs]
        with self._eval_mode(), torch.inference_mode():
            for start in range(0, len(order), self.max_batch_size):
                chunk = [i for i in order[start : start + self.max_batch_size] if pairs[i][1]]
                if not chunk:
                    continue
                ids, mask = _left_pad([pairs[i][0] + pairs[i][1] for i in chunk], self.pad_id, self.device)
                # Left padding right-aligns every completion, so the last `keep` positions
                # hold the logits that predict all of them.
                keep = max(len(pairs[i][1]) for i in chunk) + 1
                logits = self.model(
                    input_ids=ids, attention_mask=mask, position_ids=_positions(mask), logits_to_keep=keep
                ).logits
                for row, i in enumerate(chunk):
                    target = torch.tensor(pairs[i][1], device=self.device)
                    n = len(target)
                    # The logit at position t predicts the token at t + 1.
                    scores = logits[row, keep - n - 1 : keep - 1].float()
                    picked = scores.gather(1, target[:, None]).squeeze(1) - torch.logsumexp(scores, dim=-1)
                    results[i] = picked.tolist()
        return results

    # ------------------------------------------------------------------ housekeeping

    @contextmanager
    def _eval_mode(self):
        # A model shared with training code may be in train mode (dropout): sample in eval.
        was_training = self.model.training
        self.model.eval()
        try:
            yield
        finally:
            self.model.train(was_training)

    def stop(self) -> None:
        self._stopping.set()

    def close(self) -> None:
        self.model = None
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def _eos_ids(model, tokenizer) -> set[int]:
    return token_ids(getattr(getattr(model, "generation_config", None), "eos_token_id", None), tokenizer.eos_token_id)


def _left_pad(seqs: list[list[int]], pad_id: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, seq in enumerate(seqs):
        if seq:
            ids[i, width - len(seq) :] = torch.tensor(seq, dtype=torch.long)
            mask[i, width - len(seq) :] = 1
    return ids.to(device), mask.to(device)


def _positions(mask: torch.Tensor) -> torch.Tensor:
    # With left padding each row's first real token must sit at position 0.
    return (mask.cumsum(-1) - 1).clamp(min=0)
