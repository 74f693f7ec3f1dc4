"""rft-strict: rejection fine-tuning on the trajectories whose reward is full (1.0), whatever the family's rule.

An algorithm is a name, its traits, and a fit that hands the shared training lifecycle (train_policy: the run, its
steps, checkpoint and lineage) a gather function that turns stored trajectories into training items; this one
reuses rejection fine-tuning's, on its own threshold.
"""
from __future__ import annotations

from dataclasses import replace

from colbench.training.algorithms import ALGORITHMS


@ALGORITHMS.register("rft-strict", "rejection fine-tuning on full-reward trajectories only", epochs=2,
                     settings=("rft_threshold",))
def fit(db, config, **run):
    from colbench.training import rft
    from colbench.training.trainer import train_policy

    return train_policy(db, replace(config, rft_threshold=1.0), "rft-strict", gather=rft.gather, **run)
