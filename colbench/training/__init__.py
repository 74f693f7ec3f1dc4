"""SWEET-RL training: losses, data from the store, the critic, checkpoints and scoring.

Modules:

- ``losses``: Bradley-Terry, DPO, NLL and the per-turn advantage, as pure tensor functions;
- ``data``: the critic's input (c + chat-templated dialogue), agent-token masks, pairs;
- ``modeling``: model loading for training, LoRA, float32 token log-probs;
- ``policy``: ``PolicyConfig`` and ``fit_policy`` (sweet, rft, mtdpo), checkpoint export;
- ``sweet``: SWEET's candidates, their scores and pairs, stored so a run resumes;
- ``critic``: ``CriticConfig`` and ``fit_critic`` (run, checkpoint, lineage in the store);
- ``checkpoints``: checkpoint folders and rows;
- ``scoring``: ``CriticModel`` (per-turn advantages, shared-prefix candidate scoring) and
  ``score_turns`` (writes critic_score rows).

Import the submodules; this package imports nothing heavy on its own.
"""


class NothingToTrain(ValueError):
    """No training data in what a run may consume; the message says why. No run is written."""
