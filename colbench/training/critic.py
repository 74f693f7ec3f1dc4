"""The SWEET-RL critic: a Bradley-Terry fit of per-turn advantages.

The critic is the base LM plus a LoRA adapter. A turn's advantage is the
length-normalised log-ratio of the critic against the frozen initial LM (the same
model with the adapter disabled), both reading the training-time information c
before the dialogue:

    A(o_t, a_t, c) = mean over a_t's tokens of  log πθ(token | ..., c) − log πref(token | ..., c)

and a trajectory's score is ``Σ_t β·A``. Bradley-Terry on (chosen, rejected) pairs of
the same task pushes chosen scores above rejected ones.

The recipe (:class:`CriticRecipe`) runs setup → train → evaluate → save, one method
each; :func:`fit_critic` wraps it with the store bookkeeping (run, checkpoint,
lineage). The same code runs on CPU, one GPU (bfloat16 weights, float32 log-probs)
and several GPUs under ``accelerate launch``.
"""
from __future__ import annotations

import time
from contextlib import nullcontext
from dataclasses import dataclass, replace
from typing import Any

import torch

from colbench.model_refs import (
    DEFAULT_MODEL,
    get_checkpoint,
    load_tokenizer,
    model_source,
    normalized_model_ref,
    resolve_dtype,
    stored_ref,
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
from colbench.training.lifecycle import training_run
from colbench.training.snapshots import Snapshots, check_name, continued_run, remaining, walk
from colbench.training.steplog import StepLog
from colbench.training.config import CriticConfig
from colbench.training.losses import bradley_terry_loss, critic_scores
from colbench.training.modeling import (
    TokenLogProbs,
    accelerator_for,
    adapter_disabled,
    evaluating,
    held_bytes,
    load_base,
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


@dataclass
class CriticResult:
    run_id: int | None
    checkpoint_id: int | None
    path: str | None
    metrics: dict


# ---------------------------------------------------------------- the recipe


class CriticRecipe:
    """setup() → train() → evaluate() → save(); the store bookkeeping is fit_critic's."""

    def __init__(self, db, config: CriticConfig, base_model: str, parent: tuple | None, data: D.CriticData,
                 on_progress: Progress | None = None):
        self.db, self.config, self.base_model = db, config, base_model
        self.parent = parent  # (Checkpoint, TrainingRun) or None
        self.data = data
        self.on_progress = on_progress
        self.metrics: dict[str, Any] = {}
        # What can be refused is refused here, before the run's row is written.
        self.source = model_source(db, base_model)
        self.tokenizer = load_tokenizer(self.source)
        self.train_pairs, self.heldout_pairs = D.split_heldout(data.pairs, config.heldout_fraction, config.seed)
        if not self.train_pairs:
            raise NothingToTrain("every pair fell in the held-out tasks; lower --heldout or add tasks")

    # -------------------------------------------------- setup

    def setup(self) -> None:
        cfg = self.config
        acc = self.accelerator = accelerator_for(cfg)
        device = str(acc.device)
        self.sharded = sharding(cfg, acc)
        wanted = {i for p in self.data.pairs for i in (p.chosen, p.rejected)}
        self.examples = D.load_examples(self.db, self.tokenizer, sorted(wanted), training_info=cfg.training_info,
                                        max_len=cfg.max_len)
        self.model = model_to_train(self.source, self.parent, replace(cfg, dtype=load_dtype(cfg, acc)),
                                    load_device(cfg, acc), lora_over_full=False)
        sharded = sharded_scorer(acc, self.model, cfg) if self.sharded else None
        self.reference = self._reference_logps(device, sharded)
        self.scorer, self.optimizer, self.loader, self.scheduler, self.total_steps = prepare_training(
            acc, self.model, cfg, len(self.train_pairs), cfg.epochs, scorer=sharded
        )

    @torch.no_grad()
    def _reference_logps(self, device: str, sharded=None) -> dict[int, list[torch.Tensor]]:
        """trajectory id → float32 token log-probs of the frozen initial LM, one tensor per row, computed once.

        LoRA: the model with its adapter disabled. Full fine-tuning: the model before
        its first step, or (continuing) the base model loaded for this pass only (sharded
        like the model when the run is: ``sharded`` is the model's sharded scorer).
        Each process computes its share; the shares are gathered.
        """
        from accelerate.utils import gather_object

        acc, cfg = self.accelerator, self.config
        ids = sorted(self.examples)
        reference = None
        if cfg.full and self.parent:
            reference = load_base(self.source, load_device(cfg, acc), load_dtype(cfg, acc), trainable=False)
            scorer = (
                sharded_scorer(acc, reference, cfg)
                if sharded is not None
                else TokenLogProbs(reference, autocast=cfg.autocast_dtype(device))
            )
            model, context = reference, nullcontext()
        else:
            scorer = sharded if sharded is not None else TokenLogProbs(self.model, autocast=cfg.autocast_dtype(device))
            model, context = self.model, (nullcontext() if cfg.full else adapter_disabled(self.model))
        found: dict[int, list[torch.Tensor]] = {}
        with evaluating(scorer), evaluating(model), context:
            for batch, keep in lockstep_batches(acc, ids, cfg.batch_size, sharded is not None):
                chunk = [self.examples[i] for i in batch]
                rows, owner = S.flatten([e.rows for e in chunk])
                logps = self._forward(scorer, rows, device)
                if not keep:
                    continue
                for r, (row, k) in enumerate(zip(rows, owner)):
                    found.setdefault(chunk[k].trajectory_id,
                                     []).append(logps[r, : len(row.input_ids)].float().cpu().clone())
        if acc.num_processes > 1:
            merged: dict[int, list[torch.Tensor]] = {}
            for part in gather_object([found]):
                merged.update(part)
            found = merged
        del reference, scorer
        return found

    def _forward(self, scorer, rows, device) -> torch.Tensor:
        ids, mask, turns = D.collate(rows, self.tokenizer.pad_token_id)
        return scorer(ids.to(device), mask.to(device), (turns >= 0).to(device))

    def _scores(self, scorer, examples: list[D.Example], device) -> torch.Tensor:
        """Σ_t β·A of each example (differentiable when grad is on); its rows are summed."""
        rows, owner = S.flatten([e.rows for e in examples])
        _, _, turns = D.collate(rows, self.tokenizer.pad_token_id)
        turns = turns.to(device)
        logps = self._forward(scorer, rows, device)
        ref = torch.zeros_like(logps)
        references = [r for e in examples for r in self.reference[e.trajectory_id]]
        for r, (row, values) in enumerate(zip(rows, references)):
            ref[r, : len(row.input_ids)] = values.to(device)
        owners = torch.tensor(owner, device=device)
        return critic_scores(logps, ref, turns, beta=self.config.beta, normalize=self.config.normalize, owner=owners,
                             owners=len(examples))

    def _pair_scores(self, scorer, pairs: list[D.Pair], device) -> tuple[torch.Tensor, torch.Tensor]:
        unique = sorted({i for p in pairs for i in (p.chosen, p.rejected)})
        scores = self._scores(scorer, [self.examples[i] for i in unique], device)
        row = {trajectory_id: k for k, trajectory_id in enumerate(unique)}
        chosen = scores[[row[p.chosen] for p in pairs]]
        rejected = scores[[row[p.rejected] for p in pairs]]
        return chosen, rejected

    # -------------------------------------------------- train

    def train(self, steplog: StepLog | None = None, snapshots: Snapshots | None = None) -> None:
        cfg, acc = self.config, self.accelerator
        device = acc.device
        resumed = snapshots.load(self.scorer, self.optimizer, self.scheduler) if snapshots else None
        step, spent, tokens = 0, 0.0, 0
        if resumed:
            step, spent, tokens, self.metrics = (resumed.loop[k] for k in ("step", "seconds", "tokens", "metrics"))
            self.metrics["resumed_at_step"] = resumed.step
        started = time.perf_counter() - spent
        for epoch in range(cfg.epochs):
            if resumed and epoch < resumed.epoch:
                walk(self.loader)
                continue
            losses, correct, seen, micro = [], 0, 0, []
            if resumed and epoch == resumed.epoch:
                losses, correct, seen = (resumed.loop[k] for k in ("losses", "correct", "seen"))
            for batch in remaining(self.loader, resumed, epoch):
                pairs = [self.train_pairs[i] for i in batch]
                with acc.accumulate(self.scorer):
                    chosen, rejected = self._pair_scores(self.scorer, pairs, device)
                    loss = bradley_terry_loss(chosen, rejected)
                    figures = optimizer_step(acc, self.scorer, self.optimizer, self.scheduler, loss, cfg.max_grad_norm)
                losses.append(float(loss.detach()))
                correct += int((chosen.detach() > rejected.detach()).sum())
                seen += len(pairs)
                tokens += sum(self.examples[i].tokens for p in pairs for i in {p.chosen, p.rejected})
                margin = (chosen - rejected).detach()
                micro.append({"loss": losses[-1], "pair_accuracy": float((margin > 0).float().mean()),
                              "margin": float(margin.mean())})
                if acc.sync_gradients:
                    step += 1
                    means = means_over_processes(acc, {k: sum(m[k] for m in micro) / len(micro) for k in micro[0]})
                    if steplog is not None:
                        steplog.record(step, epoch + 1, means | figures)
                    micro = []
                    if self.on_progress and acc.is_main_process:
                        self.on_progress("train", step, self.total_steps, {"epoch": epoch + 1, "loss": losses[-1]})
                    if snapshots:
                        loop = {"step": step, "seconds": time.perf_counter() - started, "tokens": tokens,
                                "metrics": self.metrics, "losses": losses, "correct": correct, "seen": seen}
                        snapshots.after_step(step, self.total_steps, steplog,
                                             (self.scorer, self.optimizer, self.scheduler), epoch=epoch,
                                             batches=len(losses), loop=loop)
            sums = summed_over_processes(acc,
                                         {"loss": sum(losses), "batches": len(losses), "correct": correct,
                                          "seen": seen})
            self.metrics.setdefault("epochs", []).append(
                {"epoch": epoch + 1, "loss": sums["loss"] / max(sums["batches"], 1),
                 "train_pair_accuracy": sums["correct"] / max(sums["seen"], 1)}
            )
        tokens = int(summed_over_processes(acc, {"tokens": tokens})["tokens"])
        elapsed = time.perf_counter() - started
        last = self.metrics["epochs"][-1]
        self.metrics.update(
            processes=acc.num_processes,
            sharded=self.sharded,
            held=held_bytes(acc, self.scorer, self.optimizer),
            steps=step,
            train_loss=last["loss"],
            train_pair_accuracy=last["train_pair_accuracy"],
            train_seconds=round(elapsed, 3),
            train_tokens=tokens,
            tokens_per_second=round(tokens / elapsed, 1) if elapsed > 0 else None,
        )

    # -------------------------------------------------- evaluate

    @torch.no_grad()
    def evaluate(self) -> float | None:
        """Held-out pair accuracy: the share of held-out pairs whose chosen side scores higher (ties count as wrong)."""
        pairs = self.heldout_pairs
        self.metrics["heldout_pairs"] = len(pairs)
        if not pairs:
            self.metrics["heldout_accuracy"] = None
            return None
        model = self.accelerator.unwrap_model(self.scorer)
        right = 0
        with evaluating(model):
            for start in range(0, len(pairs), self.config.batch_size):
                chunk = pairs[start : start + self.config.batch_size]
                chosen, rejected = self._pair_scores(model, chunk, self.accelerator.device)
                right += int((chosen > rejected).sum())
        accuracy = right / len(pairs)
        self.metrics["heldout_accuracy"] = accuracy
        return accuracy

    # -------------------------------------------------- save

    def save(self, folder, card=None) -> tuple[bool, str | None]:
        return save_trained(self.accelerator, self.scorer, self.tokenizer, folder, card,
                            dtype=resolve_dtype(self.config.dtype, str(self.accelerator.device)))


# ---------------------------------------------------------------- the entry point


# What makes a critic the same kind of critic: a later fit continues the newest one.
CONTINUED_SETTINGS = ("family", "split", "training_info", "normalize", "pairs", "full")


def latest_critic(db, base_model: str | None, config: CriticConfig) -> int | None:
    """The newest finished critic checkpoint with the same family and settings (training
    info, normalisation, pair rule, LoRA or full), and the same base model when one is named."""
    settings = {name: getattr(config, name) for name in CONTINUED_SETTINGS}
    with db.read() as session:
        found = queries.same_run(session, "critic", settings, base_model=base_model)
    return found[0].id if found else None


def fit_critic(
    db,
    config: CriticConfig | None = None,
    base_model: str | None = None,
    parent_checkpoint=None,
    from_scratch: bool = False,
    on_progress: Progress | None = None,
) -> CriticResult:
    """Fit a critic on stored graded trajectories; record run, checkpoint and lineage.

    - ``parent_checkpoint=None``: a new critic on ``base_model`` (default smollm2),
      trained on all the data.
    - ``parent_checkpoint=<id>`` (or ``"ckpt:<id>"``): continue that critic (its base
      model, its adapter) on the graded trajectories it has not consumed, i.e. above
      its run's data watermark; ``from_scratch=True`` trains it on all the data again.
    - ``parent_checkpoint="latest"``: the newest compatible critic (see
      :func:`latest_critic`; of ``base_model`` when given, of any base otherwise),
      else a new one. With ``from_scratch``: always a new one.

    Which pairs: see :func:`colbench.training.data.read_pairs`. Raises
    :class:`NothingToTrain` (no run is written) when there are none. A rerun of a stopped fit continues it
    (snapshots.py).
    """
    from accelerate import PartialState

    config = config or CriticConfig()
    base_model = normalized_model_ref(stored_ref(db, base_model)) if base_model else None
    parent_checkpoint = stored_ref(db, parent_checkpoint)
    if parent_checkpoint == "latest":
        parent_checkpoint = None if from_scratch else latest_critic(db, base_model, config)
    parent = None
    watermark = None
    if parent_checkpoint is not None:
        parent = get_checkpoint(db, parent_checkpoint)
        checkpoint, run = parent
        if run.kind != "critic":
            raise ValueError(f"ckpt:{checkpoint.id} is a {run.kind} checkpoint, not a critic")
        if base_model and base_model != checkpoint.base_model:
            raise ValueError(f"ckpt:{checkpoint.id} is a critic of {checkpoint.base_model}, not of {base_model}")
        base_model = checkpoint.base_model
        watermark = None if from_scratch else run.data_watermark
    base_model = base_model or DEFAULT_MODEL
    check_artifact_root(db, config.out)
    settings = config.to_json() | {"from_scratch": from_scratch}
    processes = PartialState(cpu=config.on_cpu)
    on_main(processes, lambda: check_name(db, "critic", settings, config.name))

    data = D.read_pairs(db, family=config.family, split=config.split, watermark=watermark, rule=config.pairs,
                        policies=config.policy_list)
    if not data.pairs:
        since = "" if watermark is None else f" graded after watermark {watermark}"
        raise NothingToTrain(
            f"no training pairs among {len(data.new_ids)} {config.family}/{config.split} trajectories{since}"
            + (
                " (the 'correct' pair rule needs a task with a fully correct trajectory and a lower one)"
                if config.pairs == "correct"
                else (
                    " (the 'margin' pair rule needs two trajectories of a task whose rewards are"
                    f" {D.MIN_REWARD_GAP} apart)"
                )
            )
        )

    earlier = on_main(processes, lambda: continued_run(
        db, "critic", settings, name=config.name, out=config.out, watermark=data.watermark))
    recipe = CriticRecipe(db, config, base_model, parent, data, on_progress)
    with training_run(db, kind="critic", base_model=base_model, parent_checkpoint_id=parent[0].id if parent else None,
                      settings=settings, name=config.name, tags=config.tags, report_to=config.report_to,
                      out=config.out, on_cpu=config.on_cpu, resume=earlier) as run:
        recipe.setup()
        snapshots = Snapshots(run, recipe.accelerator, config.snapshot_minutes, data.watermark)
        with run.step_log() as steps:
            recipe.train(steps, snapshots)
        accuracy = recipe.evaluate()
        metrics = recipe.metrics | {
            "pairs": len(data.pairs),
            "train_pairs": len(recipe.train_pairs),
            "new_trajectories": len(data.new_ids),
            "pool_trajectories": data.pool_size,
            "heldout_accuracy": accuracy,
        }
        consumed = sorted({i for p in recipe.train_pairs for i in (p.chosen, p.rejected)})
        checkpoint_id, folder = run.finish(
            recipe.save, metrics=metrics, watermark=data.watermark, lineage=[(i, None) for i in consumed]
        )
        snapshots.discard()
        return CriticResult(run.id, checkpoint_id, str(folder), metrics)
