"""Every trainer's settings, declared once with their defaults, bounds and help (the documentation
and the command line, see colbench.options): the optimisation settings they share, the critic's, the
policy's; and the optimiser and schedule built from them. Nothing here imports torch until used."""
from __future__ import annotations

import math
from pathlib import Path
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Iterable

from colbench import protocol
from colbench.errors import ColbenchError
from colbench.options import check, help_of, option
from colbench.runs import check_run_name
from colbench.families import (
    DEFAULT_FAMILY,
    family as family_named,
    help_text as family_help,
    names as family_names,
    parse_selector,
    selectors_help,
)
from colbench.grading.sandboxes import AUTO as AUTO_SANDBOX, CHOICES as SANDBOX_CHOICES, sandbox_help
from colbench.simulators import simulator_help
from colbench.simulators.guard import DEFAULT_GUARD, GUARD_HELP, GUARDS
from colbench.tasks.spec import is_held_out
from colbench.training.algorithms import ALGORITHMS, DEFAULT_BATCH_SIZE
from colbench.training.samplers import AUTO as SAMPLER_AUTO, SAMPLERS, is_served, sampler_help

if TYPE_CHECKING:  # torch is imported where it is used, so `colbench --help` stays fast
    import torch

LORA_LR = 2e-5
FULL_LR = 2e-7
NORMALIZATIONS = ("turn", "trajectory", "none")
MIN_REWARD_GAP = 0.1
PAIR_RULES = ("correct", "margin")
PAIR_RULE_HELP = (
    "How trajectories of the same task make preference pairs. 'correct' (backend default, the paper's): only tasks "
    "with a fully correct trajectory; the first one is chosen against every lower one. 'margin' (frontend default, "
    f"the paper's): every two trajectories whose rewards differ by at least {MIN_REWARD_GAP}; on backend the reward is "
    "the share of tests passed, which gives pairs to a model that never solves a task outright. Default: the family's."
)

AUTOCAST_MODES = ("auto", "bf16", "off")
SHARD_MODES = ("none", "full")
QUIET_DEFAULTS = {"shard": "none", "base_url": None, "served_model": None}  # how a run ran, recorded only when set
NOT_RECORDED = ("name", "tags", "snapshot_minutes")  # labels, and how often it snapshots: never what it trains


@dataclass
class TrainingConfig:
    """Settings of every trainer: optimisation, and whose trajectories it reads (the critic's and
    the policy's configs extend it)."""

    lr: float | None = option(
        None,
        f"Peak learning rate. Default {LORA_LR:g} with LoRA, {FULL_LR:g} with full fine-tuning. The paper's 2e-7 is "
        "for full fine-tuning of an 8B model; a rank-16 LoRA adapter (B starts at zero, scale α/r=2) barely moves at "
        "that rate. LoRA wants about 10x a full fine-tune's rate, and this toolkit's models are far smaller than 8B "
        "(which also tolerates larger rates); 2e-5 is 100x.", min=0.0)
    batch_size: int | None = option(None, (
        "Examples (pairs; trajectory rows for rft) per forward/backward pass and process. Default:"
        f" {DEFAULT_BATCH_SIZE}, and 32 for rft (the paper's)."
    ), min=1)
    grad_accum: int = option(1, (
        "Passes per optimiser step. Effective batch = batch_size x grad_accum x processes. Lower batch_size and raise"
        " this to save memory."
    ), min=1)
    lora_rank: int = option(16, "LoRA rank r (α = 2r, no dropout, every linear layer but the output layer).", min=1)
    full: bool = option(False, (
        "Full fine-tuning instead of LoRA. Reference log-probs are computed before training, so no second model is"
        " kept; the checkpoint holds full weights."
    ))
    shard: str = option(
        "none",
        "How `colbench launch -n N` spreads the model over its processes. 'none': every process holds the whole model,"
        " its gradients and optimiser state (DDP), and the processes split the data. 'full': PyTorch FSDP2"
        " (fully_shard): each decoder layer and the rest (embeddings, final norm, output layer) are sharded, so each"
        " process holds 1/N of the weights, gradients and AdamW state, and gathers one layer at a time to compute; the"
        " processes still split the data. For full fine-tuning of models that do not fit one GPU (8B: ~16 bytes per"
        " parameter with AdamW, 128 GB), and LoRA too (the frozen base is sharded). On GPUs the sharded weights,"
        " gradients and AdamW state are float32 and the layers compute in bfloat16 (MixedPrecisionPolicy; the output"
        " layer and log-probs stay float32) unless --dtype says otherwise; on CPUs it runs over gloo. The checkpoint is"
        " gathered on rank 0 into the same folder as without sharding. SWEET's candidates are then sampled by a"
        " separate engine on the starting weights (--sampler), never by the sharded model. One process: nothing to"
        " shard, as 'none'. docs/scale.md has the 8-GPU recipe.",
        choices=SHARD_MODES,
    )
    gradient_checkpointing: bool = option(
        False, "Activation checkpointing: recompute activations in the backward pass (less memory, ~30% slower)."
    )
    seed: int = option(0, "Seed for data selection, sampling, pair picks, data order and torch.")
    warmup_ratio: float = option(
        0.03,
        "Linear warm-up as a share of the optimiser steps (rounded down), then --lr-schedule (paper: 3%, cosine).",
        min=0.0
    )
    lr_schedule: str = option("cosine", (
        "After the warm-up: 'cosine' decay to 0 at the last optimiser step, or 'constant' (online RL's usual choice:"
        " a run extended by more steps keeps its rate)."
    ), choices=("cosine", "constant"))
    adam_betas: tuple[float, float] = option((0.9, 0.95), "AdamW betas (paper: 0.9, 0.95).")
    weight_decay: float = option(0.0, "AdamW weight decay.", min=0.0)
    max_grad_norm: float = option(1.0, "Gradient clipping by global norm (paper: 1.0); 0 turns it off.", min=0.0)
    device: str = option(
        "auto", "auto (cuda when available), cpu or cuda. Under accelerate launch each process takes its own GPU."
    )
    dtype: str | None = option(None, (
        "Model weights' dtype: float32 on CPU, bfloat16 on GPU by default. Log-probs entering a loss are float32"
        " either way."
    ))
    autocast: str = option(
        "auto",
        "Mixed precision over float32 weights: 'bf16' runs the decoder's matrix products in bfloat16 (torch.autocast) "
        "while weights, optimiser state, the output layer and log-probs stay float32; 'off' does not. 'auto': bf16 on "
        "CPUs with native bfloat16 (AVX512-BF16 or AMX: 1.8x faster training on 2 Zen 4 cores, "
        "benchmarks/train_autocast.py), off elsewhere (GPU weights are bfloat16 already).",
        choices=AUTOCAST_MODES,
    )
    report_to: str = option(
        "none",
        "Also send the per-step figures (always stored: `colbench runs show`) to tensorboard or wandb, through"
        " accelerate's trackers, under <artefacts>/runs/<run>. wandb runs offline unless $WANDB_MODE says otherwise.",
        choices=("none", "tensorboard", "wandb")
    )
    out: str | None = option(None, "Checkpoint folder. Default: checkpoints/<kind>-<run id> beside the database.")
    snapshot_minutes: float = option(10.0, (
        "Minutes of training between snapshots (the trainable weights, the optimiser's state and the place in the"
        " data, beside the checkpoint folder; the previous one is removed). A rerun of the same command continues a"
        " stopped run from its last snapshot, on the same data, to the weights an uninterrupted run reaches. A full"
        " fine-tune's snapshot is ~12 bytes a parameter (1.6 GB at 135M). 0: none. Online RL keeps its own"
        " checkpoints (--save-every)."
    ), min=0.0)
    name: str | None = option(
        None, "Name the training run (unique in the store; no ':'), to find it with `colbench runs show NAME`."
    )
    tags: list[str] = option([], "Tag the training run (repeat the flag); `colbench runs ls --tag` filters by it.",
                             flags=("--tag",))
    policies: str | None = option(None, (
        "Train only on trajectories of these policies: comma-separated names as stored (`colbench ls`), a trailing *"
        " matching a prefix (e.g. 'scripted:*' for scripted agents' demonstrations, or 'ckpt:12'). Default: every"
        " policy's."
    ))

    def __post_init__(self):
        check(self)  # every field's declared bounds
        if not 0 <= self.warmup_ratio < 1:
            raise ValueError("warmup_ratio must be in [0, 1)")
        self.adam_betas = tuple(self.adam_betas)
        self.tags = list(self.tags)
        check_run_name(self.name)
        check_out_folder(self.out)

    @property
    def policy_list(self) -> list[str] | None:
        return [p.strip() for p in self.policies.split(",") if p.strip()] or None if self.policies else None

    @property
    def learning_rate(self) -> float:
        return self.lr if self.lr is not None else (FULL_LR if self.full else LORA_LR)

    @property
    def on_cpu(self) -> bool:
        import torch

        return self.device == "cpu" or (self.device == "auto" and not torch.cuda.is_available())

    def autocast_dtype(self, device) -> torch.dtype | None:
        """The dtype the decoder computes in under autocast on ``device``, or None for none."""
        import torch

        from colbench.model_refs import resolve_dtype

        if self.autocast == "off" or resolve_dtype(self.dtype, str(device)) != torch.float32:
            return None
        if self.autocast == "bf16" or (str(device).startswith("cpu") and cpu_has_native_bf16()):
            return torch.bfloat16
        return None

    def to_json(self) -> dict:
        """The settings a run records (less NOT_RECORDED's). Settings added later are left out at their defaults,
        so a run records what runs before them recorded (a study resumes)."""
        settings = {
            k: v
            for k, v in asdict(self).items()
            if k not in NOT_RECORDED and not (k in QUIET_DEFAULTS and v == QUIET_DEFAULTS[k])
        }
        return settings | {"learning_rate": self.learning_rate, "adam_betas": list(self.adam_betas)}

    @classmethod
    def help(cls) -> dict[str, str]:
        return help_of(cls)

    def optimizer_steps(self, examples: int, epochs: int, processes: int = 1) -> int:
        """Optimiser steps for ``epochs`` passes over ``examples`` split across ``processes``."""
        batches = math.ceil(examples / self.batch_size / processes)
        return max(1, epochs * math.ceil(batches / self.grad_accum))

    def optimizer(self, params: Iterable, total_steps: int):
        """AdamW with linear warm-up, then cosine decay over ``total_steps`` optimiser steps or a constant rate."""
        import torch
        from transformers import get_constant_schedule_with_warmup, get_cosine_schedule_with_warmup

        optimizer = torch.optim.AdamW(params, lr=self.learning_rate, betas=self.adam_betas,
                                      weight_decay=self.weight_decay)
        # Rounded down: a run of a few steps starts at its peak rate rather than spending its first step at 0.
        warmup = int(self.warmup_ratio * total_steps)
        if self.lr_schedule == "constant":
            return optimizer, get_constant_schedule_with_warmup(optimizer, warmup)
        schedule = get_cosine_schedule_with_warmup(optimizer, warmup, total_steps)
        return optimizer, schedule


def check_out_folder(out: str | None) -> None:
    """Refuse, before anything is trained, an --out folder that holds files already."""
    if out:
        path = Path(out).expanduser()
        if path.exists() and (not path.is_dir() or any(path.iterdir())):
            raise ValueError(f"--out {out} exists and is not an empty folder")


def cpu_has_native_bf16() -> bool:
    """True on CPUs whose bfloat16 matrix products are native (oneDNN's check: AVX512-BF16 or AMX)."""
    import torch

    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


class DataError(ColbenchError, ValueError):
    """Training data that cannot be built; the message is one line."""


def pair_rule(family: str, rule: str | None = None) -> str:
    """The rule to use: ``rule`` when given, else the family's paper rule."""
    rule = rule or family_named(family).pair_rule  # the paper's, per family
    if rule not in PAIR_RULES:
        raise DataError(f"pair rule must be one of {', '.join(PAIR_RULES)}; got {rule!r}")
    return rule


# ---------------------------------------------------------------- the critic


def refuse_held_out(split: str) -> None:
    if is_held_out(split):
        raise ValueError(f"--split {split} is held out for evaluation: train on train (or lite-train)")


@dataclass
class CriticConfig(TrainingConfig):
    """How to fit a critic. Each field's help is its documentation (``CriticConfig.help()``);
    the optimisation fields are :class:`~colbench.training.config.TrainingConfig`'s."""

    family: str = option(
        DEFAULT_FAMILY,
        f"Task family whose trajectories make the pairs ({family_help()}); its pair rule is --pairs' default.",
        choices=family_names()
    )
    split: str = option("train", (
        "Task split to train on: train, or lite-train for the backend-lite tier. Never a held-out split: the critic"
        " reads the reference solution."
    ))
    beta: float = option(0.1, "β in Σ_t β·A(o_t,a_t,c), the score Bradley-Terry compares (paper: 0.1).", min=0.0)
    normalize: str = option(
        "turn",
        "Length normalisation of A: 'turn' (default) divides each turn's summed log-ratio by that turn's "
        "token count, as the paper's formula does; 'trajectory' divides every turn by the trajectory's total "
        "agent tokens, as the official code does; 'none' is the paper's ablation. Per turn is the default "
        "because A is a per-turn quantity: the actor ranks single-turn candidates of different lengths with "
        "it, so the critic is trained in the units it is used in, and no turn's advantage depends on the "
        "length of the others. Without normalisation the paper's actor collapses to ever-shorter turns.",
        choices=NORMALIZATIONS)
    pairs: str | None = option(None, PAIR_RULE_HELP, choices=PAIR_RULES)
    training_info: bool = option(True, (
        "Give the critic the training-time information c (the reference solution) as a text prefix. False is the"
        " paper's ablation."
    ))
    epochs: int = option(4, "Passes over the training pairs (paper: 4 for backend, 8 for frontend).", min=1)
    max_len: int = option(2048, (
        "Most tokens of c plus the context an agent turn is read with (the turn itself is never cut). Beyond it c"
        " keeps its first max_len/2 tokens and the context its last ones; candidates are scored with the very same"
        " cut."
    ), min=16)
    heldout_fraction: float = option(0.1, (
        "Share of tasks whose pairs are held out for the pair-accuracy check (whole tasks; at least one task when"
        " there are two or more)."
    ), min=0.0, flags=("--heldout-fraction", "--heldout"))

    def __post_init__(self):
        super().__post_init__()
        if self.batch_size is None:
            self.batch_size = DEFAULT_BATCH_SIZE
        if not 0 <= self.heldout_fraction < 1:
            raise ValueError("heldout_fraction must be in [0, 1)")
        refuse_held_out(self.split)
        self.pairs = pair_rule(self.family, self.pairs)


# ---------------------------------------------------------------- the policy


SCORES = ("sampler", "critic", "oracle")
DPO_LOSSES = ("sigmoid", "ipo")  # colbench.training.losses.dpo_loss
SELECTIONS = ("trajectories", "turns")
TURN_KINDS = ("all", "questions")
REWARDS = ("share", "success")
LOSS_AGGREGATIONS = ("token-mean", "dialogue-mean", "constant")
ONLINE_ENGINES = ("hf", "ct2", "openai")


@dataclass
class PolicyConfig(TrainingConfig):
    """How to train a policy. Each field's help is its documentation (``PolicyConfig.help()``);
    the optimisation fields are :class:`~colbench.training.config.TrainingConfig`'s."""

    family: str = option(DEFAULT_FAMILY,
                         f"Task family whose stored trajectories are the training data ({family_help()}).",
                         choices=family_names())
    split: str = option("train",
                        "Task split to read: train, or lite-train for the backend-lite tier. Never a held-out split.")
    beta: float = option(0.1, "DPO β (sweet, mtdpo; paper: 0.1).", min=0.0)
    nll_weight: float = option(
        0.01,
        "Weight of the NLL term on the chosen side, added to the DPO loss (sweet, mtdpo; paper: 0.01). The NLL is the "
        "mean over the chosen sequences' agent tokens. A larger weight (RPO, Pang et al. 2024, used 1.0 with "
        "length-normalised NLL) holds the chosen turns' likelihood up where DPO alone lowers both sides "
        "(likelihood displacement, worst on pairs that differ in a few tokens).", min=0.0,
        flags=("--nll-weight", "--nll"))
    loss: str = option(
        "sigmoid",
        "Preference loss (sweet, mtdpo): 'sigmoid' (DPO, the paper's) or 'ipo' (Azar et al. 2023: a squared loss that "
        "stops at a margin of 1/(2β) instead of pushing the pair apart without bound; it keeps regularising when "
        "preferences are deterministic).", choices=DPO_LOSSES)
    label_smoothing: float = option(
        0.0,
        "Conservative DPO (sigmoid loss): the assumed chance that a pair's label is wrong, 0 to 0.5 (0: plain DPO). "
        "For noisy rankings such as a weak critic's.", min=0.0, max=0.5)
    stop_on_displacement: float | None = option(
        None,
        "Stop training early when the chosen side's DPO reward (β times its log-ratio to the reference, summed over its"
        " tokens), averaged over the last 5 optimiser steps, falls below minus this bound: the chosen turns have become"
        " less likely than under the starting policy (likelihood displacement). The reason is stored with the run and"
        " the checkpoint is the policy when it stopped. Unset: never.",
        min=0.0
    )
    # sweet
    fraction: float = option(0.1, (
        "sweet: share of the stored data to sample candidates for (paper: 10%; more steps overfit). What it is a share"
        " of: see selection."
    ), min=0.0, max=1.0)
    selection: str = option(
        "trajectories",
        "sweet: 'trajectories' (default, the official run's in effect): the fraction is a share of the graded "
        "trajectories read (at least one), taken one sample per task first: as many distinct tasks as the fraction "
        "allows (10% of 100 tasks x 4 samples: one trajectory each of 40 tasks), then second samples, and so on; "
        "every agent turn of each. The official file is ordered sample round by sample round, so its first 10% is one "
        "sample each of 1,500 tasks. 'turns': the fraction is a share of all agent turns, picked by a seeded hash of "
        "the turn's id, so a rerun picks the same turns.", choices=SELECTIONS)
    turns: str = option(
        "all",
        "sweet: which of the selected agent turns get candidates: 'all' (the paper), or 'questions' (not the answer"
        " turns: those whose stored action is no final answer, the last turn excepted, which is always one): the"
        " ranking's credit where the critic orders pairs best, and no DPO pair between two answers.",
        choices=TURN_KINDS)
    candidates: int = option(16, "sweet: candidates sampled per turn from the current policy (paper: 16).", min=2)
    pairs_per_turn: int = option(4, (
        "sweet: pairs per turn, each a random top-half candidate (chosen) against a random bottom-half one (rejected),"
        " without repeats (paper: 4)."
    ), min=1)
    temperature: float = option(protocol.TEMPERATURE,
                                "sweet: sampling temperature of the candidates (the protocol's, paper: 1.0); grpo,"
                                " rloo: 1 only.", min=0.0)
    max_new_tokens: int = option(protocol.MAX_NEW_TOKENS,
                                 "sweet: most tokens per candidate (the protocol's turn limit, paper: 1024).", min=1)
    score: str = option(
        "sampler",
        "sweet: what ranks the candidates. 'sampler' (default, the paper): the critic's mean log-prob given the"
        " training-time information c minus the sampler's own mean log-prob of the candidate (the sampler plays the"
        " reference of A). 'critic': the critic's own advantage, its mean log-prob minus its frozen reference's, both"
        " given c. 'oracle' (backend-lite only, a control; no critic): ground truth from the built-in human and the"
        " sandbox: a question that obtains a fact not stated before scores 1, one that re-asks or obtains nothing 0, an"
        " answer its share of tests passed. It tells a failing actor update from a failing critic.",
        choices=SCORES
    )
    ranker: str = option("critic", (
        "sweet: the turn credit that ranks the candidates. 'critic' (default, the paper): the SWEET-RL critic, as"
        " --score says. Any other registered credit (oracle, infogain, ref-infogain, mc, random, a plugin's; `colbench"
        " credit ls`): each candidate's credit in the turn's place, read on the dialogue it makes with the built-in"
        " human's reply to it; no critic. Models it reads start from the policy as training starts."))
    sampler: str = option(SAMPLER_AUTO, sampler_help(), choices=(SAMPLER_AUTO, *SAMPLERS.names()))
    base_url: str | None = option(
        None,
        "sweet, --sampler openai: the server's address, e.g. http://127.0.0.1:8000/v1. It must serve the policy as "
        "training starts (the base model, or the starting LoRA adapter by its --lora-modules name), sampling at "
        "temperature 1 with raw log-probs (vLLM's default).")
    served_model: str | None = option(
        None, "sweet, --sampler openai: the model (or LoRA adapter) name the server knows the policy by. Default: the "
        "only model its /v1/models lists.")
    sample_batch_size: int = option(16, (
        "sweet: rows (turn × candidate) decoded together when sampling; candidates of a few turns are stored after"
        " each generate call."
    ), min=1)
    # mtdpo
    pairs: str | None = option(None, "mtdpo: " + PAIR_RULE_HELP, choices=PAIR_RULES)
    # rft
    rft_threshold: float | None = option(
        None,
        "rft: what counts as successful. Unset: backend trajectories whose every test passes (the paper's "
        "definition), and per frontend task its best page when its similarity reaches 0.8. Set: per task, its best "
        "trajectory when its reward (share of tests passed, or similarity) reaches this.",
    )
    # grpo, rloo (online)
    tasks: str | None = option(None, (
        f"grpo, rloo: the tasks to roll out, {selectors_help()}; e.g. backend-lite:train. Sets --family and --split."
    ))
    steps: int = option(25, "grpo, rloo: online steps, each a fresh rollout of the current policy and an update.",
                        min=1)
    tasks_per_step: int = option(8, (
        "grpo, rloo: tasks drawn per step (a seeded shuffle of the split, walked in order, reshuffled once used up)."
    ), min=1)
    group: int = option(4, "grpo, rloo: dialogues per task and step; their rewards are compared within the group.",
                        min=2)
    reward: str = option(
        "share",
        "grpo, rloo: a dialogue's reward: 'share', the family's reward (backend: the share of tests passed; frontend:"
        " the page's similarity), or 'success' (1 when every test passed, else 0).", choices=REWARDS)
    no_std: bool = option(False, (
        "grpo: Dr. GRPO's advantage, the reward minus its group's mean, not divided by the group's standard deviation"
        " (which over-weights groups that are nearly all right or all wrong)."
    ))
    clip: float = option(0.2, (
        "grpo, rloo: PPO's ε (the lower one where --clip-high is set): a token's probability ratio to π_old, the"
        " policy as the step started (the trainer's log-probs, computed before the step's first update), is clipped"
        " to [1−ε, 1+ε]; it leaves 1 once an update within the step has moved the policy."
    ), min=0.0, flags=("--clip", "--clip-low"))
    clip_high: float | None = option(None, (
        "grpo, rloo: the upper ε, clipping the ratio at 1+clip_high (DAPO's 'clip-higher': 0.28, which lets unlikely"
        " tokens grow). Default: --clip."
    ), min=0.0)
    tis_cap: float = option(2.0, (
        "grpo, rloo: truncated importance sampling against sampler-trainer mismatch: each token's loss is weighted by"
        " min(π_old/π_sampler, C), detached, where π_sampler is what the engine (ct2, a vLLM server, bf16 kernels)"
        " says it sampled from. 0: no weight. The step's mismatch_mean, mismatch_max, mismatch_kl and tis_capped say"
        " how far the two are apart."
    ), min=0.0)
    tis_level: str = option("token", (
        "grpo, rloo: the importance weight per token, or per agent turn ('sequence': the product of its tokens'"
        " ratios, then capped)."
    ), choices=("token", "sequence"))
    kl_beta: float = option(0.0, (
        "grpo, rloo: weight of the KL term to the policy as the run started (its loss ½(log π − log π_ref)², whose"
        " gradient is KL(π‖π_ref)'s; the step's kl is the k3 estimate of its value). 0: no term; the KL is still"
        " measured for a fresh LoRA adapter, whose reference is the adapter switched off. A LoRA parent's reference"
        " is a frozen copy of it, loaded only where the term is on."
    ), min=0.0)
    turn_credit: str = option(
        "none",
        "grpo, rloo: per-turn credit that moves each dialogue's advantage between its agent turns: a turn's value,"
        " centred on its dialogue's token-weighted mean (the dialogue's mean advantage stays its group advantage),"
        " divided by the step's standard deviation of such values and multiplied by --turn-credit-weight times the"
        " root mean square of the step's group advantages. 'critic': the SWEET-RL critic's advantage A(o_t, a_t, c)"
        " of the turn, read with the reference c the agent never sees (--critic ckpt:<id>). 'oracle' (backend-lite, a"
        " control): a question that obtains a new fact 1, else 0; an answer its share of tests passed. 'none': every"
        " token of a dialogue gets its group advantage. Any other registered turn credit (infogain, ref-infogain, mc,"
        " random, a plugin's; `colbench credit ls`) through the same combination, its models the run's starting"
        " point.")
    turn_credit_weight: float = option(1.0, (
        "grpo, rloo: the turn credit's spread against the group advantages' (1: turns within a dialogue differ as much"
        " as dialogues within a step)."), min=0.0)
    turn_credit_combination: str = option("centred", (
        "grpo, rloo with --turn-credit: how the turn credit joins the group advantage. 'centred': moved between a"
        " dialogue's turns only (mean zero over its tokens, so the outcome's sign is kept; a group without spread"
        " learns nothing). 'variance-gated': InfoPO's fusion, added on top: the credit normalised within each group,"
        " scaled to at most the outcome's spread, times sigmoid(−std of the group's rewards / --gate-temperature)"
        " times --turn-credit-weight (InfoPO's β): strongest where the outcome cannot tell a group's dialogues"
        " apart."), choices=("centred", "variance-gated"))
    gate_temperature: float = option(0.05, (
        "grpo, rloo with --turn-credit-combination variance-gated: the gate's temperature (InfoPO's 0.05)."), min=1e-6)
    critic_refit_every: int = option(0, (
        "grpo, rloo with --turn-credit critic: continue the critic every N steps on the pairs the run's own groups make"
        " (a fully correct dialogue against a failed one of the same task) and rank with it from then on. 0: never."
    ), min=0)
    loss_aggregation: str = option("token-mean", (
        "grpo, rloo: how a minibatch's token losses add up. 'token-mean': every trained token weighs the same (DAPO;"
        " verl's token-mean). 'dialogue-mean': every dialogue weighs the same, the mean of its tokens' mean (GRPO's"
        " paper; verl's seq-mean-token-mean). 'constant': the sum over the tokens divided by the dialogues times"
        " their token budget, --max-new-tokens x 10 agent turns (Dr. GRPO, with --no-std its whole estimator)."
    ), choices=LOSS_AGGREGATIONS)
    dynamic_sampling: int = option(0, (
        "grpo, rloo: DAPO's dynamic sampling. A group whose dialogues all got the same reward is left out of the"
        " update (its advantages are 0: its tokens would only dilute the token mean), and up to N replacement tasks"
        " (a seeded draw from the rest of the split) are rolled out until the step has --tasks-per-step groups with"
        " spread. The step's groups_dropped is the share of its groups left out, refill_tasks the replacements"
        " drawn; reward and success stay those of its first draw. 0: off, every group trained."
    ), min=0)
    cut_turns: str = option("keep", (
        "grpo, rloo: agent turns cut at --max-new-tokens (no end-of-turn token; the step's turns_cut_length counts"
        " them). 'keep': trained as any turn. 'mask': left out of the update (DAPO's overlong filtering). 'penalise':"
        " their tokens' advantage becomes min(A, 0) − --cut-penalty."
    ), choices=("keep", "mask", "penalise"))
    cut_penalty: float = option(1.0, "grpo, rloo with --cut-turns penalise: the advantage taken off a cut turn.",
                                min=0.0)
    eval_every: int = option(0, (
        "grpo, rloo: every N steps, the step's weights are checkpointed and rolled out on --eval-tasks"
        " (--eval-samples dialogues a task, at temperature 1), their figures stored as the checkpoint's evaluation"
        " (`colbench eval`) and as the step's val_reward and val_success (drawn by `colbench runs show`). 0: never."
    ), min=0)
    eval_tasks: str | None = option(None, (
        f"grpo, rloo with --eval-every: the validation tasks, {selectors_help()}. Default: the family's 'val' split"
        " (`colbench experiment`: its task set's validation split, e.g. backend-lite's lite-val)."))
    eval_samples: int = option(1, "grpo, rloo with --eval-every: dialogues per validation task.", min=1)
    eval_limit: int | None = option(None, (
        "grpo, rloo with --eval-every: at most N validation tasks (the first N by id: the same ones every time)."),
        min=1)
    collapse_entropy: float = option(2.0, (
        "grpo, rloo: the collapse guard. A step whose entropy (the sampled tokens' mean −log π_old) is above this many"
        " times step 1's says so in one line (multi-turn GRPO collapses through a rising entropy, then groups"
        " without spread). 0: not watched."
    ), min=0.0)
    on_collapse: str = option("warn", (
        "grpo, rloo: what the collapse guard does. 'warn': the line, and the run goes on. 'stop': the line, and the"
        " run stops failed at that step; its last checkpoint before the collapse is the one to use."
    ), choices=("warn", "stop"))
    save_every: int = option(5, (
        "grpo, rloo: write a checkpoint (ckpt:<id>, with the optimiser's state) every N steps. A rerun of the same"
        " command continues the stopped run from its last checkpoint; later steps' stored dialogues are reused, not"
        " rolled out again."
    ), min=1)
    engine: str = option("hf", (
        "grpo, rloo: what rolls the policy out each step. 'hf': the model being trained, in this process (no weight"
        " copy). 'ct2': CTranslate2 in float32 on each step's weights, written and converted as the step starts (the"
        " same policy; 1.4x hf's tokens/s on a CPU, less a conversion a step). 'openai': a vLLM server at"
        " --base-url started with --enable-lora; each step's adapter is written and loaded into it (POST"
        " /v1/load_lora_adapter) under the name <run>-step-<k>, the step before's unloaded (/v1/unload_lora_adapter),"
        " and the rollouts keep their token ids (LoRA only)."
    ), choices=ONLINE_ENGINES)
    pass_rows: int = option(2, (
        "grpo, rloo: most rows (a dialogue is a row of up to --max-len tokens) in one forward and backward pass. A"
        " process's share of a --batch-size minibatch takes as many passes as it needs, their gradients adding up to"
        " one pass's: it sets the memory (~2 GB a 1,000-token row of a 135M model on a CPU), never the result."
    ), min=1)
    simulator: str = option("builtin", "grpo, rloo: " + simulator_help())
    sim_guard: str = option(DEFAULT_GUARD, "grpo, rloo: " + GUARD_HELP, choices=GUARDS)
    sandbox: str = option(AUTO_SANDBOX, "grpo, rloo: " + sandbox_help(), choices=SANDBOX_CHOICES)
    epochs: int | None = option(
        None,
        "Passes over the training data. Default: 1 for sweet (paper) and mtdpo, 4 for rft (paper), 3 for sft; grpo and"
        " rloo: passes over each step's dialogues (its minibatches are --batch-size dialogues).",
        min=1
    )
    max_len: int = option(2048, (
        "Most tokens of context an agent turn is trained with (the turn itself is never cut). A longer prompt keeps"
        " its last max_len tokens, in a row of its own; grpo, rloo leave such turns out (the step's"
        " turns_cut_context counts them)."
    ), min=16)

    def __post_init__(self):
        if self.tasks:
            self.family, self.split = parse_selector(self.tasks)
        super().__post_init__()
        if self.fraction == 0:
            raise ValueError("fraction must be above 0")
        refuse_held_out(self.split)
        self.pairs = pair_rule(self.family, self.pairs)
        if is_served(self.sampler) and not self.base_url:
            raise ValueError(f"--sampler {self.sampler} needs --base-url (the server that serves the policy)")

    def epochs_for(self, algo: str) -> int:
        return self.epochs if self.epochs is not None else ALGORITHMS.get(algo).epochs

    def for_algo(self, algo: str) -> "PolicyConfig":
        """This config with the algorithm's defaults filled in (epochs, batch size)."""
        return replace(
            self, epochs=self.epochs_for(algo),
            batch_size=self.batch_size if self.batch_size is not None else ALGORITHMS.get(algo).batch_size
        )
