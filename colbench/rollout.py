"""The rollout orchestrator: policy, simulated human and grader, turn by turn, into the store.

One process runs up to `batch_size` episodes at once. Each step makes ONE batched
generate call for every episode whose agent is to move, writes those turns, asks the
simulator for every episode waiting on the human (one batched call), writes those
turns, and hands finished episodes to the sandboxed grader. Freed places are refilled
by claiming more work from the store, so several processes pointed at one database
share the work without overlap, and a rerun of the same command finishes what is
missing: every trajectory is a row before it starts, every turn is written as it
happens, and an interrupted episode resumes from its stored turns.
"""
from __future__ import annotations

import os
import socket
import time
import uuid
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import Callable

from colbench import protocol
from colbench.grading.semantics import DEFAULT_GRADING, GRADING_HELP, GRADINGS
from colbench.options import check, option
from colbench.progress import Progress, silent
from colbench.engines.base import Engine, SamplingParams
from colbench.envs.base import Env, Episode, Grade
from colbench.official import spec_of
from colbench.simulators.base import Simulator
from colbench.store import queries
from colbench.store.db import Database
from colbench.store.models import Task, Trajectory, Turn, utcnow


@dataclass
class RolloutConfig:
    """How a rollout runs: the flags of `colbench rollout` (each field's help is its documentation)."""

    model: str = option("smollm2", "Policy: 'smollm2' (embedded), a local folder, a hub id, ckpt:<id>, or a served model name with --engine openai.")
    engine: str = option("hf", "Generation engine: hf (transformers), vllm, or openai.", choices=("hf", "transformers", "vllm", "openai"))
    base_url: str | None = option(None, "Server URL for --engine openai (default: $OPENAI_BASE_URL).")
    simulator: str = option("builtin", "Simulated human: builtin (the family's rule-based one), endpoint:<url>#<model>, local:<model>, or for frontend vision:<url>#<model>.")
    tasks: str = option("backend:test", "FAMILY:SPLIT of stored tasks (built-in tasks are added on first use).")
    limit: int | None = option(None, "Only the first N tasks of the split (by id).", min=1)
    samples_per_task: int = option(1, "Trajectories per task (k, for best-of-k and critic pairs).", min=1, flags=("--samples-per-task", "-k"))
    seed: int = option(0, "Base sampling seed.")
    temperature: float = option(protocol.TEMPERATURE, "Sampling temperature (the protocol samples at 1.0, at evaluation too).", min=0.0)
    max_new_tokens: int = option(protocol.MAX_NEW_TOKENS, "Tokens per agent turn (the protocol's limit: 1024).", min=1)
    batch_size: int = option(16, "Episodes stepped together in one generate call.", min=1)
    sandbox: str = option("auto", "Grading sandbox: auto (docker, else bwrap), docker, bwrap, or none (unsafe).", choices=("auto", "docker", "bwrap", "none"))
    grade_workers: int = option(2, "Sandboxed grading workers.", min=1)
    grading: str = option(DEFAULT_GRADING, "Backend grading semantics. " + GRADING_HELP, choices=GRADINGS)
    clip: str | None = option(None, "Frontend reward: CLIP ViT-B/32 weights (folder or hub id). Default: the weight-free ssim-edges similarity.")
    device: str = option("auto", "auto, cpu or cuda (hf engine, and the critic of --rerank-critic).")
    rerank_critic: str | None = option(None, "Best-of-N: a critic checkpoint (ckpt:<id>) that picks the best of --candidates samples at every agent turn.")
    candidates: int = option(16, "Samples per agent turn for --rerank-critic.", min=2)
    stale_after_s: float = option(600.0, "Take over a running trajectory whose worker has been silent this long (seconds).", min=0.0)

    def __post_init__(self):
        check(self)
        if self.engine == "openai":
            self.base_url = self.base_url or os.environ.get("OPENAI_BASE_URL")
            if not self.base_url:
                raise ValueError("--engine openai needs --base-url (or $OPENAI_BASE_URL)")

    @property
    def samples_per_turn(self) -> int:
        return self.candidates if self.rerank_critic else 1

    def setting(self) -> str:
        """What besides the policy and simulator shapes a trajectory; part of its slot's identity."""
        parts = []
        if self.temperature != protocol.TEMPERATURE:
            parts.append(f"t={self.temperature:g}")
        if self.max_new_tokens != protocol.MAX_NEW_TOKENS:
            parts.append(f"max={self.max_new_tokens}")
        if self.rerank_critic:
            parts.append(f"best-of-{self.candidates}:{self.rerank_critic}")
        return ",".join(parts)


@dataclass
class RolloutStats:
    total: int = 0  # trajectories the command asks for
    already_done: int = 0
    finished: int = 0  # finished by this process
    no_replies: int = 0  # human turns the simulator failed to write, answered "No response." (as officially)
    graded: int = 0
    successes: int = 0
    agent_turns: int = 0
    generated_tokens: int = 0
    started: float = field(default_factory=time.perf_counter)

    @property
    def turns_per_s(self) -> float:
        return self.agent_turns / max(time.perf_counter() - self.started, 1e-9)

    @property
    def success_rate(self) -> float | None:
        return self.successes / self.graded if self.graded else None

    def as_dict(self) -> dict:
        data = asdict(self)
        data.pop("started")
        data.update(elapsed_s=round(time.perf_counter() - self.started, 3), turns_per_s=round(self.turns_per_s, 3), success_rate=self.success_rate)
        return data


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


def _abandoned(stale_after_s: float) -> Callable[[Trajectory], bool]:
    host = socket.gethostname()

    def check(trajectory: Trajectory) -> bool:
        name = trajectory.worker or ""
        parts = name.split(":")
        if len(parts) == 3 and parts[0] == host and parts[1].isdigit():
            try:
                os.kill(int(parts[1]), 0)
            except ProcessLookupError:
                return True  # its process on this machine is gone (e.g. kill -9)
            except PermissionError:
                pass
        beat = trajectory.heartbeat_at
        if beat is None:
            return True
        if beat.tzinfo is None:  # SQLite hands back naive UTC
            beat = beat.replace(tzinfo=utcnow().tzinfo)
        return utcnow() - beat > timedelta(seconds=stale_after_s)

    return check


class Rollout:
    def __init__(
        self,
        db: Database,
        engine: Engine,
        simulator: Simulator,
        env: Env,
        config: RolloutConfig,
        *,
        critic=None,
        on_progress: Progress | None = None,
    ):
        self.db, self.engine, self.simulator, self.env, self.config = db, engine, simulator, env, config
        self.critic = critic  # colbench.training.scoring.CriticModel, for best-of-N
        if (critic is None) != (config.rerank_critic is None):
            raise ValueError("best-of-N needs both config.rerank_critic and the loaded critic")
        self._progress = on_progress or silent
        self.worker = worker_name()
        self.stats = RolloutStats()
        self.tasks: dict[int, object] = {}
        self.pending_grades: dict[int, object] = {}  # trajectory id → future

    def on_progress(self) -> None:
        s = self.stats
        figures = {"turns_per_s": s.turns_per_s, "success": s.success_rate, "graded": s.graded, "no_replies": s.no_replies}
        self._progress("rollout", s.already_done + s.finished, s.total, figures)

    # ------------------------------------------------------------ setup

    def slot(self, task_ids: list[int]) -> queries.Slot:
        return queries.Slot(
            policy=self.engine.model_ref,
            simulator=self.simulator.ref,
            setting=self.config.setting(),
            task_ids=tuple(task_ids),
            samples_per_task=self.config.samples_per_task,
            seed=self.config.seed,
        )

    def prepare(self, tasks: list[Task]) -> queries.Slot:
        wrong = {t.family for t in tasks} - {self.env.family}
        if wrong:
            raise ValueError(f"a {self.env.family} rollout cannot run {', '.join(sorted(wrong))} tasks")
        self.tasks = {t.id: spec_of(t) for t in tasks}
        slot = self.slot(sorted(self.tasks))
        with self.db.write() as session:
            queries.ensure_slots(session, slot)
            rows = queries.slot_trajectories(session, slot)
        self.stats.total = len(rows)
        self.stats.already_done = sum(r.status in ("done", "failed") for r in rows)
        # Finished but never graded (the process stopped in between): grade them now.
        self.ungraded = [r for r in rows if r.status == "done" and r.graded_seq is None]
        return slot

    # ------------------------------------------------------------ the loop

    def run(self, tasks: list[Task]) -> RolloutStats:
        slot = self.prepare(tasks)
        for episode in self._stored_episodes(self.ungraded):
            self._submit_grade(episode)
        active: list[Episode] = []
        step = 0
        try:
            while True:
                active = [e for e in active if not e.finished]
                active += self._claim(slot, self.config.batch_size - len(active))
                self._collect_grades(block=False)
                if not active:
                    break
                self._agent_step(active, step)
                self._human_step([e for e in active if not e.finished])
                step += 1
            self._collect_grades(block=True)
        except BaseException:
            with self.db.write() as session:
                queries.release(session, self.worker)
            raise
        return self.stats

    def _claim(self, slot: queries.Slot, room: int) -> list[Episode]:
        if room <= 0:
            return []
        with self.db.write() as session:
            claimed = queries.claim(session, slot, self.worker, room, _abandoned(self.config.stale_after_s))
            turns = queries.turns_for(session, [t.id for t in claimed])
            for trajectory in claimed:
                if not turns[trajectory.id]:  # a fresh start: the human's opening is turn 0
                    opening = Turn(trajectory_id=trajectory.id, index=0, role="user", content=self.tasks[trajectory.task_id].problem_description)
                    queries.add_rows(session, [opening])
                    turns[trajectory.id] = [opening]
        episodes = []
        for trajectory in claimed:
            episode = self.env.episode_class.resume(trajectory.id, self.tasks[trajectory.task_id], turns[trajectory.id])
            if episode.finished:  # its answering turn was stored, the trajectory was not closed
                self._finish([episode])
            else:
                episodes.append(episode)
        return episodes

    def _agent_step(self, active: list[Episode], step: int) -> None:
        movers = [e for e in active if e.agent_to_move]
        if not movers:
            return
        params = SamplingParams(
            temperature=self.config.temperature,
            max_new_tokens=self.config.max_new_tokens,
            n=self.config.samples_per_turn,
            seed=self.config.seed * 1_000_003 + step,
        )
        generations = self.engine.generate([e.conversation() for e in movers], params)
        rows = []
        for episode, generation in zip(movers, generations):
            sample = self._best(episode, generation)
            shared, tail = queries.compact_prompt(episode.last_prompt, generation.prompt_text)
            index = len(episode.dialogue)
            shown = episode.agent_says(sample.text)
            rows.append(
                Turn(
                    trajectory_id=episode.trajectory_id,
                    index=index,
                    role="assistant",
                    content=shown,
                    raw=sample.text,
                    token_ids=list(sample.token_ids) or None,
                    prompt=tail,
                    prompt_shared=shared,
                    prompt_tokens=generation.prompt_tokens,
                    completion_tokens=sample.num_tokens,
                    logprob_sum=sample.logprob_sum,
                    logprob_mean=sample.logprob_mean,
                    latency_s=generation.latency_s,
                )
            )
            episode.last_prompt = generation.prompt_text
            self.stats.agent_turns += 1
            self.stats.generated_tokens += sample.num_tokens
        extras = self.env.after_agent_step(movers)  # e.g. the screenshot of the page a turn showed
        for row, episode in zip(rows, movers):
            for name, value in extras.get(episode.trajectory_id, {}).items():
                setattr(row, name, value)
        with self.db.write() as session:
            queries.add_screenshots(session, self.env.new_screenshots())
            queries.add_rows(session, rows)
            queries.beat(session, [e.trajectory_id for e in movers])
        self._finish([e for e in movers if e.finished])
        self.on_progress()

    def _best(self, episode: Episode, generation):
        """The sample to keep: the only one, or the critic's favourite (highest advantage),
        each read after c and exactly the prompt the policy was given."""
        samples = generation.samples
        if self.critic is None or len(samples) == 1:
            return samples[0]
        context = self.critic.context(generation.prompt_text, episode.task.hidden)
        scores = self.critic.score_candidates(context.ids, [s.token_ids or s.text for s in samples])
        return samples[max(range(len(samples)), key=lambda i: scores[i].advantage)]

    def _human_step(self, waiting: list[Episode]) -> None:
        if not waiting:
            return
        replies = self.simulator.reply(self.env.sim_requests(waiting))
        rows = []
        for episode, reply in zip(waiting, replies):
            index = len(episode.dialogue)
            # As officially, a simulator that gives no reply (after its retries) does not end the
            # trajectory: the human says "No response." and the agent goes on; the turn keeps why.
            shown = episode.human_says(protocol.NO_RESPONSE if reply.error else reply.text)
            raw = None if reply.error else reply.text
            rows.append(Turn(trajectory_id=episode.trajectory_id, index=index, role="user", content=shown, raw=raw, error=reply.error, latency_s=reply.latency_s))
            self.stats.no_replies += bool(reply.error)
        with self.db.write() as session:
            queries.add_rows(session, rows)
            queries.beat(session, [e.trajectory_id for e in waiting])

    def _finish(self, episodes: list[Episode]) -> None:
        if not episodes:
            return
        with self.db.write() as session:
            queries.finish(session, {e.trajectory_id: e.answer for e in episodes})
        for episode in episodes:
            self.stats.finished += 1
            self._submit_grade(episode)

    # ------------------------------------------------------------ grading

    def _stored_episodes(self, trajectories: list[Trajectory]) -> list[Episode]:
        """Finished trajectories rebuilt from their stored turns, so they grade as a live episode would
        (frontend: the last page shown in any turn), with the answer stored when they finished."""
        with self.db.read() as session:
            turns = queries.turns_for(session, [t.id for t in trajectories])
        episodes = []
        for trajectory in trajectories:
            episode = self.env.episode_class.resume(trajectory.id, self.tasks[trajectory.task_id], turns[trajectory.id])
            episode.answer = trajectory.answer or ""
            episodes.append(episode)
        return episodes

    def _submit_grade(self, episode: Episode) -> None:
        self.pending_grades[episode.trajectory_id] = self.env.grade_episode(episode)

    def _collect_grades(self, block: bool) -> None:
        ready = {
            trajectory_id: future
            for trajectory_id, future in self.pending_grades.items()
            if block or future.done()
        }
        if not ready:
            return
        grades = {trajectory_id: future.result() for trajectory_id, future in ready.items()}
        with self.db.write() as session:
            queries.add_screenshots(session, self.env.new_screenshots())
            save_grades(self.db, session, grades)
        for trajectory_id, grade in grades.items():
            del self.pending_grades[trajectory_id]
            self.stats.graded += 1
            self.stats.successes += bool(grade.success)
        self.on_progress()


def save_grades(db: Database, session, grades: dict[int, Grade]) -> None:
    """Write test rows, reward and success for graded trajectories (replacing earlier grades)."""
    db.lock_for_sequence(session)
    queries.save_grades(session, grades)


# ---------------------------------------------------------------- the front door


@dataclass
class RolloutResult:
    stats: RolloutStats
    policy: str  # the policy's model reference, as stored with every trajectory
    simulator: str
    graded_by: str  # the sandbox backend, or the frontend similarity's name


def run(db: Database, config: RolloutConfig, *, on_progress: Progress | None = None) -> RolloutResult:
    """Roll a policy out as ``config`` says: tasks, engine, simulated human, grader, critic
    for best-of-N; everything is stored, and a rerun finishes what is missing. The one way
    in for `colbench rollout` and the experiment."""
    from colbench.wiring import build_engine, build_env, build_simulator, parse_task_selector, select_tasks

    family, _ = parse_task_selector(config.tasks)
    chosen = select_tasks(db, config.tasks, config.limit)
    env, close_env = build_env(db, family, sandbox=config.sandbox, workers=config.grade_workers, clip=config.clip, grading=config.grading)
    try:
        critic = None
        if config.rerank_critic:
            from colbench.training.scoring import CriticModel

            critic = CriticModel.from_checkpoint(db, config.rerank_critic, device=config.device)
        options = {"base_url": config.base_url} if config.engine == "openai" else {"device": config.device}
        with build_engine(db, config.engine, config.model, **options) as policy:
            human = build_simulator(db, config.simulator, config.engine, family=family)
            try:
                stats = Rollout(db, policy, human, env, config, critic=critic, on_progress=on_progress).run(chosen)
            finally:
                human.close()
        graded_by = env.grader.backend if family == "backend" else env.similarity.name
        return RolloutResult(stats, policy.model_ref, human.ref, graded_by)
    finally:
        close_env()
