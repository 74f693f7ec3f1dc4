"""Where a study's settings leave the paper's recipe as the official run carried it out.

The official run (facebookresearch/sweet_rl's README and scripts, its OpenRLHF fork
YifeiZhou02/collab_openrlhf; see shared/reference/sweet-rl-facts.md) is the yardstick:
a setting is listed when the study's value differs from what that run used. Some
differences are this toolkit's design and hold for every study (``BY_DESIGN``); the rest
depend on the study's config (``SETTINGS``). `colbench experiment` prints the list with
its results, and the README's studies quote it.

Everything here reads a study's config as a plain dict (``asdict(ExperimentConfig)``, or
results.json's "config"), so a table written long ago still lists its own deviations.
"""
from __future__ import annotations

from typing import Callable

# The differences every study has, because this toolkit does it another way on purpose.
BY_DESIGN = (
    "c is worded 'Reference solution (training-time information, hidden from the agent):' followed by the reference "
    "(official: 'In light that the final answer is: <reference>.'); the critic learns whichever wording it is given",
    "the candidate ranking averages the critic's log-probs over the candidate's own tokens, the same tokens as the "
    "sampler's mean (official: the critic's mean also covers the 4 assistant-header tokens before the candidate)",
    "a candidate ends with the end-of-turn token only when it stopped, in ranking and in DPO (official: the end token "
    "is appended to every chosen and rejected candidate, truncated ones too)",
    "the 0.01 NLL term averages over the chosen turn's own tokens (official: --no_prompt, over the whole chosen "
    "sequence, the dialogue before the turn included); DPO sums log-probs over the turn, as the official run does "
    "(the prompt's tokens cancel there)",
)

PAPER_TURN_TOKENS = 1024
PAPER_CANDIDATES = 16
PAPER_CRITIC_EPOCHS = 4
PAPER_CRITIC_MAX_LEN = 8192
PAPER_POLICY_MAX_LEN = 16384
PAPER_LR = 2e-7
PAPER_BEST_OF = 32
PAPER_FRACTION = 0.1


def _lr(trainer: dict) -> float:
    from colbench.training.config import FULL_LR, LORA_LR

    return trainer.get("learning_rate") or trainer.get("lr") or (FULL_LR if trainer.get("full") else LORA_LR)


def _differs(value, paper) -> bool:
    return value is not None and value != paper


# (what, the study's value from its config, the official run's value, how to say it); the
# line is printed when the value is set and differs.
Setting = tuple[str, Callable[[dict], object], object, Callable[[object], str]]
SETTINGS: tuple[Setting, ...] = (
    ("tokens per agent turn", lambda c: c.get("max_new_tokens"), PAPER_TURN_TOKENS,
     lambda v: f"{v} tokens per agent turn (paper: {PAPER_TURN_TOKENS})"),
    ("SWEET candidates", lambda c: (c.get("policy") or {}).get("candidates"), PAPER_CANDIDATES,
     lambda v: f"{v} SWEET candidates per turn (paper: {PAPER_CANDIDATES})"),
    ("critic epochs", lambda c: (c.get("critic") or {}).get("epochs"), PAPER_CRITIC_EPOCHS,
     lambda v: f"{v} critic epochs (paper: {PAPER_CRITIC_EPOCHS} for backend)"),
    ("critic context", lambda c: (c.get("critic") or {}).get("max_len"), PAPER_CRITIC_MAX_LEN,
     lambda v: f"the critic reads at most {v} tokens (official: {PAPER_CRITIC_MAX_LEN})"),
    ("policy context", lambda c: (c.get("policy") or {}).get("max_len"), PAPER_POLICY_MAX_LEN,
     lambda v: f"the policy trains on at most {v} tokens (official: {PAPER_POLICY_MAX_LEN})"),
    ("critic fine-tuning", lambda c: (c.get("critic") or {}).get("full"), True,
     lambda v: "LoRA critic (official: full fine-tune)"),
    ("policy fine-tuning", lambda c: (c.get("policy") or {}).get("full"), True,
     lambda v: "LoRA policies (official: full fine-tune)"),
    ("critic lr", lambda c: c.get("critic") and _lr(c["critic"]), PAPER_LR,
     lambda v: f"critic learning rate {v:g} (official: {PAPER_LR:g} for 8B)"),
    ("policy lr", lambda c: c.get("policy") and _lr(c["policy"]), PAPER_LR,
     lambda v: f"policy learning rate {v:g} (official: {PAPER_LR:g} for 8B)"),
    ("critic normalisation", lambda c: (c.get("critic") or {}).get("normalize"), "trajectory",
     lambda v: (
         f"the critic's advantage is normalised per {v} (the paper's formula; the official code: over the"
         " trajectory's agent tokens)"
         if v == "turn"
         else "the critic's advantage is not length-normalised (official: over the trajectory's agent tokens)"
     )),
    ("SWEET fraction", lambda c: (c.get("policy") or {}).get("fraction"), PAPER_FRACTION,
     lambda v: f"SWEET samples candidates for {v:.0%} of the data (official: {PAPER_FRACTION:.0%})"),
    ("SWEET selection", lambda c: (c.get("policy") or {}).get("selection"), "trajectories",
     lambda v: "SWEET's fraction is a hashed share of turns (official: the first trajectories, one sample per task)"),
    ("SWEET score", lambda c: (c.get("policy") or {}).get("score"), "sampler",
     lambda v: (
         "SWEET ranks candidates by the critic's own advantage (official: the critic's mean log-prob minus the"
         " sampler's)"
     )),
    ("policy NLL", lambda c: (c.get("policy") or {}).get("nll_weight"), 0.01,
     lambda v: f"NLL weight {v:g} on the chosen side (official: 0.01)"),
    ("policy beta", lambda c: (c.get("policy") or {}).get("beta"), 0.1, lambda v: f"DPO β {v:g} (official: 0.1)"),
    ("critic beta", lambda c: (c.get("critic") or {}).get("beta"), 0.1, lambda v: f"critic β {v:g} (official: 0.1)"),
    ("best-of-N", lambda c: c.get("best_of") or None, PAPER_BEST_OF,
     lambda v: f"best-of-{v} (paper: up to {PAPER_BEST_OF})"),
    ("simulator", lambda c: c.get("simulator"), None,
     lambda v: (
         "the built-in rule-based human (paper: Llama-3.1-70B-Instruct)"
         if v == "builtin"
         else f"the human simulator is {v} (paper: Llama-3.1-70B-Instruct)"
     )),
    ("grading", lambda c: c.get("grading"), "official", lambda v: f"grading: {v} (not the official grader's outcomes)"),
)


def deviations(config: dict) -> list[str]:
    """One line per way the study ``config`` (a dict) leaves the official run's recipe."""
    found = []
    for _, value_of, paper, say in SETTINGS:
        value = value_of(config)
        if _differs(value, paper):
            found.append(say(value))
    pairs = (config.get("critic") or {}).get("pairs")
    if pairs and pairs != "correct":
        found.append("critic pairs: rewards ≥ 0.1 apart (the paper's frontend rule; backend: fully correct vs lower)")
    if (config.get("policy") or {}).get("rft_threshold") is not None:
        found.append("rejection fine-tuning keeps each task's best partial trajectory (paper: fully correct ones)")
    return found + list(BY_DESIGN)
