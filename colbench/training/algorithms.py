"""The policy algorithms by name, with what callers ask of each (its traits).

Each algorithm is a recipe module with a ``fit(db, config, **run) -> PolicyResult`` (sweet.py,
rft.py, mtdpo.py, sft.py: read the data, build the items, train with trainer.py's loop); this
registry names it, imports it only when it runs (``colbench --help`` stays free of torch), and
also loads the ``colbench.algorithms`` entry points: a separate package adds an algorithm with one
module that registers its ``fit`` here::

    @ALGORITHMS.register("kto", "KTO on single trajectories", settings=("beta",))
    def fit(db, config, **run): ...

Traits:
- ``epochs``, ``batch_size``: its defaults when --epochs or --batch-size are not given.
- ``settings``: the PolicyConfig fields only it (of the registered algorithms) reads; a run records
  its own and not the others' (trainer.run_settings), so two runs differ only where it matters.
- ``needs_critic``: it ranks with a critic checkpoint (--critic), unless it ranks by ground truth.
- ``pairwise``: it trains on preference pairs (its summary counts pairs, not trajectories).
- ``online``: it rolls its own policy out as it trains (its summary counts steps and rewards).
"""
from __future__ import annotations

import importlib

from colbench.registry import Registry

DEFAULT_BATCH_SIZE = 8  # the paper's critic and DPO batch; rejection fine-tuning uses 32

# The settings of the preference losses (sweet, mtdpo), and of SWEET-RL's candidate sampling.
PREFERENCE = ("beta", "nll_weight", "loss", "label_smoothing", "stop_on_displacement")
CANDIDATES = ("fraction", "selection", "turns", "candidates", "pairs_per_turn", "temperature", "max_new_tokens",
              "score", "sample_batch_size", "base_url", "served_model")

ALGORITHMS = Registry("algorithm", entry_points="colbench.algorithms", traits={
    "epochs": 1, "batch_size": DEFAULT_BATCH_SIZE, "settings": (), "needs_critic": False, "pairwise": False,
    "online": False,
})
# The settings of online RL (colbench/online_rl.py): how it rolls out, rewards, credits turns and updates.
ONLINE = ("tasks", "steps", "tasks_per_step", "group", "reward", "clip", "kl_beta", "turn_credit", "turn_credit_weight",
          "critic_refit_every", "save_every", "engine", "simulator", "sandbox", "temperature", "max_new_tokens",
          "sample_batch_size", "base_url", "served_model", "clip_high", "tis_cap", "tis_level", "loss_aggregation",
          "dynamic_sampling", "cut_turns", "cut_penalty", "eval_every", "eval_tasks", "eval_samples", "eval_limit",
          "collapse_entropy", "on_collapse")


def recipe(module: str, **fixed):
    """The ``fit`` of a recipe module, imported when it runs (with ``fixed`` keyword arguments: one module serving
    several algorithms). Named by module, as an entry point names its object: the recipes import the trainer, which
    reads this registry, so importing them here would make a cycle."""

    def fit(db, config, **run):
        return importlib.import_module(module).fit(db, config, **fixed, **run)

    fit.__qualname__ = f"{module}.fit"
    return fit


ALGORITHMS.register("sweet", "turn-level DPO on critic-ranked candidates (SWEET-RL)", settings=CANDIDATES + PREFERENCE,
                    needs_critic=True, pairwise=True)(recipe("colbench.training.sweet"))
ALGORITHMS.register("rft", "SFT on successful trajectories (rejection fine-tuning)", epochs=4, batch_size=32,
                    settings=("rft_threshold",))(recipe("colbench.training.rft"))
ALGORITHMS.register("mtdpo", "trajectory-level DPO (multi-turn DPO)", settings=("pairs",) + PREFERENCE,
                    pairwise=True)(recipe("colbench.training.mtdpo"))
ALGORITHMS.register("sft", "SFT on demonstrations: successful trajectories of --policies, default scripted:*",
                    epochs=3, settings=("rft_threshold",))(recipe("colbench.training.sft"))  # sft reads rft's data
ALGORITHMS.register("grpo", "online RL: group-relative advantages, PPO-clipped updates on fresh rollouts (GRPO)",
                    settings=ONLINE + ("no_std",), online=True)(recipe("colbench.online_rl", estimator="grpo"))
ALGORITHMS.register("rloo", "online RL: leave-one-out advantages, PPO-clipped updates on fresh rollouts (RLOO)",
                    settings=ONLINE, online=True)(recipe("colbench.online_rl", estimator="rloo"))


def own_settings(algo: str) -> tuple[str, ...]:
    return tuple(ALGORITHMS.get(algo).settings)


def others_settings(algo: str) -> set[str]:
    """The algorithm-specific settings of every other registered algorithm, less its own."""
    return {name for choice in ALGORITHMS for name in choice.settings} - set(own_settings(algo))
