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

The study's settings, task sets and arms are experiment_config.py's; ``plan`` lays out its stages
from them alone (what `colbench experiment --dry-run` prints) and ``run`` goes through that plan.
"""
from __future__ import annotations

from contextlib import nullcontext
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import ContextManager

from colbench.compare import compare, side_of
from colbench.errors import ColbenchError
from colbench.eval import PolicyEval, as_dict, evaluate
from colbench.experiment_config import BACKEND, POLICY_ARMS, ExperimentConfig, algo_of
from colbench.training.config import CriticConfig, PolicyConfig, TrainingConfig
from colbench.model_refs import checkpoint_name, normalized_model_ref
from colbench.progress import Progress, silent
from colbench.rollout import run as run_rollout
from colbench.store import queries
from colbench.store.db import Database
from colbench.training import NothingToTrain
from colbench.training.samplers import is_served

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
    "grpo": (None, None),  # not in the paper
    "grpo-critic": (None, None),
    "grpo-oracle": (None, None),
    "grpo-credit": (None, None),
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
    "grpo": "online GRPO",
    "grpo-critic": "online GRPO + the critic's turn credit",
    "grpo-oracle": "online GRPO + ground truth's turn credit (control)",
    "grpo-credit": "online GRPO + a named turn credit",
}
# The agent whose dialogues judge the critics on backend-lite: it asks, skips, digresses and
# answers early, so its turns differ in whether they obtain a fact.
SCRIPTED_JUDGE = "scripted:mixed"


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


@dataclass(frozen=True)
class Stage:
    """One stage of the study's plan: ``key`` names it for ``run``, ``title`` is what the study
    reports as it enters it, ``details`` what the stage will train or roll out, one line each."""

    key: str  # rollouts, critics, policies, rounds, evaluation
    title: str
    details: tuple[str, ...] = ()


def plan(cfg: ExperimentConfig) -> list[Stage]:
    """The stages ``cfg`` makes, from the config alone (no store, no model): ``run`` enters them in
    this order, and `colbench experiment --dry-run` prints them."""
    train = cfg.rollout(cfg.model, cfg.train_split)
    first = train.offset + 1
    tasks = f"tasks {first}-{first + train.limit - 1}" if train.limit else f"every task from {first}"
    stages = [Stage("rollouts", f"zero-shot rollouts: {cfg.model} on {cfg.family}:{cfg.train_split} {tasks},"
                                f" k={cfg.samples_per_task}", (
        f"engine {train.engine}, simulator {train.simulator}; temperature {train.temperature:g}, at most"
        f" {train.max_new_tokens} tokens per turn, {train.grading} grading",
    ))]
    fits = cfg.critic_fits()
    stages.append(Stage(
        "critics",
        "critics: Bradley-Terry on pairs of the zero-shot train trajectories" if fits
        else "critics: none (no arm needs one)",
        tuple(f"{name}: {_critic_line(cfg.critic_settings(info, None, member))}" for name, info, member in fits),
    ))
    ranking = _ranking_critic(cfg)
    critic_of = {"sweet": ranking, "sweet-critic": ranking, "grpo-critic": ranking,
                 "sweet-no-c": "the critic without c"}
    arms = [key for key in POLICY_ARMS if key in cfg.arms]
    details = [f"{arm_title(key)}: {_policy_line(cfg, key, critic_of.get(key))}" for key in arms]
    if cfg.best_of:
        details.append(f"{arm_title('best-of-n')}: no training; at evaluation the critic with c picks each turn of the"
                       f" zero-shot policy among {cfg.best_of} samples")
    stages.append(Stage("policies", f"policies: {', '.join(arm_title(key) for key in arms) or 'none'}",
                        tuple(details)))
    if cfg.rounds > 1:
        stages.append(Stage("rounds", f"on-policy rounds 2-{cfg.rounds}: each rolls out the last SWEET-RL policy on"
                                      f" the next {cfg.train_tasks} train tasks, refits the critic with c and continues"
                                      " the actor"))
    evaluated = [key for key in ("zero-shot", *arms) if cfg.reads(key)] + [
        *(["best-of-n"] if cfg.best_of else []), *(f"sweet-round-{r}" for r in range(2, cfg.rounds + 1))]
    # A limit above a split's size reads all of it (lite-test has 160).
    limit = f"up to {cfg.test_tasks}" if cfg.test_tasks else "all"
    stages.append(Stage(
        "evaluation", f"evaluation: every policy on {limit} tasks of {', '.join(cfg.test_splits)}",
        (f"{', '.join(arm_title(key) for key in evaluated)}; {cfg.test_samples} sample(s) per task,"
         f" seed {cfg.seed + 1}",),
    ))
    return stages


def recipe_view(cfg: ExperimentConfig) -> dict:
    """The config as colbench/recipe.py's deviations read it: a trainer the study never runs (no critic
    for rft alone, no policy for best-of-N alone) has no settings there, so none of its defaults is
    reported as a departure."""
    settings = asdict(cfg)
    if not cfg.critic_fits():
        settings["critic"] = None
    if not cfg.arms:
        settings["policy"] = None
    return settings


def _ranking_critic(cfg: ExperimentConfig) -> str:
    return "the critic with c" if cfg.critic_ensemble == 1 else f"{cfg.critic_ensemble} critics with c, averaged"


def _trainer_line(settings: TrainingConfig, epochs: int, max_len: int) -> str:
    how = "full fine-tune" if settings.full else f"LoRA r={settings.lora_rank}"
    return (f"{how}, lr {settings.learning_rate:g}, {epochs} epoch(s), batch {settings.batch_size} x"
            f" {settings.grad_accum} accumulated, at most {max_len} tokens")


def _critic_line(critic) -> str:
    return (f"{_trainer_line(critic, critic.epochs, critic.max_len)}; β {critic.beta:g}, normalised per"
            f" {critic.normalize}, pairs: {critic.pairs}")


def _policy_line(cfg: ExperimentConfig, key: str, critic: str | None) -> str:
    algo = algo_of(key)
    policy = cfg.policy_settings(None, key).for_algo(algo)
    trainer = _trainer_line(policy, policy.epochs, policy.max_len)
    if algo == "grpo":
        weight = policy.turn_credit_weight
        credit = {"critic": f", + {critic}'s turn credit x{weight:g}", "none": "",
                  "oracle": f", + ground truth's turn credit x{weight:g}"}.get(
            policy.turn_credit, f", + {policy.turn_credit}'s turn credit x{weight:g}")
        return (f"{policy.steps} online steps of {policy.tasks_per_step} tasks x {policy.group} dialogues, clip"
                f" {policy.clip:g}, KL β {policy.kl_beta:g}{credit}; {trainer}")
    if algo == "rft":
        return f"SFT on the successful train trajectories; {trainer}"
    dpo = f"β {policy.beta:g}, NLL {policy.nll_weight:g}; {trainer}"
    if algo == "mtdpo":
        return f"DPO over whole trajectories, pairs: {policy.pairs}; {dpo}"
    ranked = {"critic": f"{critic}'s own advantage", "oracle": "ground truth"}.get(
        policy.score, f"the log-prob of {critic} minus the sampler's")
    return (f"turn-level DPO: {policy.candidates} candidates per turn on {policy.fraction:.0%} of the"
            f" {policy.selection} ({policy.turns} turns), ranked by {ranked}, {policy.pairs_per_turn} pairs per turn;"
            f" {dpo}")


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
        from colbench.model_refs import stored_ref

        # ckpt:<run name>: the id, stored and matched
        config = replace(config, model=stored_ref(db, config.model),
                         critic_policies=[stored_ref(db, p) for p in config.critic_policies])
        self.db, self.config, self.report, self.folder = db, config, reporter or Reporter(), folder
        self.simulator_ref: str | None = None  # set by the first rollout

    def run(self) -> ExperimentResult:
        cfg = self.config
        if cfg.unsupported:
            raise ColbenchError(f"--tasks {cfg.tasks}: {cfg.unsupported}")
        stages = plan(cfg)

        def enter(key: str) -> None:
            number, stage = next((n, stage) for n, stage in enumerate(stages, 1) if stage.key == key)
            self.report.stage(f"{number}/{len(stages)} {stage.title}")

        enter("rollouts")
        self.zero_shot = self.rollout(cfg.model, cfg.train_split)
        train = self.train_summary(self.zero_shot)

        enter("critics")
        critics = {name: self.critic(training_info=info, member=member) for name, info, member in cfg.critic_fits()}

        if cfg.tasks == "backend-lite":
            self.judge_critics(critics)

        enter("policies")
        ranking = ensemble([critic for name, critic in critics.items() if name.startswith("with c")])
        critic_of = {"sweet": ranking, "sweet-critic": ranking, "grpo-critic": ranking,
                     "sweet-no-c": critics.get("without c")}
        arms = [Arm("zero-shot", model=cfg.model, training={"base": self.zero_shot})]
        arms += [self.policy(key, critic_of.get(key)) for key in POLICY_ARMS if key in cfg.arms]
        if cfg.best_of:
            arms.append(self.best_of_n(critics["with c"]))
        if cfg.rounds > 1:
            enter("rounds")
            arms += self.on_policy_rounds(next(arm for arm in arms if arm.key == "sweet"))

        enter("evaluation")
        for split in cfg.test_splits:
            for arm in arms:
                if arm.model and cfg.reads(arm.key):
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
        from colbench.model_refs import get_checkpoint

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
        done = self._finished_run("critic", config.to_json(), data, defaults=CriticConfig().to_json())
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

        algo = algo_of(key)
        if critic is not None and "checkpoint" not in critic:
            return Arm(key, training={"skipped": "its critic could not be trained"})
        data = data or self.config.data_policies(self.zero_shot)
        base = base or self.config.model
        config = self.config.policy_settings(data, key)
        if algo == "sweet" and is_served(config.sampler) and base != self.config.model:
            # An on-policy round: its candidates come from the policy it continues, loaded onto the server.
            config = replace(config, served_model=self.served_name(base, config.base_url))
        critic_id = critic["checkpoint_id"] if critic else None  # an id, or an ensemble's ids
        done = self._finished_run(f"policy:{algo}", run_settings(config, algo, critic_id), data, base,
                                  defaults=run_settings(PolicyConfig(), algo, None))
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
        validation, also what the arm was trained with and what its training cost; what each
        SWEET-RL arm's pairs preferred, against ground truth (backend-lite's human and the sandbox);
        and each online arm's steps (colbench/study_online.py)."""
        from colbench import study, study_online
        from colbench.families.lite_truth import pair_kinds
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
                                       pair_kinds(self.db, arm.training["run_id"], grader=grader).as_dict(),
                                       seed=cfg.training_seed)
        for arm in arms:
            name = cfg.recorded_name(arm.key)
            if not name:
                continue
            if algo_of(arm.key) == "grpo" and arm.training.get("run_id"):  # an online arm: its steps, as it trained
                study_online.record_steps(self.folder, name, cfg.label, cfg.training_seed, arm.training["run_id"],
                                          study_online.run_steps(self.db, arm.training["run_id"]))
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
        figures = {k: v for k, v in (run.metrics or {}).items() if not isinstance(v, (list, dict))}
        return {"run_id": run.id, "kind": run.kind, "settings": run.config, "metrics": figures,
                "minutes": run.minutes}

    # ------------------------------------------------------------ resuming

    def _finished_run(self, kind: str, settings: dict, data: str | None, base: str | None = None,
                      defaults: dict | None = None) -> dict | None:
        """The newest finished run of ``kind`` with these settings (``defaults``: the values of settings an older
        run did not record, see queries.same_run), from ``base`` (default: the study's model), that has consumed
        every graded train trajectory of ``data``, as a summary; None when the stage has to run."""
        # How it ran, not what it learned (the server's address, the name it served the policy under, the rows a pass
        # holds).
        ignored = {"device", "out", "dtype", "autocast", "gradient_checkpointing", "sampler", "base_url",
                   "served_model", "report_to", "pass_rows"}
        base = normalized_model_ref(base or self.config.model)
        with self.db.read() as session:
            policies = [p.strip() for p in data.split(",")] if data else None
            newest_data = queries.newest_graded_seq(session, family=BACKEND, split=self.config.train_split,
                                                    policies=policies)
            found = queries.same_run(session, kind, settings, started_from=base, ignored=ignored, defaults=defaults)
        if found is None:
            return None
        checkpoint, run = found
        if newest_data is not None and (run.data_watermark or 0) < newest_data:
            return None  # graded data came after it: the stage runs again
        return {"checkpoint": checkpoint_name(checkpoint.id), "checkpoint_id": checkpoint.id, "run_id": run.id,
                "metrics": run.metrics,
                "reused": True}
