"""Supervised fine-tuning on demonstrations: the warm start of a small model.

The loss and data are rejection fine-tuning's (the agent's sampled tokens of successful
trajectories), read from the demonstrating policies only: by default the scripted agents'
(``scripted:*``, `colbench rollout --engine scripted:<policy>`), whose dialogues ask for each
hidden fact and then answer. Pass ``--policies`` to learn from others (e.g. a stronger model's).
"""
from __future__ import annotations

from dataclasses import replace

from colbench.training import rft
from colbench.training.trainer import PolicyConfig, PolicyResult, train_policy

DEMONSTRATIONS = "scripted:*"


def fit(db, config: PolicyConfig | None = None, **run) -> PolicyResult:
    """Train a policy on demonstrations (see trainer.train_policy for ``run``'s options)."""
    config = config or PolicyConfig()
    if config.policies is None:
        config = replace(config, policies=DEMONSTRATIONS)
    return train_policy(db, config, "sft", gather=rft.gather, **run)
