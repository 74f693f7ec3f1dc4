"""Using a trained critic: per-turn advantages of stored trajectories, and candidate scoring.

- :func:`score_turns` writes ``A(o_t, a_t, c)`` of every agent turn of stored
  trajectories into ``critic_score`` (``colbench inspect`` shows them). The stored
  value is A itself, without β: the critic's mean log-ratio over the turn's tokens
  (with the normalisation the critic was trained with).
- :meth:`CriticModel.score_candidates` scores many candidate agent turns that share
  one context: c + exactly the prompt the policy was given (:meth:`CriticModel.context`,
  fitted to ``max_len`` as training fits it). The context runs once per model (critic,
  then reference); its KV cache is expanded over the batch of candidates, which then
  run only their own tokens. Best-of-N reranking and the SWEET actor call this.
"""
from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from typing import Sequence

import torch
from colbench.model_refs import (
    ModelSource, get_checkpoint, kv_cache_argument, kv_cache_of, load_tokenizer, model_source, resolve_device,
)
from colbench.progress import Progress
from colbench.store import queries
from colbench.training import data as D
from colbench.training import sequences as S
from colbench.training.losses import token_logps_from_logits, turn_advantages
from colbench.training.modeling import (
    TokenLogProbs,
    softcap,
    adapter_disabled,
    is_peft,
    load_adapter,
    load_base,
    unwrap
)


@dataclass
class Context:
    """What candidates for one agent turn are read after."""

    ids: list[int]  # c (kept part) + the policy's prompt (kept part)
    info_tokens: int  # how many of ids are c
    truncated: bool  # the prompt lost its start to max_len

    @property
    def prompt_ids(self) -> list[int]:
        """The part of the policy's prompt the critic reads (all of it unless truncated)."""
        return self.ids[self.info_tokens :]


@dataclass
class CandidateScore:
    advantage: float  # A: mean (or, for a 'none' critic, summed) log-ratio critic − reference
    critic_logp: float  # mean log-prob per token under the critic, given c
    reference_logp: float  # mean log-prob per token under the frozen initial model, given c
    tokens: int


class CriticModel:
    """A critic ready to score: the peft model (reference = adapter disabled), or a
    fully fine-tuned model plus its separately loaded reference."""

    def __init__(
        self, model, tokenizer, *, reference=None, beta: float = 0.1, normalize: str = "turn",
        training_info: bool = True, max_len: int | None = None, checkpoint_id: int | None = None,
        family: str | None = None, batch_size: int = 8,
    ):
        if reference is None and not is_peft(model):
            raise ValueError("a critic without an adapter needs its reference model")
        self.model, self.tokenizer, self.reference = model, tokenizer, reference
        self.beta, self.normalize, self.training_info = beta, normalize, training_info
        self.max_len, self.checkpoint_id, self.family = max_len, checkpoint_id, family
        self.batch_size = max(1, batch_size)
        self.model.eval()
        self.end_of_turn = S.end_of_turn_ids(tokenizer)

    @classmethod
    def from_checkpoint(cls, db, ref, device: str = "auto", dtype=None, batch_size: int = 8) -> "CriticModel":
        checkpoint, run = get_checkpoint(db, ref)
        if run.kind != "critic":
            raise ValueError(f"ckpt:{checkpoint.id} is a {run.kind} checkpoint, not a critic")
        device = resolve_device(device)
        source = model_source(db, checkpoint.base_model)
        tokenizer = load_tokenizer(source)
        base = load_base(source, device, dtype, trainable=False)
        if checkpoint.adapter:
            model, reference = load_adapter(base, checkpoint.path, trainable=False), None
        else:
            model = load_base(ModelSource(base=checkpoint.path, ref=f"ckpt:{checkpoint.id}"), device, dtype,
                              trainable=False)
            reference = base
        model.requires_grad_(False)
        config = run.config or {}
        return cls(
            model, tokenizer, reference=reference, beta=config.get("beta", 0.1),
            normalize=config.get("normalize", "turn"),
            training_info=config.get("training_info", True), max_len=config.get("max_len"), checkpoint_id=checkpoint.id,
            family=config.get("family"), batch_size=batch_size,
        )

    @property
    def device(self):
        return next(self.model.parameters()).device

    def _reference(self):
        """(model to run, context) for the frozen initial model."""
        if self.reference is not None:
            return self.reference, nullcontext()
        return self.model, adapter_disabled(self.model)

    # -------------------------------------------------------- whole trajectories

    @torch.no_grad()
    def turn_advantages(self, examples: Sequence[D.Example]) -> list[list[float | None]]:
        """Per example, A of each agent turn (None for a turn truncated away entirely)."""
        from colbench.training.losses import by_owner

        results: list[list[float | None]] = []
        for start in range(0, len(examples), self.batch_size):
            chunk = list(examples[start : start + self.batch_size])
            rows, owner = S.flatten([e.rows for e in chunk])
            ids, mask, turns = (t.to(self.device) for t in D.collate(rows, self.tokenizer.pad_token_id))
            owner = torch.tensor(owner, device=self.device)
            target = turns >= 0
            critic = TokenLogProbs(self.model)(ids, mask, target)
            model, context = self._reference()
            with context:
                reference = TokenLogProbs(model)(ids, mask, target)
            width = max(max(len(e.turn_rows) for e in chunk), 1)
            advantages = turn_advantages(critic, reference, turns, self.normalize, num_turns=width, owner=owner,
                                         owners=len(chunk))
            seen = torch.zeros(len(rows), width, device=self.device).scatter_add(1, turns.clamp(min=0), target.float())
            present = by_owner(seen, owner, len(chunk)) > 0
            for row, example in enumerate(chunk):
                n = len(example.turn_rows)
                results.append(
                    [float(a) if p else None for a, p in zip(advantages[row, :n].tolist(), present[row, :n].tolist())]
                )
        return results

    # -------------------------------------------------------- candidates

    def encode_candidate(self, candidate: str | Sequence[int]) -> list[int]:
        """A candidate agent turn as token ids: exactly the sampled ids (the end-of-turn token
        only if sampling stopped there), or a text encoded and closed as a stopped turn."""
        if isinstance(candidate, str):
            return S.encode_text(self.tokenizer, candidate) + self.end_of_turn
        return list(candidate)

    def context(self, prompt: str | Sequence[int], reference: str | None) -> Context:
        """c (when the critic was trained with it) + exactly what the policy was given
        (its prompt text, or ids), fitted to ``max_len`` as in training."""
        info = D.training_info_ids(self.tokenizer, reference if self.training_info else None)
        prompt_ids = S.encode_text(self.tokenizer, prompt) if isinstance(prompt, str) else list(prompt)
        ids, truncated = S.fit_context(info, prompt_ids, self.max_len)
        return Context(ids, S.kept_prefix(len(info), len(prompt_ids), self.max_len), truncated)

    @torch.no_grad()
    def score_candidates(self, prefix: str | Sequence[int], candidates: Sequence[str | Sequence[int]],
                         batch_size: int = 16) -> list[CandidateScore]:
        """Score candidate next agent turns after one shared prefix, computing the prefix once.

        ``prefix`` is token ids (``context(...).ids``) or text (encoded as is, no special
        tokens added); candidates are the sampled token ids (scored exactly) or texts.
        """
        prefix_ids = self._prefix(prefix)
        cands = [self.encode_candidate(c) for c in candidates]
        critic = shared_prefix_logps(self.model, nullcontext(), prefix_ids, cands, batch_size,
                                     self.tokenizer.pad_token_id)
        model, context = self._reference()
        reference = shared_prefix_logps(model, context, prefix_ids, cands, batch_size, self.tokenizer.pad_token_id)
        return [self._score(c, r) for c, r in zip(critic, reference)]

    @torch.no_grad()
    def score_candidates_naive(self, prefix: str | Sequence[int], candidates: Sequence[str | Sequence[int]],
                               batch_size: int = 16) -> list[CandidateScore]:
        """The same numbers with a full forward of prefix + candidate for every candidate (the baseline)."""
        prefix_ids = self._prefix(prefix)
        cands = [self.encode_candidate(c) for c in candidates]
        critic = _full_logps(self.model, nullcontext(), prefix_ids, cands, batch_size, self.tokenizer.pad_token_id)
        model, context = self._reference()
        reference = _full_logps(model, context, prefix_ids, cands, batch_size, self.tokenizer.pad_token_id)
        return [self._score(c, r) for c, r in zip(critic, reference)]

    def _prefix(self, prefix) -> list[int]:
        ids = self.tokenizer(prefix, add_special_tokens=False)["input_ids"] if isinstance(prefix, str) else list(prefix)
        if not ids:
            raise ValueError("candidates need a non-empty prefix")
        return ids

    def _score(self, critic: torch.Tensor, reference: torch.Tensor) -> CandidateScore:
        n = max(int(critic.numel()), 1)
        diff = float((critic - reference).sum())
        return CandidateScore(
            advantage=diff if self.normalize == "none" else diff / n,
            critic_logp=float(critic.sum()) / n,
            reference_logp=float(reference.sum()) / n,
            tokens=int(critic.numel()),
        )


def _batches(items: list, size: int):
    for start in range(0, len(items), size):
        yield items[start : start + size]


def shared_prefix_logps(model, context, prefix: list[int], cands: list[list[int]], batch_size: int,
                        pad_id: int, tables: list[int] | None = None) -> list[torch.Tensor]:
    """Token log-probs of each candidate after ``prefix``, running the prefix once.

    The prefix minus its last token fills a KV cache; each batch of candidates gets
    that cache expanded over the batch (views, no copy) and runs the prefix's last
    token followed by its own tokens, so position j's logits predict candidate token j.
    ``tables``: per candidate, how many of its last tokens to return the whole log-softmax
    over the vocabulary for (``[n, V]``) instead of the candidate's own tokens' log-probs.
    """
    from transformers import DynamicCache

    base = unwrap(model)
    decoder, head = base.get_decoder(), base.get_output_embeddings()
    device = next(model.parameters()).device
    results: list[torch.Tensor] = [None] * len(cands)  # type: ignore[list-item]
    with context:
        past = len(prefix) - 1
        stored = None
        if past:
            out = decoder(input_ids=torch.tensor([prefix[:-1]], device=device), use_cache=True)
            stored = [(layer.keys, layer.values) for layer in kv_cache_of(out).layers]
        order = sorted(range(len(cands)), key=lambda i: len(cands[i]))
        for chunk in _batches(order, batch_size):
            rows = len(chunk)
            width = max(len(cands[i]) for i in chunk) + 1
            ids = torch.full((rows, width), pad_id, dtype=torch.long)
            mask = torch.zeros((rows, past + width), dtype=torch.long)
            mask[:, :past] = 1
            for r, i in enumerate(chunk):
                seq = [prefix[-1]] + cands[i]
                ids[r, : len(seq)] = torch.tensor(seq)
                mask[r, past : past + len(seq)] = 1
            cache = None
            if stored is not None:
                cache = DynamicCache(config=base.config)
                for layer, (k, v) in enumerate(stored):
                    cache.update(k.expand(rows, *k.shape[1:]), v.expand(rows, *v.shape[1:]), layer)
            positions = torch.arange(past, past + width, device=device).expand(rows, width)
            hidden = decoder(
                input_ids=ids.to(device), attention_mask=mask.to(device), position_ids=positions,
                **kv_cache_argument(cache), use_cache=cache is not None,
            ).last_hidden_state
            lengths = [len(cands[i]) for i in chunk]
            # hidden[:, j] predicts input j + 1, i.e. candidate token j.
            select = torch.zeros((rows, width - 1), dtype=torch.bool)
            for r, n in enumerate(lengths):
                select[r, :n] = True
            select = select.to(device)
            logits = softcap(head(hidden[:, :-1][select]), base.config)
            if tables is not None:
                for r, piece in zip(chunk, logits.split(lengths)):
                    results[r] = torch.log_softmax(piece[len(piece) - tables[r]:].float(), dim=-1).cpu()
                continue
            picked = token_logps_from_logits(logits, ids[:, 1:].to(device)[select])
            for r, piece in zip(chunk, picked.split(lengths)):
                results[r] = piece.float().cpu()
    return results


def _full_logps(model, context, prefix: list[int], cands: list[list[int]], batch_size: int,
                pad_id: int) -> list[torch.Tensor]:
    """The baseline: prefix + candidate through the whole model, for every candidate."""
    device = next(model.parameters()).device
    scorer = TokenLogProbs(model)
    results: list[torch.Tensor] = [None] * len(cands)  # type: ignore[list-item]
    with context:
        for chunk in _batches(list(range(len(cands))), batch_size):
            seqs = [prefix + cands[i] for i in chunk]
            width = max(map(len, seqs))
            ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
            mask = torch.zeros_like(ids)
            target = torch.zeros_like(ids, dtype=torch.bool)
            for r, seq in enumerate(seqs):
                ids[r, : len(seq)] = torch.tensor(seq)
                mask[r, : len(seq)] = 1
                target[r, len(prefix) : len(seq)] = True
            logps = scorer(ids.to(device), mask.to(device), target.to(device))
            for r, i in enumerate(chunk):
                results[i] = logps[r, len(prefix) : len(prefix) + len(cands[i])].float().cpu()
    return results


# ---------------------------------------------------------------- stored trajectories


def score_turns(
    db,
    critic: CriticModel | str | int,
    *,
    policy: str | None = None,
    limit: int | None = None,
    trajectory_ids: Sequence[int] | None = None,
    device: str = "auto",
    on_progress: Progress | None = None,
) -> dict:
    """Write A of every agent turn of stored, finished trajectories into critic_score.

    Which: ``trajectory_ids``, else finished trajectories of the critic's task family
    (optionally of one ``policy``), newest first, at most ``limit``. Scores a turn
    already has from this critic are replaced.
    """
    if not isinstance(critic, CriticModel):
        critic = CriticModel.from_checkpoint(db, critic, device=device)
    if trajectory_ids is None:
        with db.read() as session:
            trajectory_ids = queries.finished_trajectory_ids(session, family=critic.family, policy=policy, limit=limit)
    ids = sorted(trajectory_ids)
    written, turns_scored, done, total = 0, 0, 0, len(ids)
    for chunk, advantages in stored_advantages(db, critic, ids):
        written += sum(value is not None for values in advantages for value in values)
        turns_scored += sum(len(values) for values in advantages)
        done += len(chunk)
        if on_progress:
            on_progress("score", done, total, {})
    return {"checkpoint_id": critic.checkpoint_id, "trajectories": total, "agent_turns": turns_scored,
            "scores_written": written}


def stored_advantages(db, critic: CriticModel, trajectory_ids: list[int]):
    """Yield (trajectory ids, A of each one's agent turns, None where truncated away) a batch at a time,
    each batch written into critic_score first (replacing the scores those turns had from this critic):
    every figure computed from a critic's advantages can be checked against the stored ones."""
    if critic.checkpoint_id is None:
        raise ValueError("scores are stored per checkpoint: load the critic from one")
    for chunk in _batches(list(trajectory_ids), max(critic.batch_size * 4, 1)):
        examples = D.load_examples(db, critic.tokenizer, chunk, training_info=critic.training_info,
                                   max_len=critic.max_len)
        ordered = [examples[i] for i in chunk]
        advantages = critic.turn_advantages(ordered)
        rows = [
            {"turn_id": turn_id, "checkpoint_id": critic.checkpoint_id, "score": value}
            for example, values in zip(ordered, advantages)
            for turn_id, value in zip(example.turn_rows, values)
            if turn_id is not None and value is not None
        ]
        with db.write() as session:
            queries.replace_critic_scores(session, critic.checkpoint_id, rows)
        yield chunk, advantages
