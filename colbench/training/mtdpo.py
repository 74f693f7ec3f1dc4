"""Multi-turn DPO, the strongest baseline: trajectory-level DPO whose log-probs sum over every
agent turn, on the critic's pairs (same task; backend: a fully correct trajectory against each
lower one; frontend: rewards ≥ 0.1 apart), without training-time information."""
from __future__ import annotations

from colbench.training import data as D
from colbench.training.trainer import (
    Gathered,
    PairItem,
    PolicyConfig,
    PolicyResult,
    nothing_to_train,
    train_policy,
    trajectory_rows
)


def items(db, tokenizer, config: PolicyConfig, watermark: int | None) -> Gathered:
    """One DPO item per pair of trajectories; each side holds every row of its trajectory."""
    data = D.read_pairs(db, family=config.family, split=config.split, watermark=watermark, rule=config.pairs,
                        policies=config.policy_list)
    wanted = {i for p in data.pairs for i in (p.chosen, p.rejected)}
    rows = trajectory_rows(db, tokenizer, config.family, sorted(wanted), config.max_len)
    has_agent_tokens = {i: any(r.agent_tokens for r in rows[i]) for i in rows}
    found = [
        PairItem(rows[p.chosen], rows[p.rejected], source=p)
        for p in data.pairs
        if has_agent_tokens[p.chosen] and has_agent_tokens[p.rejected]
    ]
    return Gathered(found, {"new_trajectories": len(data.new_ids), "pool_trajectories": data.pool_size}, data.watermark)


def gather(db, config: PolicyConfig, watermark: int | None, tokenizer) -> Gathered:
    gathered = items(db, tokenizer, config, watermark)
    if not gathered.data:
        raise nothing_to_train(config, watermark,
                               f"no trajectory pairs among {gathered.info['new_trajectories']} trajectories")
    return gathered


def fit(db, config: PolicyConfig | None = None, **run) -> PolicyResult:
    """Train a policy by multi-turn DPO (see trainer.train_policy for ``run``'s options)."""
    return train_policy(db, config or PolicyConfig(), "mtdpo", gather=gather, **run)
