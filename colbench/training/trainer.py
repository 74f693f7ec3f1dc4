"""What the policy recipes share: their config, their training items, one training loop, and
the bookkeeping around a run (the recipes are sweet.py, rft.py and mtdpo.py).

What the policy trains on is exactly what it read and wrote (sequences.py): each
agent turn's stored prompt ids and sampled ids, never a re-rendering of the dialogue.
Its trainable tokens are the agent turns' sampled ids (the end-of-turn token included
when the turn stopped). The DPO reference is the policy as training starts (a fresh
LoRA adapter starts at zero, so that is the base model; a continued LoRA policy is its
starting adapter; a full fine-tune is its starting weights): reference log-probs are
computed once, before the first step. Log-probs entering a loss are float32. The same
code runs on CPU, one GPU (bfloat16 weights) and several GPUs under ``accelerate launch``.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, NamedTuple, Sequence

import torch

from colbench.model_refs import (
    DEFAULT_MODEL,
    checkpoint_part,
    get_checkpoint,
    load_tokenizer,
    model_source,
    normalized_model_ref,
    resolve_dtype,
)
from colbench.progress import Progress
from colbench.store import queries
from colbench.training import NothingToTrain
from colbench.training import data as D
from colbench.training import sequences as S
from colbench.training.checkpoints import (
    check_artifact_root,
    save_trained,
)
from colbench.training.algorithms import others_settings
from colbench.training.config import PolicyConfig
from colbench.training.lifecycle import training_run
from colbench.training.snapshots import Snapshots, check_name, continued_run, remaining, walk
from colbench.training.steplog import StepLog
from colbench.training.losses import by_owner, policy_dpo_loss, sequence_logps, sft_loss
from colbench.training.modeling import (
    TokenLogProbs,
    accelerator_for,
    evaluating,
    held_bytes,
    load_device,
    load_dtype,
    lockstep_batches,
    means_over_processes,
    model_to_train,
    on_main,
    optimizer_step,
    prepare_training,
    sharded_scorer,
    sharding,
    summed_over_processes,
)

FRONTEND_RFT_THRESHOLD = 0.8
_EPS = 1e-9


@dataclass
class PolicyResult:
    run_id: int | None
    checkpoint_id: int | None
    path: str | None
    metrics: dict


# ---------------------------------------------------------------- training items


@dataclass
class PairItem:
    """A DPO pair: chosen and rejected rows (one row each for sweet; a trajectory's rows for
    mtdpo); ``ref`` holds their reference log-probs once computed."""

    chosen: list[S.Seq]
    rejected: list[S.Seq]
    ref: tuple[float, float] | None = None
    source: Any = None  # what it came from (a sweet pair, a trajectory pair), for lineage


@dataclass
class SftItem:
    seq: S.Seq
    source: Any = None


def pair_rows(items: Sequence[PairItem]) -> tuple[list[S.Seq], list[int]]:
    """The rows of B pairs, chosen sides first, and each row's owner: i for pair i's chosen rows, B + i for its
    rejected."""
    return S.flatten([it.chosen for it in items] + [it.rejected for it in items])


def trajectory_rows(
    db, tokenizer, family: str, trajectory_ids: Sequence[int], max_len: int | None
) -> dict[int, list[S.Seq]]:
    """trajectory id → its agent turns as the policy read and sampled them, packed into rows."""
    ids = sorted(set(trajectory_ids))
    with db.read() as session:
        turns = queries.turns_for(session, ids)
    return {i: S.pack(S.agent_turns(tokenizer, family, turns[i]), max_len=max_len) for i in ids}


def trained_data(db, config: "PolicyConfig", watermark: int | None):
    """Graded, finished trajectories of the config's family and split above the watermark, and the new watermark."""
    with db.read() as session:
        return queries.trained_data(session, family=config.family, split=config.split, watermark=watermark,
                                    policies=config.policy_list)


# ---------------------------------------------------------------- the training loop


class PolicyTrainer:
    """setup_model() → [items] → setup_training(items) → train() → save(): the loop every policy recipe shares."""

    def __init__(self, db, config: PolicyConfig, algo: str, source, parent, on_progress: Progress | None = None):
        self.db, self.config, self.algo = db, config, algo
        self.source = source  # the ModelSource of the base weights
        self.parent = parent  # (Checkpoint, TrainingRun) of the policy to continue, or None
        self.on_progress = on_progress
        self.metrics: dict[str, Any] = {}

    # -------------------------------------------------- setup

    def setup_model(self) -> None:
        cfg = self.config
        acc = self.accelerator = accelerator_for(cfg)
        self.device = acc.device
        self.tokenizer = load_tokenizer(self.source)
        self.sharded = sharding(cfg, acc)
        self.model = model_to_train(self.source, self.parent, replace(cfg, dtype=load_dtype(cfg, acc)),
                                    load_device(cfg, acc), lora_over_full=True)
        # Sharded before anything else runs, so sampling SWEET's candidates finds each process's memory mostly free.
        self.sharded_scorer = sharded_scorer(acc, self.model, cfg) if self.sharded else None
        self._start_copy = None

    def starting_policy(self):
        """The policy as training starts, as a plain model on this process's device: the model being
        trained (before its first step) or, when that is sharded, a copy of the same weights loaded for
        the purpose (free it with :meth:`release_starting_policy`)."""
        if not self.sharded:
            return self.model
        if self._start_copy is None:
            self._start_copy = model_to_train(self.source, self.parent, self.config, str(self.device),
                                              lora_over_full=True).eval()
            self._start_copy.requires_grad_(False)
        return self._start_copy

    def release_starting_policy(self) -> None:
        self._start_copy = None

    def setup_training(self, items: list, reference: list | None = None) -> None:
        """``reference``: the items' reference log-probs as a snapshot kept them (a continued DPO run), else
        computed here."""
        cfg = self.config
        self.items = items
        self.dpo = isinstance(items[0], PairItem)
        if self.dpo and reference is not None and len(reference) == len(items):
            for item, (chosen, rejected) in zip(items, reference):
                item.ref = (chosen, rejected)
        elif self.dpo:
            self._reference_logps()
        self.epochs = cfg.epochs_for(self.algo)
        self.scorer, self.optimizer, self.loader, self.scheduler, self.total_steps = prepare_training(
            self.accelerator, self.model, cfg, len(items), self.epochs, scorer=self.sharded_scorer
        )

    @torch.no_grad()
    def _reference_logps(self) -> None:
        """Each pair's reference log-probs (summed over agent tokens), computed once before training.

        The reference is the policy as training starts, i.e. the model as loaded: a fresh
        LoRA adapter (zero at start) gives the base model, a continued policy its starting
        adapter or weights. Under several processes each computes a share; the shares are gathered.
        """
        from accelerate.utils import gather_object

        acc = self.accelerator
        scorer = self.sharded_scorer or TokenLogProbs(self.model, autocast=self.config.autocast_dtype(self.device))
        found: dict[int, tuple[float, float]] = {}
        batches = lockstep_batches(acc, list(range(len(self.items))), self.config.batch_size, self.sharded)
        with evaluating(scorer):
            for done, (chunk, keep) in enumerate(batches, 1):
                rows, owner = pair_rows([self.items[i] for i in chunk])
                ids, mask, turns = (t.to(self.device) for t in D.collate(rows, self.tokenizer.pad_token_id))
                per_row = sequence_logps(scorer(ids, mask, turns >= 0), turns >= 0).float()
                sides = by_owner(per_row, torch.tensor(owner, device=per_row.device), 2 * len(chunk)).cpu().tolist()
                for k, i in enumerate(chunk if keep else []):
                    found[i] = (sides[k], sides[len(chunk) + k])
                if self.on_progress and acc.is_main_process:  # minutes on a CPU for a few hundred pairs
                    self.on_progress("reference", done, len(batches), {})
        if acc.num_processes > 1:
            merged: dict[int, tuple[float, float]] = {}
            for part in gather_object([found]):
                merged.update(part)
            found = merged
        for i, item in enumerate(self.items):
            item.ref = found[i]

    # -------------------------------------------------- train

    def step_loss(self, scorer, batch: list) -> tuple[torch.Tensor, dict, int]:
        """(loss, stats, tokens) of one batch of item indices."""
        items = [self.items[i] for i in batch]
        cfg = self.config
        if self.dpo:
            seqs, owner = pair_rows(items)
        else:
            seqs = [it.seq for it in items]
        ids, mask, turns = (t.to(self.device) for t in D.collate(seqs, self.tokenizer.pad_token_id))
        logps = scorer(ids, mask, turns >= 0)
        tokens = sum(len(s.input_ids) for s in seqs)
        if not self.dpo:
            loss, stats = sft_loss(logps, turns)
            return loss, stats, tokens
        ref_chosen = torch.tensor([it.ref[0] for it in items], dtype=torch.float32, device=self.device)
        ref_rejected = torch.tensor([it.ref[1] for it in items], dtype=torch.float32, device=self.device)
        owner = torch.tensor(owner, device=self.device)
        loss, stats = policy_dpo_loss(
            logps, turns, owner, ref_chosen, ref_rejected, cfg.beta, cfg.nll_weight, cfg.loss, cfg.label_smoothing
        )
        return loss, stats, tokens

    def train(self, steplog: StepLog | None = None, snapshots: Snapshots | None = None) -> None:
        cfg, acc = self.config, self.accelerator
        resumed = snapshots.load(self.scorer, self.optimizer, self.scheduler) if snapshots else None
        step, tokens, spent = 0, 0, 0.0
        steps: list[dict] = []  # each optimiser step's loss statistics
        if resumed:
            step, tokens, steps, spent, self.metrics = (resumed.loop[k] for k in ("step", "tokens", "steps", "seconds",
                                                                                  "metrics"))
            self.metrics["resumed_at_step"] = resumed.step
        started = time.perf_counter() - spent
        # Fixed before training: built once, kept by each snapshot.
        reference = [list(it.ref) for it in self.items] if self.dpo else None
        for epoch in range(self.epochs):
            if resumed and epoch < resumed.epoch:
                walk(self.loader)
                continue
            history: list[dict] = resumed.loop["history"] if resumed and epoch == resumed.epoch else []
            for batch in remaining(self.loader, resumed, epoch):
                with acc.accumulate(self.scorer):
                    loss, stats, n = self.step_loss(self.scorer, batch)
                    figures = optimizer_step(acc, self.scorer, self.optimizer, self.scheduler, loss, cfg.max_grad_norm)
                history.append(stats)
                tokens += n
                if acc.sync_gradients:
                    step += 1
                    steps.append(means_over_processes(acc, step_means(history, cfg.grad_accum)))
                    if steplog is not None:
                        steplog.record(step, epoch + 1, steps[-1] | figures)
                    if self.on_progress and acc.is_main_process:
                        self.on_progress("train", step, self.total_steps, {"epoch": epoch + 1, **stats})
                    if self.dpo and cfg.stop_on_displacement is not None:
                        self.metrics["stopped_early"] = displaced(acc, steps, cfg.stop_on_displacement)
                        if self.metrics["stopped_early"]:
                            break
                    if snapshots:
                        loop = {"step": step, "tokens": tokens, "steps": steps, "history": history,
                                "seconds": time.perf_counter() - started, "metrics": self.metrics}
                        snapshots.after_step(step, self.total_steps, steplog,
                                             (self.scorer, self.optimizer, self.scheduler), epoch=epoch,
                                             batches=len(history), loop=loop, reference=reference)
            keys = sorted(history[0]) if history else []
            sums = summed_over_processes(acc, {k: sum(h[k] for h in history) for k in keys} | {"batches": len(history)})
            mean = {k: sums[k] / sums["batches"] for k in keys} if sums["batches"] else {}
            self.metrics.setdefault("epochs", []).append({"epoch": epoch + 1, **mean})
            if self.metrics.get("stopped_early"):
                break
        if self.dpo:
            self.metrics |= displacement_figures(acc, steps)
        tokens = int(summed_over_processes(acc, {"tokens": tokens})["tokens"])
        elapsed = time.perf_counter() - started
        last = self.metrics["epochs"][-1] if self.metrics.get("epochs") else {}
        self.metrics.update(
            {f"train_{k}": v for k, v in last.items() if k != "epoch"}
            | {
                "processes": acc.num_processes,
                "sharded": self.sharded,
                "held": held_bytes(acc, self.scorer, self.optimizer),
                "steps": step,
                "train_seconds": round(elapsed, 3),
                "train_tokens": tokens,
                "tokens_per_second": round(tokens / elapsed, 1) if elapsed > 0 else None,
            }
        )

    # -------------------------------------------------- save

    def save(self, folder: Path, card=None) -> tuple[bool, str | None]:
        return save_trained(self.accelerator, self.scorer, self.tokenizer, folder, card,
                            dtype=resolve_dtype(self.config.dtype, str(self.accelerator.device)))


DISPLACEMENT_WINDOW = 5  # optimiser steps the chosen reward is averaged over before stopping on it


def displaced(accelerator, steps: list[dict], bound: float) -> str | None:
    """Why to stop, or None: the chosen side's DPO reward, averaged over the last steps (and the
    processes, so that every process decides the same), is below ``-bound``."""
    if len(steps) < DISPLACEMENT_WINDOW:
        return None
    window = steps[-DISPLACEMENT_WINDOW:]
    sums = summed_over_processes(accelerator, {"reward": sum(s["chosen_reward"] for s in window), "count": len(window)})
    reward = sums["reward"] / sums["count"]
    if reward >= -bound:
        return None
    return (
        f"likelihood displacement: the chosen side's reward averaged {reward:+.3f} over steps"
        f" {len(steps) - DISPLACEMENT_WINDOW + 1}-{len(steps)}, below -{bound:g} (--stop-on-displacement)"
    )


def displacement_figures(accelerator, steps: list[dict]) -> dict:
    """What DPO did to the chosen side: the chosen and rejected rewards and the chosen side's NLL
    over the last fifth of the steps (at least one), and the NLL over the first fifth. A chosen
    reward below 0 and an NLL that rose mean the turns it preferred became less likely."""
    if not steps:
        return {}
    tail = max(1, len(steps) // 5)
    last, first = steps[-tail:], steps[:tail]
    sums = summed_over_processes(accelerator, {
        "chosen": sum(s["chosen_reward"] for s in last), "rejected": sum(s["rejected_reward"] for s in last),
        "nll": sum(s["nll"] for s in last), "first_nll": sum(s["nll"] for s in first), "count": len(last),
    })
    n = sums["count"]
    return {"last_steps": tail, "last_chosen_reward": sums["chosen"] / n, "last_rejected_reward": sums["rejected"] / n,
            "last_nll": sums["nll"] / n, "first_nll": sums["first_nll"] / n}


def step_means(history: list[dict], grad_accum: int) -> dict:
    """The loss's statistics over the micro-batches of the optimiser step just taken (the last ``grad_accum``)."""
    recent = history[-grad_accum:]
    return {k: sum(h[k] for h in recent) / len(recent) for k in recent[-1]}


# ---------------------------------------------------------------- a run, start to finish


class Gathered(NamedTuple):
    """What a recipe read before any model loads (so that nothing to train writes no run)."""

    data: Any  # the recipe's own: items, or what it builds them from
    info: dict  # figures for the run's metrics
    watermark: int | None  # the highest graded_seq read


def starting_point(db, config: "PolicyConfig", base_model: str | None, parent_checkpoint, from_scratch: bool):
    """What a policy run starts from: (base model ref, (Checkpoint, TrainingRun) it continues or None, the data
    watermark it reads above, the base weights' ModelSource). A LoRA policy checkpoint named as the base model is
    continued (an adapter cannot be the base of another), on all the data."""
    base_model = normalized_model_ref(base_model) if base_model else None
    if parent_checkpoint is None and base_model and checkpoint_part(base_model) is not None:
        checkpoint, run = get_checkpoint(db, base_model)
        if checkpoint.adapter:
            parent_checkpoint, from_scratch = checkpoint.id, True
    parent, watermark = None, None
    if parent_checkpoint is not None:
        parent = get_checkpoint(db, parent_checkpoint)
        checkpoint, run = parent
        if checkpoint.kind != "policy" and not str(run.kind).startswith("policy"):
            raise ValueError(f"ckpt:{checkpoint.id} is a {run.kind} checkpoint, not a policy")
        watermark = None if from_scratch else run.data_watermark
        base_model = checkpoint.base_model if checkpoint.adapter or config.full else f"ckpt:{checkpoint.id}"
    base_model = base_model or DEFAULT_MODEL
    return base_model, parent, watermark, model_source(db, base_model)


def train_policy(
    db,
    config: "PolicyConfig",
    algo: str,
    *,
    gather: Callable[[Any, "PolicyConfig", int | None, Any], Gathered],
    build: Callable[[Any, "PolicyTrainer", Gathered, int], tuple[list, dict, list]] | None = None,
    base_model: str | None = None,
    parent_checkpoint=None,
    from_scratch: bool = False,
    critic: int | list[int] | None = None,
    on_progress: Progress | None = None,
) -> PolicyResult:
    """The run around a recipe: resolve what it continues, read its data, record the run,
    train, save, and record checkpoint, metrics and lineage (or mark the run failed).

    - ``base_model``: smollm2 (default), a folder, a hub id, or ``ckpt:<id>``. A LoRA
      policy checkpoint given here is continued, as with ``parent_checkpoint``.
    - ``parent_checkpoint`` (``<id>`` or ``"ckpt:<id>"``): continue that policy (its
      base, its adapter) on data graded after its run's watermark (all data with
      ``from_scratch``). Otherwise all stored data is read.
    - ``gather(db, config, watermark, tokenizer)`` reads the data and raises
      :class:`NothingToTrain` when there is none; ``build(db, trainer, gathered, run_id)``
      turns it into (items, extra info, lineage) once the model is loaded (default: the
      gathered data are the items, and each item's source is a trajectory id or a pair).
    """
    from accelerate import PartialState

    config = config.for_algo(algo)
    base_model, parent, watermark, source = starting_point(db, config, base_model, parent_checkpoint, from_scratch)
    check_artifact_root(db, config.out)
    kind, settings = f"policy:{algo}", run_settings(config, algo, critic) | {"from_scratch": from_scratch}
    processes = PartialState(cpu=config.on_cpu)
    on_main(processes, lambda: check_name(db, kind, settings, config.name))

    gathered = gather(db, config, watermark, load_tokenizer(source))
    earlier = on_main(processes, lambda: continued_run(
        db, kind, settings, name=config.name, out=config.out, watermark=gathered.watermark))
    with training_run(db, kind=kind, base_model=base_model, parent_checkpoint_id=parent[0].id if parent else None,
                      settings=settings, name=config.name, tags=config.tags, report_to=config.report_to,
                      out=config.out, on_cpu=config.on_cpu, resume=earlier) as run:
        trainer = PolicyTrainer(db, config, algo, source, parent, on_progress)
        trainer.base_model = base_model
        trainer.setup_model()
        if build is None:
            items, extra = gathered.data, {}
            lineage = sorted({(i, None) for it in items for i in _trajectories_of(it.source)})
        else:
            items, extra, lineage = build(db, trainer, gathered, run.id)
        snapshots = Snapshots(run, trainer.accelerator, config.snapshot_minutes, gathered.watermark)
        trainer.setup_training(items, reference=snapshots.reference())
        with run.step_log() as steps:
            trainer.train(steps, snapshots)
        size = {"pairs": len(items)} if trainer.dpo else {"trajectories": len({it.source for it in items})}
        metrics = trainer.metrics | gathered.info | extra | size
        checkpoint_id, folder = run.finish(trainer.save, metrics=metrics, watermark=gathered.watermark, lineage=lineage)
        snapshots.discard()
        return PolicyResult(run.id, checkpoint_id, str(folder), metrics)


def _trajectories_of(source) -> tuple[int, ...]:
    """The trajectory ids an item came from: one (rft), or both sides of a pair (mtdpo)."""
    return (source,) if isinstance(source, int) else (source.chosen, source.rejected)


def nothing_to_train(config: "PolicyConfig", watermark, why: str) -> NothingToTrain:
    since = "" if watermark is None else f" graded after watermark {watermark}"
    return NothingToTrain(f"nothing to train on in {config.family}/{config.split}{since}: {why}")


def run_settings(config: PolicyConfig, algo: str, critic_checkpoint_id: int | list[int] | None) -> dict:
    """What a policy run records as its config: the settings that decide what it trains."""
    others = others_settings(algo)  # a run records its own algorithm's settings, not the others' (algorithms.py)
    settings = {k: v for k, v in config.for_algo(algo).to_json().items() if k not in others}
    return settings | {"algo": algo, "critic_checkpoint_id": critic_checkpoint_id}
