"""The backend study's settings (`colbench experiment backend`'s flags): ExperimentConfig, the task
sets it trains and evaluates on, the policy arms it can train, the trainers' defaults, and the
trainer settings the study sets itself. experiment.py runs the study they describe."""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from colbench import protocol
from colbench.engines import AUTO as AUTO_ENGINE, ENGINES
from colbench.families.backend import BackendFamily
from colbench.grading.sandboxes import AUTO as AUTO_SANDBOX, CHOICES as SANDBOX_CHOICES, sandbox_help
from colbench.grading.semantics import DEFAULT_GRADING, GRADINGS
from colbench.model_refs import DEFAULT_MODEL
from colbench.options import check, help_of, option
from colbench.rollout_config import RolloutConfig
from colbench.simulators import simulator_help
from colbench.simulators.guard import DEFAULT_GUARD, GUARD_HELP, GUARDS
from colbench.tasks.spec import LITE_SPLITS
from colbench.training.config import CriticConfig, PolicyConfig
from colbench.training.samplers import is_served

BACKEND = BackendFamily.name  # the study is the paper's backend setting
FRONTEND = "frontend"

# The policy arms --arms can ask for (zero-shot is always there; best-of-N comes with --best-of).
POLICY_ARMS = ("rft", "mtdpo", "sweet", "sweet-no-c", "sweet-critic", "sweet-oracle", "grpo", "grpo-critic",
               "grpo-oracle", "grpo-credit")
# Online arms: GRPO from the study's model on fresh rollouts of its train split, with the per-turn credit named;
# grpo-credit's is whichever --turn-credit names (infogain, ref-infogain, mc, a plugin's).
ONLINE_CREDIT = {"grpo": "none", "grpo-critic": "critic", "grpo-oracle": "oracle", "grpo-credit": None}
DEFAULT_ARMS = ("rft", "mtdpo", "sweet", "sweet-no-c")
# Task sets: the split the study trains on, and the splits it evaluates on: its validation
# split, where every setting is chosen, and its test splits, read once at the end.
# backend-lite's fresh splits are phases of their own: fresh the third study's test set, fresh2 the fourth's, each read
# once per final arm (studies/backend-lite-3/plan.md, studies/backend-lite-4/plan.md), never by `--evaluate-on test`.
TASK_SETS = {
    BACKEND: ("train", {"test": ("test",)}),
    "backend-lite": (LITE_SPLITS["train"], {"val": (LITE_SPLITS["val"],),
                                            "test": (LITE_SPLITS["test"], LITE_SPLITS["novel"]),
                                            "fresh": (LITE_SPLITS["fresh"],), "fresh2": (LITE_SPLITS["fresh2"],)}),
    FRONTEND: ("train", {"test": ("test",)}),
}
# The task family each task set's splits belong to (backend-lite's are backend tasks).
FAMILY_OF = {BACKEND: BACKEND, "backend-lite": BACKEND, FRONTEND: FRONTEND}
# Task sets the study can plan (--dry-run) but not run, and why: the study's grading summary, its
# table (success; the paper's frontend win rate is against GPT-4o's pages) and colbench/recipe.py's
# yardstick are the backend setting's. The paper's frontend runs are configs/paper/frontend-*.yaml.
PLAN_ONLY = {
    FRONTEND: (
        "the study runs backend task sets only (its success table, its paired comparisons and the official recipe it"
        " is checked against are backend's); run the frontend stages one command each"
        " (docs/scale.md#frontend-stage-by-stage)"
    ),
}
# What --evaluate-on accepts: a phase, or one test split alone (e.g. lite-test, read before lite-novel).
TEST_SPLITS = dict.fromkeys(split for _, phases in TASK_SETS.values() for split in phases["test"])
EVALUATE_ON = ("val", "test", "fresh", "fresh2", *(split for split in TEST_SPLITS if split != "test"))


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
POLICY_SET = STUDY_SET | {"temperature", "max_new_tokens", "sample_batch_size", "turn_credit"}


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
        " of seen templates, and lite-novel, unseen templates); frontend (train, test) is planned by --dry-run but not"
        " run: the study's tables are backend's."
    ), choices=tuple(TASK_SETS))
    evaluate_on: str | None = option(
        None,
        "What every arm is evaluated on: 'val' (backend-lite's lite-val, 120 train-template tasks that no demonstration"
        " or training data touches: tune here) or 'test' (the test sets, read once, at the end), or one test set alone"
        " (lite-test or lite-novel), or 'fresh' (lite-fresh, the third study's test set: new instances of the trained"
        " templates), or 'fresh2' (lite-fresh2, the fourth study's: instances each holding a value no earlier split"
        " has). Default: val for backend-lite, test for backend (it has no validation split).",
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
    sim_guard: str = option(DEFAULT_GUARD, GUARD_HELP, choices=GUARDS)
    engine: str = option(
        AUTO_ENGINE,
        "What rolls every policy out: auto (ct2 on a CPU, hf otherwise), hf, ct2, vllm (vLLM's offline engine, loading "
        "each checkpoint's weights), vllm-serve (a vLLM server of each policy's own weights, full or LoRA, started for "
        "its rollout and stopped after: 3x ct2 on a CPU), or openai: a vLLM server at --base-url that serves --model as"
        " --served-model, "
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
        " critic; tells a failing actor update from a failing critic), grpo (online GRPO on fresh rollouts of the train"
        " split, --policy-steps, --policy-group ...), grpo-critic (+ the critic's per-turn credit, read with c),"
        " grpo-oracle (+ ground truth's, backend-lite) and grpo-credit (+ the turn credit --turn-credit names)."
        " Default: the paper's four.",
        flags=("--arm",),
        choices=POLICY_ARMS
    )
    turn_credit: str = option("none", (
        "The grpo-credit arm's per-turn credit: any registered turn credit but the critic and ground truth, which are"
        " the grpo-critic and grpo-oracle arms (infogain, ref-infogain, mc, random, a plugin's; `colbench credit ls`),"
        " through --policy-turn-credit-combination, its models the study's --model, frozen."
    ))
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
        " read is another study run's arm) and, with --label, does not read it. Default: each arm's own key."
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
        if "grpo-credit" in self.arms and self.turn_credit in ("none", "critic", "oracle"):
            raise ValueError(
                "the grpo-credit arm takes its turn credit from --turn-credit NAME (infogain, ref-infogain, mc, a"
                f" plugin's; `colbench credit ls`), not {self.turn_credit!r}: the arms grpo, grpo-critic and"
                " grpo-oracle are those"
            )
        if self.rounds > 1 and (self.train_tasks is None or "sweet" not in self.arms):
            raise ValueError("--rounds needs --train-tasks (each round takes that many fresh tasks) and the sweet arm")
        if self.served and not self.base_url:
            raise ValueError("--engine openai needs --base-url (the vLLM server that serves --model)")
        served_rounds = self.rounds > 1 and is_served(self.policy.sampler)
        if self.policy.full and (self.served or served_rounds):
            raise ValueError(
                "a fully fine-tuned policy cannot be served here: a running vLLM loads new LoRA adapters, not new"
                " weights. Train LoRA policies (no --policy-full), or read each checkpoint with --engine vllm-serve (a"
                " server of its own weights for each rollout)"
            )
        for pair in self.record_arms:
            key, equals, _ = pair.partition("=")
            if not equals or key not in ("zero-shot", "best-of-n", *POLICY_ARMS):
                raise ValueError(f"--record-arm takes KEY=NAME with KEY an arm (zero-shot, {', '.join(POLICY_ARMS)},"
                                 f" best-of-n); got {pair!r}")
        phases = TASK_SETS[self.tasks][1]
        online = any(arm in ONLINE_CREDIT for arm in self.arms)
        if online and self.policy.eval_every and not self.policy.eval_tasks and "val" not in phases:
            raise ValueError(f"--policy-eval-every needs --policy-eval-tasks: --tasks {self.tasks} has no validation"
                             " split for the online arms to read")
        if self.evaluate_on is None:
            self.evaluate_on = "val" if "val" in phases else "test"
        if self.evaluate_on not in phases and self.evaluate_on not in phases["test"]:
            choices = " or ".join(dict.fromkeys((*phases, *phases["test"])))
            raise ValueError(f"--tasks {self.tasks} cannot be evaluated on {self.evaluate_on}: choose {choices}")

    @classmethod
    def help(cls) -> dict[str, str]:
        return help_of(cls)

    @property
    def family(self) -> str:
        return FAMILY_OF[self.tasks]

    @property
    def unsupported(self) -> str | None:
        """Why this study can be planned but not run (None: it runs)."""
        return PLAN_ONLY.get(self.tasks)

    def reads(self, key: str) -> bool:
        """Whether evaluation reads the arm: not in a labelled study run that records nothing of it (--record-arm
        KEY=: its read is another study run's, or none is wanted), which would pay for a read it throws away (a
        fresh split's read is 40 minutes on 2 cores). Its training still runs (or is found stored)."""
        return not (self.label and self.recorded_name(key) == "")

    def critic_fits(self) -> list[tuple[str, bool, int]]:
        """(name, with training-time info, ensemble member) of every critic the study fits: with c
        for SWEET-RL, its control and best-of-N (one per ensemble member), without c for the ablation."""
        fits = []
        if {"sweet", "sweet-critic", "grpo-critic"} & set(self.arms) or self.best_of:
            fits += [("with c" if member == 0 else f"with c #{member + 1}", True, member)
                     for member in range(self.critic_ensemble)]
        if "sweet-no-c" in self.arms:
            fits.append(("without c", False, 0))
        return fits

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
            sim_guard=self.sim_guard,
            tasks=f"{self.family}:{split}",
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
        return replace(self.critic, family=self.family, split=self.train_split, training_info=training_info,
                       seed=self.training_seed + member,
                       device=self.device, policies=data, tags=list(self.tags))

    def policy_settings(self, data: str | None, arm: str = "rft") -> PolicyConfig:
        """An arm's trainer config: the study's policy settings, the controls' ranking, and the
        trajectories of ``data`` (TrainingConfig.policies)."""
        score = {"sweet-critic": "critic", "sweet-oracle": "oracle"}.get(arm, self.policy.score)
        online = {"turn_credit": ONLINE_CREDIT[arm] or self.turn_credit, "simulator": self.simulator,
                  "sim_guard": self.sim_guard, "sandbox": self.sandbox} if arm in ONLINE_CREDIT else {}
        if online and not self.policy.eval_tasks and (val := TASK_SETS[self.tasks][1].get("val")):
            # Validation inside an online run reads the study's own validation split (lite-val), not the family's.
            online["eval_tasks"] = f"{self.family}:{val[0]}"
        return replace(
            self.policy, family=self.family, split=self.train_split, temperature=self.temperature,
            max_new_tokens=self.max_new_tokens,
            sample_batch_size=self.batch_size, seed=self.training_seed, device=self.device, policies=data,
            tags=list(self.tags), score=score, **online,
        )


def algo_of(arm: str) -> str:
    """The registered algorithm an arm trains with."""
    return "sweet" if arm.startswith("sweet") else "grpo" if arm in ONLINE_CREDIT else arm
