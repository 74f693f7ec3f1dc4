"""Every table colbench keeps, in one place.

The flow they record: tasks are rolled out into trajectories of turns (agent turns
with the exact prompt and log-probs, human turns with the simulator's raw and
truncated reply); finished trajectories are graded into test results; training
runs consume graded trajectories (lineage) and write checkpoints; critics score
turns; evaluations summarise a policy on a split.

Alembic reads `SQLModel.metadata` from here; change a table, then add a revision
in migrations/versions.
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Optional

from sqlalchemy import JSON, Column, DateTime, Float, Index, Text, UniqueConstraint, func
from sqlmodel import Field, SQLModel

# Stable constraint names, so that batch migrations on SQLite can find them again.
SQLModel.metadata.naming_convention = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def as_utc(when: datetime) -> datetime:
    """A stored time, aware: SQLite hands back naive UTC, PostgreSQL aware."""
    return when.replace(tzinfo=timezone.utc) if when.tzinfo is None else when


def _text(nullable: bool = True) -> Any:
    return Field(default=None, sa_column=Column(Text, nullable=nullable))


def _json(default: Any = None) -> Any:
    if default is None:
        return Field(default=None, sa_column=Column(JSON, nullable=True))
    return Field(default_factory=lambda: type(default)(default), sa_column=Column(JSON, nullable=False))


def _when(nullable: bool = True) -> Any:
    if nullable:
        return Field(default=None, sa_column=Column(DateTime(timezone=True), nullable=True))
    # The server default serves bulk inserts, which leave the column out.
    return Field(
        default_factory=utcnow,
        sa_column=Column(DateTime(timezone=True), nullable=False, server_default=func.current_timestamp()),
    )


class Task(SQLModel, table=True):
    id: Optional[int] = Field(default=None, primary_key=True)
    family: str = Field(index=True)  # "backend" | "frontend"
    split: str = Field(index=True)  # "train" | "test"
    source: str  # "builtin", "import:<file>", "generated:<model>"
    problem_description: str = _text(nullable=False)
    ground_truth: str = _text(nullable=False)  # the reference: code (backend) or HTML (frontend)
    hidden_information: Optional[str] = _text()
    test_cases: dict = _json({})  # {"test1": "f(1, 2)", ...}; empty for frontend
    naive_solution: Optional[str] = _text()
    extra: Optional[dict] = _json()  # fields of the official record we do not model, kept for export
    content_hash: str = Field(unique=True)
    created_at: datetime = _when(nullable=False)


class RolloutRun(SQLModel, table=True):
    """A rollout as a user names it: one policy, simulator and setting on one task set.

    Rerunning the same rollout command continues the same run; a trajectory belongs to
    the run that first asked for its slot. Imports are runs too (simulator "import").
    """

    __tablename__ = "rollout_run"
    __table_args__ = (UniqueConstraint("policy", "simulator", "setting", "tasks"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    name: Optional[str] = Field(default=None, unique=True)
    tags: list = _json([])
    policy: str
    simulator: str
    setting: str = ""
    tasks: str  # FAMILY:SPLIT as stored (e.g. backend:lite-test)
    config: dict = _json({})  # the command's settings, as last run
    created_at: datetime = _when(nullable=False)
    updated_at: Optional[datetime] = _when()  # the last time a command ran it


class Trajectory(SQLModel, table=True):
    """One dialogue between a policy and a simulated human on one task.

    (task, policy, simulator, setting, sample_index) names a rollout slot, so a rerun
    of the same rollout command finds the slots it already filled.
    """

    __table_args__ = (
        UniqueConstraint("task_id", "policy", "simulator", "setting", "sample_index"),
        Index("ix_trajectory_status_policy", "status", "policy"),
    )

    id: Optional[int] = Field(default=None, primary_key=True)
    task_id: int = Field(foreign_key="task.id", index=True)
    rollout_id: Optional[int] = Field(
        default=None, foreign_key="rollout_run.id", index=True
    )  # the run that made the slot
    policy: str  # model reference: "hf:<path>", "ckpt:<id>", "openai:<model>@<url>", "import:<name>"
    simulator: str
    setting: str = ""  # what else shaped the rollout beyond policy and simulator (e.g. best-of-N)
    sample_index: int = 0
    seed: Optional[int] = None
    status: str = Field(default="pending")  # pending | running | done | failed
    failure: Optional[str] = _text()
    answer: Optional[str] = _text()
    reward: Optional[float] = None  # backend: fraction of tests passed; frontend: similarity
    reward_metric: Optional[str] = None  # "tests", or the page similarity's name ("ssim-edges", "clip:...")
    grading: Optional[str] = None  # backend: the semantics the grade was made under ("official" | "strict")
    success: Optional[bool] = None
    screenshot: Optional[str] = Field(default=None, foreign_key="screenshot.sha256")  # frontend: the final page
    # Assigned in increasing order whenever a trajectory gets (re)graded; trainers read
    # "everything after the watermark I consumed" through its index.
    graded_seq: Optional[int] = Field(default=None, unique=True)
    content_hash: Optional[str] = Field(default=None, unique=True)  # imported records only
    worker: Optional[str] = None  # the rollout process that holds the claim
    heartbeat_at: Optional[datetime] = _when()
    started_at: Optional[datetime] = _when()
    finished_at: Optional[datetime] = _when()
    created_at: datetime = _when(nullable=False)


class Turn(SQLModel, table=True):
    """One message of a dialogue. Index 0 is the human's opening (the problem description).

    Agent turns carry the exact prompt the policy saw and the sampled tokens' log-probs.
    A prompt usually starts with the whole previous agent turn's prompt, so it is kept
    as that shared length plus the new tail (linear, not quadratic, in dialogue length);
    read turns through store.queries, which gives back the full text.
    Human turns carry the simulator's raw reply; `content` is what the agent was shown
    (truncated by the protocol).
    """

    __table_args__ = (UniqueConstraint("trajectory_id", "index"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    trajectory_id: int = Field(foreign_key="trajectory.id", index=True)
    index: int
    role: str  # "user" (the human) | "assistant" (the agent)
    content: str = _text(nullable=False)
    raw: Optional[str] = _text()  # agent: raw generation; human: untruncated reply
    token_ids: Optional[list] = _json()  # agent: the sampled token ids, end-of-turn token included when it stopped
    token_logprobs: Optional[list] = _json()  # agent: each sampled token's log-prob under the sampler (temperature 1)
    prompt: Optional[str] = _text()  # agent: the chat-templated prompt (its tail, when prompt_shared is set)
    prompt_shared: Optional[int] = None  # leading characters taken from the previous agent turn's prompt
    prompt_tokens: Optional[int] = None
    completion_tokens: Optional[int] = None
    logprob_sum: Optional[float] = None
    logprob_mean: Optional[float] = None
    latency_s: Optional[float] = None
    error: Optional[str] = _text()
    # human: the simulator guard's verdict when the reply carried the reference (colbench.simulators.guard): kind,
    # span (the evidence), action (flagged | redacted | resampled), original (what the simulator first wrote)
    # SQL NULL, not JSON null, for a clean reply: the leaking replies are found by ``leak IS NOT NULL``.
    leak: Optional[dict] = Field(default=None, sa_column=Column(JSON(none_as_null=True), nullable=True))
    screenshot: Optional[str] = Field(default=None, foreign_key="screenshot.sha256")  # frontend: the page shown
    created_at: datetime = _when(nullable=False)


class Screenshot(SQLModel, table=True):
    """A rendered page, as a content-addressed PNG in the folder beside the database."""

    sha256: str = Field(primary_key=True)
    path: str  # relative to the database's folder
    width: Optional[int] = None
    height: Optional[int] = None
    created_at: datetime = _when(nullable=False)


class TestResult(SQLModel, table=True):
    __tablename__ = "test_result"
    __test__ = False  # not a pytest test class
    __table_args__ = (UniqueConstraint("trajectory_id", "name"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    trajectory_id: int = Field(foreign_key="trajectory.id", index=True)
    name: str
    call: str = _text(nullable=False)
    expected: Optional[str] = _text()  # canonical repr of the reference output
    actual: Optional[str] = _text()  # canonical repr of the answer's output
    passed: bool = False
    error: Optional[str] = _text()
    duration_s: Optional[float] = None


class Store(SQLModel, table=True):
    """The store's identity: one row, made with the store. Its checkpoint folders carry the
    id, so two stores sharing a folder never share (or overwrite) one."""

    id: str = Field(primary_key=True)
    created_at: datetime = _when(nullable=False)


class TrainingRun(SQLModel, table=True):
    __tablename__ = "training_run"

    id: Optional[int] = Field(default=None, primary_key=True)
    kind: str = Field(index=True)  # "critic" | "policy:sweet" | "policy:rft" | "policy:mtdpo"
    name: Optional[str] = Field(default=None, unique=True)
    tags: list = _json([])
    base_model: str
    # The checkpoint this run continued from. Not a foreign key: checkpoint already
    # points at training_run, and a cycle of keys cannot be created in order.
    parent_checkpoint_id: Optional[int] = Field(default=None, index=True)
    config: dict = _json({})
    status: str = "running"  # running | done | failed
    metrics: dict = _json({})
    error: Optional[str] = _text()
    data_watermark: Optional[int] = None  # the highest graded_seq this run consumed
    started_at: datetime = _when(nullable=False)
    finished_at: Optional[datetime] = _when()
    worker: Optional[str] = None  # host:pid:start:tag of the process writing it (colbench/processes.py)
    heartbeat_at: Optional[datetime] = _when()  # while running: a run whose worker is gone is failed
    # Seconds between a stop (its end, or its worker's last heartbeat) and each reopening: a run resumed in a later
    # session took finished_at - started_at - paused_s of work, not the whole span.
    paused_s: float = Field(default=0.0, sa_column=Column(Float, nullable=False, server_default="0"))

    @property
    def minutes(self) -> float | None:
        """How long it worked: start to finish less its pauses; None until it finishes."""
        if self.finished_at is None:
            return None
        return ((as_utc(self.finished_at) - as_utc(self.started_at)).total_seconds() - (self.paused_s or 0.0)) / 60


class TrainingStep(SQLModel, table=True):
    """One optimiser step's figures (loss, learning rate, gradient norm, the loss's own
    statistics), written as training goes, so a run can be watched and drawn."""

    __tablename__ = "training_step"
    __table_args__ = (UniqueConstraint("run_id", "step"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="training_run.id", index=True)
    step: int
    epoch: int
    values: dict = _json({})
    created_at: datetime = _when(nullable=False)


class Checkpoint(SQLModel, table=True):
    id: Optional[int] = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="training_run.id", index=True)
    kind: str  # "critic" | "policy"
    base_model: str
    path: str  # a folder: a peft adapter, or full weights when adapter is False
    adapter: bool = True
    step: int = 0
    sha256: Optional[str] = None
    metrics: dict = _json({})
    created_at: datetime = _when(nullable=False)


class Lineage(SQLModel, table=True):
    """What a training run consumed: a trajectory, or one turn of it."""

    __table_args__ = (Index("ix_lineage_run_trajectory", "run_id", "trajectory_id"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="training_run.id")
    trajectory_id: int = Field(foreign_key="trajectory.id", index=True)
    turn_id: Optional[int] = Field(default=None, foreign_key="turn.id")


class CriticScore(SQLModel, table=True):
    __tablename__ = "critic_score"
    __table_args__ = (UniqueConstraint("turn_id", "checkpoint_id"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    turn_id: int = Field(foreign_key="turn.id", index=True)
    checkpoint_id: int = Field(foreign_key="checkpoint.id", index=True)
    score: float
    created_at: datetime = _when(nullable=False)


class CreditValue(SQLModel, table=True):
    """What a turn credit (colbench/training/credit) gave one agent turn, or one candidate in its place, kept so that
    `credit eval` stopped midway goes on where it stopped and the same command again scores nothing.

    ``credit_key`` names everything that decides the value beyond the dialogue (the credit, its flags, the weights
    it reads, and for a candidate the candidates run): a value is reused only under the same key."""

    __tablename__ = "credit_value"
    __table_args__ = (UniqueConstraint("credit_key", "turn_id", "candidate"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    credit_key: str = Field(index=True)
    credit: str  # the credit as named (`credit eval --credit`), for a person reading the table
    turn_id: int = Field(foreign_key="turn.id", index=True)
    candidate: int = -1  # -1: the stored turn itself; k ≥ 0: the candidate of index k in its place
    value: Optional[float] = None  # None: the credit gives that turn none
    seconds: float = 0.0  # this value's share of the credit's own work
    created_at: datetime = _when(nullable=False)


class Evaluation(SQLModel, table=True):
    id: Optional[int] = Field(default=None, primary_key=True)
    policy: str = Field(index=True)
    family: str
    split: str
    simulator: str
    n_tasks: int
    n_trajectories: int
    metrics: dict = _json({})
    created_at: datetime = _when(nullable=False)


class SweetCandidate(SQLModel, table=True):
    """A candidate agent turn the SWEET actor sampled for a stored agent turn's history,
    with the critic's scores; stored so that a run can be inspected and resumed.

    ``sampling_key`` names everything that decides the candidates (sampler model,
    critic, count, max tokens, seed): a later run with the same key reuses them
    instead of sampling again.
    """

    __tablename__ = "sweet_candidate"
    __table_args__ = (UniqueConstraint("sampling_key", "turn_id", "index"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="training_run.id", index=True)  # the run that sampled it
    sampling_key: str = Field(index=True)
    turn_id: int = Field(foreign_key="turn.id", index=True)  # the stored agent turn whose history it continues
    index: int
    content: str = _text(nullable=False)
    token_ids: list = _json([])  # exactly the sampled tokens (end-of-turn token included when it stopped)
    finish_reason: str = "stop"  # "stop" | "length"
    sampler_logp: float  # mean log-prob per token under the sampling policy (temperature 1)
    critic_checkpoint_id: Optional[int] = Field(default=None, foreign_key="checkpoint.id")
    critic_logp: Optional[float] = None  # mean log-prob per token under the critic, given c
    reference_logp: Optional[float] = None  # the same under the critic's frozen reference, given c
    advantage: Optional[float] = None  # the critic's own A: critic_logp − reference_logp
    score: Optional[float] = None  # what ranks the candidates (see PolicyConfig.score)
    created_at: datetime = _when(nullable=False)


class SweetPair(SQLModel, table=True):
    """A (chosen, rejected) pair of candidates a SWEET run trained on."""

    __tablename__ = "sweet_pair"
    __table_args__ = (UniqueConstraint("run_id", "chosen_id", "rejected_id"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="training_run.id", index=True)
    turn_id: int = Field(foreign_key="turn.id", index=True)
    chosen_id: int = Field(foreign_key="sweet_candidate.id")
    rejected_id: int = Field(foreign_key="sweet_candidate.id")
    created_at: datetime = _when(nullable=False)
