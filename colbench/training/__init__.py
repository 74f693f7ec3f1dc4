"""SWEET-RL training: losses, data from the store, the critic, checkpoints and scoring.

Modules:

- ``losses``: Bradley-Terry, DPO, NLL and the per-turn advantage, as pure tensor functions;
- ``sequences``: token rows exactly as the policy read and sampled them;
- ``data``: the critic's examples (c + those rows) and its pairs;
- ``modeling``: model loading for training, LoRA, float32 token log-probs;
- ``config``: the optimisation settings every trainer shares;
- ``critic``: ``CriticConfig`` and ``fit_critic`` (run, checkpoint, lineage in the store);
- ``trainer``: ``PolicyConfig``, the policy's training items and loop, a run start to finish;
- ``sweet``, ``rft``, ``mtdpo``: one recipe each; ``policy.fit_policy`` picks one by name;
- ``checkpoints``: checkpoint folders, run bookkeeping, listing and export;
- ``scoring``: ``CriticModel`` (per-turn advantages, shared-prefix candidate scoring) and
  ``score_turns`` (writes critic_score rows).

Import the submodules; this package imports nothing heavy on its own.
"""

from colbench.errors import ColbenchError


class NothingToTrain(ColbenchError, ValueError):
    """No training data in what a run may consume; the message says why. No run is written."""
