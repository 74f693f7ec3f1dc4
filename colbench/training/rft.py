"""Rejection fine-tuning, the simplest baseline: SFT on the successful trajectories, loss on
the agent's own sampled tokens only (batch 32 and 4 epochs by default, the paper's)."""
from __future__ import annotations

from typing import Sequence

from colbench.families import family as family_named
from colbench.store.models import Trajectory
from colbench.training.trainer import (
    Gathered,
    PolicyConfig,
    PolicyResult,
    SftItem,
    nothing_to_train,
    train_policy,
    trained_data,
    trajectory_rows
)

_EPS = 1e-9


def successful(trajectories: Sequence[Trajectory], family: str, threshold: float | None = None) -> list[Trajectory]:
    """What rejection fine-tuning trains on.

    - ``threshold`` unset, the family's (colbench.families): None (backend) keeps every
      trajectory whose tests all passed (``success``; reward 1.0 when success was not
      recorded), the paper's definition;
    - otherwise, per task, the best trajectory (lowest id among ties) when its reward
      reaches ``threshold`` (frontend default: 0.8).
    """
    threshold = family_named(family).rft_threshold if threshold is None else threshold
    if threshold is None:
        return [t for t in trajectories if (t.success if t.success is not None else t.reward >= 1.0 - _EPS)]
    best: dict[int, Trajectory] = {}
    for t in sorted(trajectories, key=lambda t: t.id):
        if t.task_id not in best or t.reward > best[t.task_id].reward + _EPS:
            best[t.task_id] = t
    return sorted((t for t in best.values() if t.reward >= threshold - _EPS), key=lambda t: t.id)


def items(db, tokenizer, config: PolicyConfig, watermark: int | None) -> Gathered:
    """One SFT item per row of every successful trajectory above the watermark."""
    fresh, top = trained_data(db, config, watermark)
    chosen = successful(fresh, config.family, config.rft_threshold)
    rows = trajectory_rows(db, tokenizer, config.family, [t.id for t in chosen], config.max_len)
    found = [SftItem(row, source=t.id) for t in chosen for row in rows[t.id] if row.agent_tokens]
    info = {"new_trajectories": len(fresh), "sft_trajectories": len({it.source for it in found}),
            "sft_rows": len(found)}
    return Gathered(found, info, top)


def gather(db, config: PolicyConfig, watermark: int | None, tokenizer) -> Gathered:
    gathered = items(db, tokenizer, config, watermark)
    if not gathered.data:
        raise nothing_to_train(config, watermark, f"no successful trajectory among {gathered.info['new_trajectories']}")
    return gathered


def fit(db, config: PolicyConfig | None = None, **run) -> PolicyResult:
    """Train a policy by rejection fine-tuning (see trainer.train_policy for ``run``'s options)."""
    return train_policy(db, config or PolicyConfig(), "rft", gather=gather, **run)
