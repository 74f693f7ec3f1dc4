"""Train a policy with a registered algorithm (colbench.training.algorithms: SWEET-RL's turn-level DPO,
the two baselines it is measured against, supervised fine-tuning on demonstrations, and any plugin's)."""
from __future__ import annotations

from colbench.training.algorithms import ALGORITHMS
from colbench.training.config import PolicyConfig
from colbench.training.trainer import PolicyResult, Progress


def fit_policy(
    db,
    config: PolicyConfig | None = None,
    algo: str = "sweet",
    base_model: str | None = None,
    critic_checkpoint=None,
    parent_checkpoint=None,
    on_progress: Progress | None = None,
    from_scratch: bool = False,
) -> PolicyResult:
    """Train a policy with ``algo`` (a registered algorithm); record run, checkpoint and lineage.

    ``critic_checkpoint`` is the critic that ranks for an algorithm that needs one (sweet: required unless it
    ranks by ground truth), or several comma-separated: an ensemble.
    Raises :class:`~colbench.training.NothingToTrain` (no run is written) when the data holds nothing to train on.
    """
    algorithm = ALGORITHMS.get(algo)  # an unknown name: one line naming the registered ones
    from colbench.model_refs import stored_ref

    run = dict(base_model=stored_ref(db, base_model), parent_checkpoint=stored_ref(db, parent_checkpoint),
               on_progress=on_progress,
               from_scratch=from_scratch)
    if algorithm.needs_critic or (algorithm.online and critic_checkpoint is not None):  # online: --turn-credit
        # An ensemble comes as a list of ids (the experiment) or as comma-separated references (the CLI).
        members = (
            critic_checkpoint if isinstance(critic_checkpoint, (list, tuple)) else str(critic_checkpoint).split(",")
        )
        run["critic_checkpoint"] = (
            None if critic_checkpoint is None else ",".join(str(stored_ref(db, str(ref).strip())) for ref in members)
        )
    return algorithm.factory(db, config, **run)
