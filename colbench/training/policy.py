"""The policy recipes by name: SWEET-RL's turn-level DPO, the two baselines it is measured
against, and supervised fine-tuning on demonstrations (a small model's warm start). Each recipe
is its own module (sweet.py, rft.py, mtdpo.py, sft.py: read the data, build the items, train
with trainer.py's loop); this module only picks one."""
from __future__ import annotations

from colbench.training import mtdpo, rft, sft, sweet
from colbench.training.config import ALGOS, PolicyConfig
from colbench.training.trainer import PolicyResult, Progress

RECIPES = {"sweet": sweet.fit, "rft": rft.fit, "mtdpo": mtdpo.fit, "sft": sft.fit}
assert tuple(RECIPES) == ALGOS


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
    """Train a policy with ``algo`` (sweet, rft, mtdpo or sft); record run, checkpoint and lineage.

    ``critic_checkpoint`` is the critic that scores sweet's candidates (required for sweet unless it ranks by
    ground truth), or several comma-separated: an ensemble.
    Raises :class:`~colbench.training.NothingToTrain` (no run is written) when the data holds nothing to train on.
    """
    if algo not in RECIPES:
        raise ValueError(f"algo must be one of {', '.join(ALGOS)}; got {algo!r}")
    from colbench.refs import stored_ref

    run = dict(base_model=stored_ref(db, base_model), parent_checkpoint=stored_ref(db, parent_checkpoint),
               on_progress=on_progress,
               from_scratch=from_scratch)
    if algo == "sweet":
        # An ensemble comes as a list of ids (the experiment) or as comma-separated references (the CLI).
        members = (
            critic_checkpoint if isinstance(critic_checkpoint, (list, tuple)) else str(critic_checkpoint).split(",")
        )
        critics = (
            None if critic_checkpoint is None else ",".join(str(stored_ref(db, str(ref).strip())) for ref in members)
        )
        return sweet.fit(db, config, critic_checkpoint=critics, **run)
    return RECIPES[algo](db, config, **run)
