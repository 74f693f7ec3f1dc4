"""The paper's backend study on one model, end to end (`colbench experiment backend`).

1. Zero-shot rollouts of the base model on the train tasks, k samples per task.
2. The critic, with the training-time information c, and the ablation critic without it.
3. The policies of the arms asked for (``--arms``): rejection fine-tuning, multi-turn DPO,
   SWEET-RL, SWEET-RL driven by the ablation critic; and the controls: SWEET-RL ranking by
   the critic's own advantage, and (backend-lite) SWEET-RL ranking by ground truth.
4. Rollouts of every policy, zero-shot included, on the validation or the test tasks (and
   best-of-N: the zero-shot policy with the critic picking each turn among N samples); the
   table, and the study's files (colbench/study.py) when ``--label`` names the run.

``--tasks backend-lite`` runs it on the lite tier a small model can learn: train on
lite-train, evaluate on lite-test (unseen instances of seen templates) and lite-novel
(unseen templates). Every trainer reads only the zero-shot policy's own trajectories
(--no-on-policy: every stored one), so a store that also holds demonstrations (the warm
start's) trains the arms on-policy.

Every stage writes to the store and is skipped when its result is already there (a
rollout slot that is full, a finished training run with the same settings that has
consumed every graded train trajectory), so the same command rerun after an interrupt
goes on where it stopped. A stage with nothing to train on (say, no task with a fully
correct trajectory, so no critic pairs) is reported as such in the table rather than
stopping the study: with a small model that is a result, not an error.
"""
from __future__ import annotations

from contextlib import nullcontext
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import ContextManager

from colbench import protocol
from colbench.compare import compare, side_of
from colbench.errors import ColbenchError
from colbench.eval import PolicyEval, as_dict, evaluate
from colbench.engines import AUTO as AUTO_ENGINE, ENGINES
from colbench.grading.sandboxes import AUTO as AUTO_SANDBOX, CHOICES as SANDBOX_CHOICES, sandbox_help
from colbench.grading.semantics import DEFAULT_GRADING, GRADINGS
from colbench.model_refs import DEFAULT_MODEL, checkpoint_name
from colbench.options import check, help_of, option
from colbench.progress import Progress, silent
from colbench.rollout import RolloutConfig, run as run_rollout
from colbench.simulators import simulator_help
from colbench.store import queries
from colbench.store.db import Database
from colbench.tasks.spec import LITE_SPLITS
from colbench.training import NothingToTrain
from colbench.training.checkpoints import normalized_model_ref
from colbench.training.config import CriticConfig, PolicyConfig
from colbench.families.backend import BackendFamily

BACKEND = BackendFamily.name  # the study is the paper's backend setting

# The paper's backend results with Llama-3.1-8B-Instruct (% tests passed, success), for
# the table's reference column; sweet-rl-facts.md has the source.
PAPER_BACKEND = {
    "zero-shot": (34.2, 22.4),
    "rft": (40.9, 28.2),
    "mtdpo": (48.0, 34.4),
    "sweet": (56.8, 40.4),
    "sweet-no-c": (44.0, 31.2),
    "best-of-n": (None, 44.3),  # N=32; the paper gives success only
    "sweet-critic": (None, None),  # controls: not in the paper
    "sweet-oracle": (None, None),
}
ARM_TITLES = {
    "zero-shot": "zero-shot",
    "rft": "rejection fine-tuning",
    "mtdpo": "multi-turn DPO",
    "sweet": "SWEET-RL",
    "sweet-no-c": "SWEET-RL, critic without training info",
    "best-of-n": "best-of-N with the critic",
    "sweet-critic": "SWEET-RL ranked by the critic's own advantage",
    "sweet-oracle": "SWEET-RL ranked by ground truth (control)",
}


def ensemble(critics: list[dict]) -> dict | None:
    """The critics that rank SWEET-RL's candidates together, as one: their checkpoints comma-separated
    (what `policy fit --critic` takes); skipped when any of them could not be trained."""
    if not critics:
        return None
    skipped = next((critic for critic in critics if "checkpoint" not in critic), None)
    if skipped is not None or len(critics) == 1:
        return skipped or critics[0]
    return {"checkpoint": ",".join(critic["checkpoint"] for critic in critics),
            "checkpoint_id": [critic["checkpoint_id"] for critic in critics], "members": critics}


def arm_title(key: str) -> str:
    """An arm's name in the tables; an on-policy round's is made from its number."""
    if key.startswith("sweet-round-"):
        return f"SWEET-RL, on-policy round {key.rsplit('-', 1)[1]}"
    return ARM_TITLES[key]


# The policy arms --arms can ask for (zero-shot is always there; best-of-N comes with --best-of).
POLICY_ARMS = ("rft", "mtdpo", "sweet", "sweet-no-c", "sweet-critic", "sweet-oracle")
DEFAULT_ARMS = ("rft", "mtdpo", "sweet", "sweet-no-c")
# The agent whose dialogues judge the critics on backend-lite: it asks, skips, digresses and
# answers early, so its turns differ in whether they obtain a fact.
SCRIPTED_JUDGE = "scripted:mixed"
# Task sets: the split the study trains on, and the splits it evaluates on: its validation
# split, where every setting is chosen, and its test splits, read once at the end.
# backend-lite's fresh split is a phase of its own: the third study's test set, read once per final arm
# (studies/backend-lite-3/plan.md), never by `--evaluate-on test`.
TASK_SETS = {
    BACKEND: ("train", {"test": ("test",)}),
    "backend-lite": (LITE_SPLITS["train"], {"val": (LITE_SPLITS["val"],),
                                            "test": (LITE_SPLITS["test"], LITE_SPLITS["novel"]),
                                            "fresh": (LITE_SPLITS["fresh"],)}),
}
# What --evaluate-on accepts: a phase, or one test split alone (e.g. lite-test, read before lite-novel).
TEST_SPLITS = dict.fromkeys(split for _, phases in TASK_SETS.values() for split in phases["test"])
EVALUATE_ON = ("val", "test", "fresh", *(split for split in TEST_SPLITS if split != "test"))


def study_critic() -> CriticConfig:
    """The study's critic defaults: activation checkpointing on (a batch of 1,500-token dialogues
    on SmolLM2-135M took more than 24 GB without it)."""
    return CriticConfig(family=BACKEND, gradient_checkpointing=True)


def study_policy() -> PolicyConfig:
    """The study's policy defaults (see study_critic)."""
    return PolicyConfig(family=BACKEND, gradient_checkpointing=True)


# Settings the study sets on every trainer itself (from its own fields, or per arm).
STUDY_SET = {"family", "split", "seed", "device", "out", "policies", "name", "tags"}
CRITIC_SET = STUDY_SET | {"training_info"}
POLICY_SET = STUDY_SET | {"temperature", "max_new_tokens", "sample_batch_size"}


@dataclass
class ExperimentConfig:
    """The study's size and settings. Each field's help is its documentation; the trainers'
    settings are the embedded critic and policy configs (``--critic-*``, ``--policy-*``)."""

    model: str = option(DEFAULT_MODEL, (
        f"The base model every arm starts from: {DEFAULT_MODEL} (embedded), a local folder, a hub id, or ckpt:<id>"
        " (e.g. a warm start from `policy fit --algo sft`)."
    ))
    tasks: str = option(BACKEND, (
        "Task set: backend (train, test) or backend-lite (train on lite-train; evaluate on lite-test, unseen instances"
        " of seen templates, and lite-novel, unseen templates)."
    ), choices=tuple(TASK_SETS))
    evaluate_on: str | None = option(
        None,
        "What every arm is evaluated on: 'val' (backend-lite's lite-val, 120 train-template tasks that no demonstration"
        " or training data touches: tune here) or 'test' (the test sets, read once, at the end), or one test set alone"
        " (lite-test or lite-novel), or 'fresh' (lite-fresh, the third study's test set: new instances of the trained"
        " templates). Default: val for backend-lite, test for backend (it has no validation split).",
        choices=EVALUATE_ON
    )
    train_tasks: int | None = option(16, "The first N train tasks (None: all), after --train-offset.", min=1)
    train_offset: int = option(0, (
        "Skip the first N train tasks: the zero-shot rollouts take the --train-tasks after them. E.g. a second round"
        " of rejection fine-tuning from ckpt:<the first's policy> on train tasks it never trained on."
    ), min=0)
    test_tasks: int | None = option(10, "The first N tasks of each test set (None: all).", min=1)
    samples_per_task: int = option(4, (
        "k zero-shot trajectories per train task: the critic's pairs need a fully correct one and a lower one of the"
        " same task."
    ), min=1, flags=("--samples-per-task", "-k"))
    test_samples: int = option(1, "Trajectories per test task and policy.", min=1)
    temperature: float = option(protocol.TEMPERATURE,
                                "Sampling temperature of every rollout and of SWEET's candidates (the protocol: 1.0).",
                                min=0.0)
    max_new_tokens: int = option(protocol.MAX_NEW_TOKENS,
                                 "Tokens per agent turn, and per SWEET candidate (the protocol: 1024).", min=1)
    batch_size: int = option(16, "Episodes (rollouts) or rows (SWEET sampling) decoded together.", min=1)
    simulator: str = option("builtin", simulator_help())
    engine: str = option(
        AUTO_ENGINE,
        "What rolls every policy out: auto (ct2 on a CPU, hf otherwise), hf, ct2, vllm (vLLM's offline engine, loading "
        "each checkpoint's weights), or openai: a vLLM server at --base-url that serves --model as --served-model, "
        "started with --enable-lora and VLLM_ALLOW_RUNTIME_LORA_UPDATING=True. Before a LoRA checkpoint is rolled out "
        "(an arm, or the next on-policy round) it is loaded onto the server by its folder, which the server must read "
        "at the same path, under the name colbench-ckpt-<id>-<checksum>. Every turn goes as token ids, so the store "
        "keeps the exact prompts and sampled ids (rollout --served-model).",
        choices=(AUTO_ENGINE, *(engine.name for engine in ENGINES if engine.local or engine.served)))
    base_url: str | None = option(None, "--engine openai: the vLLM server's address, e.g. http://127.0.0.1:8000/v1.")
    served_model: str | None = option(
        None, "--engine openai: the name the server serves --model under. Default: the only base model it lists."
    )
    sandbox: str = option(AUTO_SANDBOX, sandbox_help(), choices=SANDBOX_CHOICES)
    grading: str = option(DEFAULT_GRADING, (
        "Backend grading semantics of every rollout: official (the official ColBench grader's outcomes) or strict. A"
        " grade is made when its rollout runs; `colbench grade --grading` re-grades stored ones."
    ), choices=GRADINGS)
    arms: list[str] = option(
        list(DEFAULT_ARMS),
        "The policy arms to train and evaluate besides zero-shot (repeat the flag): rft, mtdpo, sweet, sweet-no-c"
        " (SWEET-RL with the critic trained without training-time info: the paper's ablation), sweet-critic (ranked by"
        " the critic's own advantage, --score critic) and sweet-oracle (backend-lite: ranked by ground truth, no"
        " critic; tells a failing actor update from a failing critic). Default: the paper's four.",
        flags=("--arm",),
        choices=POLICY_ARMS
    )
    critic_ensemble: int = option(
        1,
        "Critics with c that rank SWEET-RL's candidates together (their scores averaged), each trained with its own"
        " seed (data order and held-out tasks): a remedy for a critic whose turn credit is noisy. 1: the paper's single"
        " critic.",
        min=1
    )
    rounds: int = option(
        1,
        "On-policy rounds, beyond the paper. Round r+1 rolls out round r's SWEET-RL policy on fresh train tasks (the"
        " next --train-tasks tasks from --rounds-offset), k samples each, refits the critic with c on every round's"
        " trajectories so far, and trains the actor from round r's policy on the new rollouts alone. Each round is an"
        " arm, sweet-round-<r>, evaluated like the others.",
        min=1
    )
    rounds_offset: int | None = option(
        None,
        "Where round 2's fresh train tasks start, as an offset into the train split; each later round takes the next "
        "--train-tasks. Default: right after the first round's tasks. The backend-lite study uses 360 (tasks 201-360 "
        "are its demonstrations').", min=0)
    label: str | None = option(
        None,
        "Name this run of the study in its files (trajectories.jsonl, validation.jsonl in --dir; colbench/study.py): "
        "each arm's evaluated trajectories are recorded under it, replacing the same arm and label's earlier ones. "
        "`colbench study report` rebuilds the tables from those files alone. Unset: no files but results.md/json.")
    critic_policies: list[str] = option([], (
        "Also train the critics on these policies' train trajectories (repeat the flag; ckpt:<id or name>, or a name"
        " as stored), beside the zero-shot policy's: e.g. the critic of a second round refit on both rounds'"
        " dialogues."
    ), flags=("--critic-policy",))
    record_arms: list[str] = option([], (
        "KEY=NAME (repeat the flag): the name an arm's rows take in the study's files (--label), e.g. sweet=rft+sweet"
        " for a study that starts from a rejection fine-tuned policy; KEY= records nothing of that arm (its zero-shot"
        " read is another study run's arm). Default: each arm's own key."
    ), flags=("--record-arm",))
    on_policy: bool = option(True, (
        "Train every arm on the zero-shot policy's own train trajectories, as the paper does. --no-on-policy: on every"
        " graded train trajectory in the store (e.g. imported or scripted ones)."
    ))
    best_of: int = option(0, (
        "Also evaluate best-of-N: the zero-shot policy with the critic (with training-time info) picking the best of N"
        " samples at every agent turn (0: no such arm; the paper's N is 32)."
    ), min=0)
    seed: int = option(0, "Seed of the train rollouts (the test rollouts use seed + 1) and of every trainer.")
    trainer_seed: int | None = option(None, (
        "Seed of every trainer (data order, held-out tasks, SWEET's candidates) when it differs from --seed: a second"
        " training seed of an arm on the same rollouts."
    ))
    tags: list[str] = option([], (
        "Tags on every run the study makes (rollouts, critics, policies); `colbench experiment` adds study:<its"
        " folder>, so `colbench runs ls --tag study:<folder>` lists them."
    ), flags=("--tag",))
    device: str = option("auto", "auto, cpu or cuda, for generation and training.")
    critic: CriticConfig = field(
        default_factory=study_critic,
        metadata={"help": "The critics' settings (family, split, training info, seed and device are the study's)."}
    )
    policy: PolicyConfig = field(
        default_factory=study_policy,
        metadata={"help": "The policies' settings (SWEET samples at the study's temperature and tokens per turn)."}
    )

    def __post_init__(self):
        check(self)
        self.arms = list(dict.fromkeys(self.arms))
        if "sweet-oracle" in self.arms and self.tasks != "backend-lite":
            raise ValueError(
                "the sweet-oracle arm needs --tasks backend-lite (its ground truth is the lite human's facts)"
            )
        if self.rounds > 1 and (self.train_tasks is None or "sweet" not in self.arms):
            raise ValueError("--rounds needs --train-tasks (each round takes that many fresh tasks) and the sweet arm")
        if self.served and not self.base_url:
            raise ValueError("--engine openai needs --base-url (the vLLM server that serves --model)")
        served_rounds = self.rounds > 1 and self.policy.sampler == "openai"
        if self.policy.full and (self.served or served_rounds):
            raise ValueError(
                "a fully fine-tuned policy cannot be served here: a running vLLM loads new LoRA adapters, not new"
                " weights. Train LoRA policies (no --policy-full), or roll each checkpoint out against `vllm serve <its"
                " folder>` by hand (docs/scale.md, on-policy rounds)"
            )
        for pair in self.record_arms:
            key, equals, _ = pair.partition("=")
            if not equals or key not in ("zero-shot", "best-of-n", *POLICY_ARMS):
                raise ValueError(f"--record-arm takes KEY=NAME with KEY an arm (zero-shot, {', '.join(POLICY_ARMS)},"
                                 f" best-of-n); got {pair!r}")
        phases = TASK_SETS[self.tasks][1]
        if self.evaluate_on is None:
            self.evaluate_on = "val" if "val" in phases else "test"
        if self.evaluate_on not in phases and self.evaluate_on not in phases["test"]:
            choices = " or ".join(dict.fromkeys((*phases, *phases["test"])))
            raise ValueError(f"--tasks {self.tasks} cannot be evaluated on {self.evaluate_on}: choose {choices}")

    @classmethod
    def help(cls) -> dict[str, str]:
        return help_of(cls)

    @property
    def train_split(self) -> str:
        return TASK_SETS[self.tasks][0]

    @property
    def test_splits(self) -> tuple[str, ...]:
        """The splits every arm is evaluated on (validation, test, or one test split, by ``evaluate_on``)."""
        return TASK_SETS[self.tasks][1].get(self.evaluate_on, (self.evaluate_on,))

    @property
    def served(self) -> bool:
        """Every policy is rolled out on a server (--base-url), each checkpoint loaded onto it first."""
        return self.engine != AUTO_ENGINE and ENGINES.get(self.engine).served

    def rollout(self, model: str, split: str, rerank_critic: str | None = None, offset: int = 0,
                served_model: str | None = None) -> RolloutConfig:
        """``served_model``: with --engine openai, the name the server serves ``model`` under."""
        train = split == self.train_split
        offset = offset or (self.train_offset if train else 0)
        return RolloutConfig(
            model=model,
            engine=self.engine,
            base_url=self.base_url,
            served_model=served_model,
            simulator=self.simulator,
            tasks=f"backend:{split}",
            offset=offset,
            limit=self.train_tasks if train else self.test_tasks,
            samples_per_task=self.samples_per_task if train else self.test_samples,
            seed=self.seed if train else self.seed + 1,
            rerank_critic=rerank_critic,
            candidates=max(self.best_of, 2),
            temperature=self.temperature,
            max_new_tokens=self.max_new_tokens,
            batch_size=self.batch_size,
            sandbox=self.sandbox,
            grading=self.grading,
            device=self.device,
            tags=list(self.tags),
        )

    def data_policies(self, zero_shot: str) -> str | None:
        """Whose trajectories the trainers read (TrainingConfig.policies)."""
        return zero_shot if self.on_policy else None

    def critic_data(self, zero_shot: str) -> str | None:
        """Whose trajectories the critics read: the trainers' and --critic-policy's."""
        data = self.data_policies(zero_shot)
        return ",".join(dict.fromkeys([data, *self.critic_policies])) if data else None

    def recorded_name(self, key: str) -> str:
        """The arm's name in the study's files ('' for none: --record-arm KEY=)."""
        return dict(pair.partition("=")[::2] for pair in self.record_arms).get(key, key)

    @property
    def training_seed(self) -> int:
        return self.seed if self.trainer_seed is None else self.trainer_seed

    def critic_settings(self, training_info: bool, data: str | None, member: int = 0) -> CriticConfig:
        """The critic's config, reading the trajectories of ``data`` (TrainingConfig.policies);
        an ensemble's ``member`` k trains with seed + k."""
        return replace(self.critic, family=BACKEND, split=self.train_split, training_info=training_info,
                       seed=self.training_seed + member,
                       device=self.device, policies=data, tags=list(self.tags))

    def policy_settings(self, data: str | None, arm: str = "rft") -> PolicyConfig:
        """An arm's trainer config: the study's policy settings, the controls' ranking, and the
        trajectories of ``data`` (TrainingConfig.policies)."""
        score = {"sweet-critic": "critic", "sweet-oracle": "oracle"}.get(arm, self.policy.score)
        return replace(
            self.policy, family=BACKEND, split=self.train_split, temperature=self.temperature,
            max_new_tokens=self.max_new_tokens,
            sample_batch_size=self.batch_size, seed=self.training_seed, device=self.device, policies=data,
            tags=list(self.tags), score=score,
        )


@dataclass
class Arm:
    """A row of the table: one policy, how it was made, and how it did on the test tasks."""

    key: str  # zero-shot, one of POLICY_ARMS, or best-of-n
    model: str | None = None  # what `--model` takes to roll it out; None when it could not be trained
    training: dict = field(default_factory=dict)  # the training run's summary, or {"skipped": why}
    results: dict[str, PolicyEval] = field(default_factory=dict)  # per test split
    rerank_critic: str | None = None  # best-of-N: the critic that picks
    critic: dict | None = (
        None  # the critic (summary; an ensemble's has its "members") that ranked its candidates or samples
    )
    versus_zero_shot: dict[str, dict] = field(
        default_factory=dict
    )  # per test split: Comparison.as_dict(), B = this arm

    @property
    def title(self) -> str:
        return arm_title(self.key)


@dataclass
class ExperimentResult:
    config: ExperimentConfig
    train: dict  # the zero-shot train rollouts: trajectories, % tests, success
    critics: dict[str, dict]  # "with c" / "without c" → run summary or {"skipped": why}
    arms: list[Arm]

    def as_dict(self) -> dict:
        return {
            "config": asdict(self.config),
            "train": self.train,
            "critics": self.critics,
            "arms": [
                {
                    "arm": a.key,
                    "title": a.title,
                    "model": a.model,
                    "training": a.training,
                    "tests": {
                        split: as_dict(a.results[split]) if split in a.results else None
                        for split in self.config.test_splits
                    },
                    "vs_zero_shot": {split: a.versus_zero_shot.get(split) for split in self.config.test_splits},
                    "paper_8b": PAPER_BACKEND.get(a.key, (None, None))
                }
                for a in self.arms
            ],
        }


class Reporter:
    """What the study tells its caller as it goes; the CLI draws stages and progress bars."""

    def stage(self, text: str) -> None:
        pass

    def progress(self, description: str) -> ContextManager[Progress]:
        """A context yielding a colbench.progress Progress for one stage of the study."""
        return nullcontext(silent)


class BackendExperiment:
    def __init__(self, db: Database, config: ExperimentConfig, reporter: Reporter | None = None,
                 folder: Path | None = None):
        """``folder``: where a run with a ``label`` records the study's files (colbench/study.py)."""
        from colbench.refs import stored_ref

        # ckpt:<run name>: the id, stored and matched
        config = replace(config, model=stored_ref(db, config.model),
                         critic_policies=[stored_ref(db, p) for p in config.critic_policies])
        self.db, self.config, self.report, self.folder = db, config, reporter or Reporter(), folder
        self.simulator_ref: str | None = None  # set by the first rollout

    def run(self) -> ExperimentResult:
        cfg = self.config
        self.report.stage(f"1/4 zero-shot rollouts: {cfg.model} on {cfg.train_split} tasks, k={cfg.samples_per_task}")
        self.zero_shot = self.rollout(cfg.model, cfg.train_split)
        train = self.train_summary(self.zero_shot)

        self.report.stage(f"2/4 critics: Bradley-Terry on pairs of {self.zero_shot}'s train trajectories")
        critics = {}
        if {"sweet", "sweet-critic"} & set(cfg.arms) or cfg.best_of:
            critics["with c"] = self.critic(training_info=True)
            for member in range(1, cfg.critic_ensemble):
                critics[f"with c #{member + 1}"] = self.critic(training_info=True, member=member)
        if "sweet-no-c" in cfg.arms:
            critics["without c"] = self.critic(training_info=False)

        if cfg.tasks == "backend-lite":
            self.judge_critics(critics)

        self.report.stage(f"3/4 policies: {', '.join(arm_title(key) for key in cfg.arms) or 'none'}")
        ranking = ensemble([critic for name, critic in critics.items() if name.startswith("with c")])
        critic_of = {"sweet": ranking, "sweet-critic": ranking, "sweet-no-c": critics.get("without c")}
        arms = [Arm("zero-shot", model=cfg.model, training={"base": self.zero_shot})]
        arms += [self.policy(key, critic_of.get(key)) for key in POLICY_ARMS if key in cfg.arms]
        if cfg.best_of:
            arms.append(self.best_of_n(critics["with c"]))
        if cfg.rounds > 1:
            arms += self.on_policy_rounds(next(arm for arm in arms if arm.key == "sweet"))

        # A limit above a split's size reads all of it (lite-test has 160).
        limit = f"up to {cfg.test_tasks}" if cfg.test_tasks else "all"
        self.report.stage(f"4/4 evaluation: every policy on {limit} tasks of {', '.join(cfg.test_splits)}")
        for split in cfg.test_splits:
            for arm in arms:
                if arm.model:
                    arm.results.update(self.evaluate(arm, split))
        self.compare_with_zero_shot(arms)
        if cfg.label and self.folder is not None:
            self.record_study(arms)
        return ExperimentResult(cfg, train, critics, arms)

    # ------------------------------------------------------------ stages

    def rollout(self, model: str, split: str, rerank_critic: str | None = None, offset: int = 0) -> str:
        """Roll ``model`` out on a split (finishing what is missing); returns its policy name."""
        what = f"{model}" + (f", best of {self.config.best_of} by {rerank_critic}" if rerank_critic else "")
        served = self.served_name(model, self.config.base_url) if self.config.served else None
        with self.report.progress(f"{split}: {what}") as on_progress:
            result = run_rollout(self.db, self.config.rollout(model, split, rerank_critic, offset, served),
                                 on_progress=on_progress)
        self.simulator_ref = result.simulator
        return result.policy

    def served_name(self, model: str, base_url: str) -> str:
        """The name the server at ``base_url`` serves ``model`` under: the study's model is served as
        --served-model (default: the only base model listed); a LoRA checkpoint is loaded onto it first,
        named by its id and checksum, so a name always means the same weights."""
        from colbench.engines.openai import served_model
        from colbench.openai_client import OpenAIClient
        from colbench.training.checkpoints import get_checkpoint

        cfg = self.config
        if model == cfg.model:
            return cfg.served_model or served_model(base_url)
        checkpoint, _ = get_checkpoint(self.db, model)
        if (
            not checkpoint.adapter
        ):  # __post_init__ refuses full policies; a full critic or warm start is never rolled out here
            raise ColbenchError(
                f"{model} holds full weights, which a running vLLM cannot load: serve its folder ({checkpoint.path})"
            )
        name = f"colbench-ckpt-{checkpoint.id}" + (f"-{checkpoint.sha256[:8]}" if checkpoint.sha256 else "")
        with OpenAIClient(base_url) as client:
            client.load_lora_adapter(name, str(Path(checkpoint.path).resolve()))
        return name

    def evaluate(self, arm: Arm, split: str) -> dict[str, PolicyEval]:
        policy = self.rollout(arm.model, split, arm.rerank_critic)
        setting = self.config.rollout(arm.model, split, arm.rerank_critic).setting()
        found = evaluate(self.db, BACKEND, split, policies=[policy], simulator=self.simulator_ref, setting=setting,
                         grading=self.config.grading)
        return {split: found[0]} if found else {}

    def compare_with_zero_shot(self, arms: list[Arm]) -> None:
        """Each arm against the zero-shot policy on the same test tasks, paired (colbench/compare.py):
        every arm runs the same tasks with the same samples each, so the spread between tasks, which
        dwarfs the arms' differences at a few hundred trajectories, cancels in the difference."""
        base = arms[0]
        for split in self.config.test_splits:
            if split not in base.results:
                continue
            side = {arm.key: side_of(self.db, arm.results[split].policy, tasks=f"backend:{split}",
                                     setting=arm.results[split].setting)
                    for arm in arms if split in arm.results}
            for arm in arms[1:]:
                if arm.key in side:
                    arm.versus_zero_shot[split] = compare(side[base.key], side[arm.key], "success",
                                                          seed=self.config.seed).as_dict()

    def best_of_n(self, critic: dict) -> Arm:
        if "checkpoint" not in critic:
            return Arm("best-of-n", training={"skipped": "its critic could not be trained"})
        return Arm("best-of-n", model=self.config.model, rerank_critic=critic["checkpoint"], critic=critic,
                   training={"base": self.zero_shot, "critic": critic["checkpoint"], "n": self.config.best_of})

    def train_summary(self, policy: str) -> dict:
        cfg = self.config
        results = evaluate(self.db, BACKEND, cfg.train_split, policies=[policy], simulator=self.simulator_ref,
                           setting=cfg.rollout(cfg.model, cfg.train_split).setting(), grading=cfg.grading, record=False)
        if not results:
            return {"policy": policy, "trajectories": 0}
        r = results[0]
        return {"policy": policy, "tasks": r.n_tasks, "trajectories": r.n_trajectories,
                "tests_passed": r.reward.mean, "success": r.success.mean,
                "tasks_with_a_success": r.pass_at_k[max(r.pass_at_k)]}

    def on_policy_rounds(self, first: Arm) -> list[Arm]:
        """Rounds 2..N (``--rounds``): each rolls out the last round's SWEET-RL policy on fresh train
        tasks, refits the critic with c on every round's trajectories, and continues the actor."""
        cfg = self.config
        first_data = self.config.data_policies(self.zero_shot)
        data = [first_data] if first_data else None  # None: every policy's trajectories (--no-on-policy)
        made, previous = [], first
        start = cfg.rounds_offset if cfg.rounds_offset is not None else cfg.train_offset + cfg.train_tasks
        for r in range(2, cfg.rounds + 1):
            key = f"sweet-round-{r}"
            if not previous.model:
                made.append(Arm(key, training={"skipped": f"round {r - 1} was not trained"}))
                continue
            offset = start + (r - 2) * cfg.train_tasks
            self.report.stage(
                f"round {r}: {previous.model} on {cfg.train_split} tasks {offset + 1}-{offset + cfg.train_tasks},"
                f" k={cfg.samples_per_task}"
            )
            fresh = self.rollout(previous.model, cfg.train_split, offset=offset)
            if data is not None:
                data.append(fresh)
            critic = self.critic(training_info=True, data=",".join(data) if data else None)
            previous = self.policy(key, critic, data=fresh, base=previous.model)
            previous.training["round"] = {"data": fresh, "critic": critic.get("checkpoint"),
                                          "from": made[-1].model if made else first.model}
            made.append(previous)
        return made

    def critic(self, training_info: bool, data: str | None = None, member: int = 0) -> dict:
        """A critic on ``data``'s trajectories (default: the study's, see data_policies); an
        ensemble's ``member`` k (seed + k)."""
        from colbench.training.critic import fit_critic  # torch: not for `colbench --help`

        data = data or self.config.critic_data(self.zero_shot)
        config = self.config.critic_settings(training_info, data, member)
        done = self._finished_run("critic", config.to_json(), data)
        if done:
            return done
        try:
            with self.report.progress("critic" + ("" if training_info else " without c")) as on_progress:
                result = fit_critic(self.db, config, base_model=self.config.model, parent_checkpoint=None,
                                    on_progress=on_progress)
        except NothingToTrain as why:
            return {"skipped": str(why)}
        return {"checkpoint": checkpoint_name(result.checkpoint_id), "checkpoint_id": result.checkpoint_id,
                "run_id": result.run_id,
                "metrics": result.metrics}

    def judge_critics(self, critics: dict[str, dict]) -> None:
        """backend-lite: each critic's held-out pair accuracy and turn credit (critic_eval.py) on a
        mixed scripted agent's dialogues of the first test tasks (k=2), whose turns' ground truth
        (did it obtain a fact?) the lite human knows; stored in the critic's summary as "eval"."""
        from colbench.training.critic_eval import evaluate_critic

        trained = {name: critic for name, critic in critics.items() if "checkpoint" in critic}
        for name, critic in list(trained.items()):  # judged by an earlier run of this study: not again
            with self.db.read() as session:
                judged = queries.run_metrics(session, critic["run_id"]).get("eval")
            if judged:
                critic["eval"] = judged
                del trained[name]
        if not trained:
            return
        cfg = self.config
        test = cfg.test_splits[0]
        scripted = replace(cfg.rollout(SCRIPTED_JUDGE, test), engine=SCRIPTED_JUDGE, samples_per_task=2)
        with self.report.progress(f"{test}: {SCRIPTED_JUDGE}, for the critics' evaluation") as on_progress:
            policy = run_rollout(self.db, scripted, on_progress=on_progress).policy
        for name, critic in trained.items():
            with self.report.progress(f"critic {name}: evaluation") as on_progress:
                found = evaluate_critic(self.db, critic["checkpoint_id"], tasks=f"backend:{test}", policies=[policy],
                                        device=cfg.device, on_progress=on_progress)
            critic["eval"] = found.as_dict()
            with self.db.write() as session:  # `colbench runs show` shows it with the critic's run
                queries.add_run_metrics(session, critic["run_id"], {"eval": critic["eval"]})

    def policy(self, key: str, critic: dict | None = None, data: str | None = None, base: str | None = None) -> Arm:
        """An arm's policy, trained from ``base`` (default: the study's model) on ``data``'s
        trajectories (default: the study's)."""
        from colbench.training.policy import fit_policy  # torch: not for `colbench --help`
        from colbench.training.trainer import run_settings

        algo = "sweet" if key.startswith("sweet") else key
        if critic is not None and "checkpoint" not in critic:
            return Arm(key, training={"skipped": "its critic could not be trained"})
        data = data or self.config.data_policies(self.zero_shot)
        base = base or self.config.model
        config = self.config.policy_settings(data, key)
        if algo == "sweet" and config.sampler == "openai" and base != self.config.model:
            # An on-policy round: its candidates come from the policy it continues, loaded onto the server.
            config = replace(config, served_model=self.served_name(base, config.base_url))
        critic_id = critic["checkpoint_id"] if critic else None  # an id, or an ensemble's ids
        done = self._finished_run(f"policy:{algo}", run_settings(config, algo, critic_id), data, base)
        if done:
            return Arm(key, model=done["checkpoint"], training=done, critic=critic)
        try:
            with self.report.progress(f"policy {key}") as on_progress:
                result = fit_policy(self.db, config, algo=algo, base_model=base, critic_checkpoint=critic_id,
                                    on_progress=on_progress)
        except NothingToTrain as why:
            return Arm(key, training={"skipped": str(why)})
        return Arm(key, model=checkpoint_name(result.checkpoint_id), critic=critic,
                   training={"checkpoint": checkpoint_name(result.checkpoint_id), "checkpoint_id": result.checkpoint_id,
                             "run_id": result.run_id, "metrics": result.metrics})

    def record_study(self, arms: list[Arm]) -> None:
        """Each evaluated arm's trajectories, under the run's label, in the study's files; on
        validation, also what the arm was trained with and what its training cost; and what each
        SWEET-RL arm's pairs preferred, against ground truth (backend-lite's human and the sandbox)."""
        from colbench import study
        from colbench.fact_finding import pair_kinds
        from colbench.grading.grader import Grader

        cfg = self.config
        recorded = {(r["arm"], r["label"], r["run_id"]) for r in study.read_jsonl(self.folder / study.PAIRS)}
        sweet = [arm for arm in arms if arm.key.startswith("sweet") and arm.results and arm.training.get("run_id")
                 and cfg.recorded_name(arm.key)
                 and (cfg.recorded_name(arm.key), cfg.label, arm.training["run_id"]) not in recorded]  # graded once
        if cfg.tasks == "backend-lite" and sweet:
            with Grader(sandbox=cfg.sandbox) as grader:
                for arm in sweet:
                    study.record_pairs(self.folder, cfg.recorded_name(arm.key), cfg.label,
                                       pair_kinds(self.db, arm.training["run_id"], grader=grader).as_dict())
        for arm in arms:
            name = cfg.recorded_name(arm.key)
            if not name:
                continue
            critic = (arm.critic or {}).get("members", [arm.critic or {}])[0]  # an ensemble's first member
            for split, result in arm.results.items():
                rows = [{"seed": cfg.training_seed} | row for row in
                        study.trajectory_rows(self.db, result.policy, result.setting, split,
                                              simulator=self.simulator_ref)]
                line = None
                if cfg.evaluate_on == "val":
                    line = {"policy": self.run_summary(arm.training.get("run_id")),
                            "critic": self.run_summary(critic.get("run_id")),
                            "best_of": cfg.best_of if arm.key == "best-of-n" else None, "model": arm.model}
                study.record(self.folder, name, cfg.label, rows, line)

    def run_summary(self, run_id: int | None) -> dict | None:
        """A training run as the study's validation file keeps it: settings, figures, minutes."""
        if run_id is None:
            return None
        from colbench.store.models import TrainingRun

        with self.db.read() as session:
            run = session.get(TrainingRun, run_id)
        minutes = (run.finished_at - run.started_at).total_seconds() / 60 if run.finished_at else None
        figures = {k: v for k, v in (run.metrics or {}).items() if not isinstance(v, (list, dict))}
        return {"run_id": run.id, "kind": run.kind, "settings": run.config, "metrics": figures, "minutes": minutes}

    # ------------------------------------------------------------ resuming

    def _finished_run(self, kind: str, settings: dict, data: str | None, base: str | None = None) -> dict | None:
        """The newest finished run of ``kind`` with these settings, from ``base`` (default: the
        study's model), that has consumed every graded train trajectory of ``data``, as a summary;
        None when the stage has to run."""
        # How it ran, not what it learned (the server's address, and the name it served the policy under).
        ignored = {"device", "out", "dtype", "autocast", "gradient_checkpointing", "sampler", "base_url",
                   "served_model", "report_to"}
        base = normalized_model_ref(base or self.config.model)
        with self.db.read() as session:
            policies = [p.strip() for p in data.split(",")] if data else None
            newest_data = queries.newest_graded_seq(session, family=BACKEND, split=self.config.train_split,
                                                    policies=policies)
            found = queries.same_run(session, kind, settings, started_from=base, ignored=ignored)
        if found is None:
            return None
        checkpoint, run = found
        if newest_data is not None and (run.data_watermark or 0) < newest_data:
            return None  # graded data came after it: the stage runs again
        return {"checkpoint": checkpoint_name(checkpoint.id), "checkpoint_id": checkpoint.id, "run_id": run.id,
                "metrics": run.metrics,
                "reused": True}
