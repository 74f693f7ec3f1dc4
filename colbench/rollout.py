"""The rollout orchestrator: policy, simulated human and grader, turn by turn, into the store.

Episodes run asynchronously: each advances the moment its own previous step returns
(agent turn, human reply, next agent turn, grading), with up to `concurrency` of them
live at once and no lock-step between them. Requests to a server go out one per
episode, at most `concurrency` in flight to the policy and as many to the simulator; a
local engine's turns are gathered into batches that refill as episodes come back
(batching.py). Turns are written by one writer thread (store/writer.py), transactional
and in order, off the requests' critical path.

Freed places are refilled by claiming more work from the store, so several processes
pointed at one database share the work without overlap, and a rerun of the same command
finishes what is missing: every trajectory is a row before it starts, every turn is
written as it happens, and an interrupted episode resumes from its stored turns.

What a rollout runs is a RolloutConfig (rollout_config.py); `run` is the one way in.
"""
from __future__ import annotations

import asyncio
import signal
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Callable

from colbench import protocol
from colbench.errors import ColbenchError
from colbench.processes import worker_abandoned, worker_id
from colbench.batching import Batcher
from colbench.progress import Progress, silent
from colbench.engines import AUTO as AUTO_ENGINE, ENGINES
from colbench.engines.base import Engine, SamplingParams
from colbench.envs.base import Env, Episode, Grade
from colbench.families import family as family_named
from colbench.rollout_config import RolloutConfig
from colbench.tasks.rows import spec_of
from colbench.simulators.base import Simulator
from colbench.store import queries
from colbench.store.db import Database
from colbench.store.models import Task, Trajectory, Turn
from colbench.store.writer import StoreWriter


@dataclass
class RolloutStats:
    total: int = 0  # trajectories the command asks for
    already_done: int = 0
    finished: int = 0  # finished by this process
    no_replies: int = 0  # human turns the simulator failed to write, answered "No response." (as officially)
    leaks: int = 0  # human replies the guard found handing over the reference (colbench.simulators.guard)
    graded: int = 0
    successes: int = 0
    agent_turns: int = 0
    finished_dialogue_turns: int = 0  # the agent turns of the dialogues this process finished, whole
    generated_tokens: int = 0
    started: float = field(default_factory=time.perf_counter)

    reward_sum: float = 0.0  # of graded trajectories: tests passed, or page similarity

    @property
    def turns_per_s(self) -> float:
        return self.agent_turns / max(time.perf_counter() - self.started, 1e-9)

    @property
    def tokens_per_s(self) -> float:
        return self.generated_tokens / max(time.perf_counter() - self.started, 1e-9)

    @property
    def mean_reward(self) -> float | None:
        return self.reward_sum / self.graded if self.graded else None

    @property
    def success_rate(self) -> float | None:
        return self.successes / self.graded if self.graded else None

    def as_dict(self) -> dict:
        data = asdict(self)
        data.pop("started")
        data.update(elapsed_s=round(time.perf_counter() - self.started, 3), turns_per_s=round(self.turns_per_s, 3),
                    tokens_per_s=round(self.tokens_per_s, 1), success_rate=self.success_rate,
                    mean_reward=self.mean_reward)
        return data


def turn_seed(seed: int, trajectory_id: int, agent_turns: int) -> int:
    """Each agent turn's own seed, so the k samples of a task differ and a rerun repeats
    them. (A local engine samples a batch from one generator: the first turn's seed.)"""
    return hash((seed, trajectory_id, agent_turns)) % (1 << 31)


CLAIM_RETRY_S = 0.5


def _abandoned(stale_after_s: float) -> Callable[[Trajectory], bool]:
    """Is a running row's worker gone: its process on this host has ended (kill -9, a
    zombie, a reused pid), or, from another host, it has not beaten for ``stale_after_s``?"""
    return lambda trajectory: worker_abandoned(trajectory.worker, trajectory.heartbeat_at, stale_after_s)


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
        self.family = family_named(env.family)
        self.critic = critic  # colbench.training.scoring.CriticModel, for best-of-N
        if (critic is None) != (config.rerank_critic is None):
            raise ValueError("best-of-N needs both config.rerank_critic and the loaded critic")
        self._progress = on_progress or silent
        self.worker = worker_id()
        self.rollout_id: int | None = None  # the rollout run, once prepared
        self.run_name: str | None = None  # its name, whoever gave it
        self.continued = False  # the run was there before this command
        self.stats = RolloutStats()
        self.tasks: dict[int, object] = {}
        # Episodes in dialogue, by trajectory: the callers a batch can wait for, and the turns taken
        # by dialogues not yet finished. (An episode being graded asks nothing of either model.)
        self.under_way: dict[int, Episode] = {}
        self._critic_lock = threading.Lock()

    def on_progress(self) -> None:
        s = self.stats
        figures = {"turns": s.agent_turns, "turns_per_s": s.turns_per_s, "tokens_per_s": s.tokens_per_s,
                   "graded": s.graded,
                   "no_replies": s.no_replies}
        figures[self.family.headline_label] = (
            s.mean_reward if self.family.headline_metric == "reward" else s.success_rate
        )
        left = s.total - s.already_done - s.finished
        if left and s.turns_per_s > 0:
            # Dialogues run side by side and end together, so the count of finished ones says little about
            # the time left (a bar counting them read 13 h for a best-of-8 validation of some 800 turns at
            # 0.2 a second); the turn rate does.
            taken = sum(episode.agent_turns for episode in self.under_way.values())
            if s.finished == 0:  # a bound: every dialogue left takes at most the protocol's turns
                figures["eta_at_most_s"] = max(left * protocol.MAX_AGENT_TURNS - taken, 0) / s.turns_per_s
            else:  # an estimate: as many turns as the dialogues that ended took on average
                per_dialogue = s.finished_dialogue_turns / s.finished
                figures["eta_s"] = max(left * per_dialogue - taken, 0) / s.turns_per_s
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
            rollout_id=self.rollout_id,
        )

    def prepare(self, tasks: list[Task]) -> queries.Slot:
        wrong = {t.family for t in tasks} - {self.env.family}
        if wrong:
            raise ValueError(f"a {self.env.family} rollout cannot run {', '.join(sorted(wrong))} tasks")
        self.tasks = {t.id: spec_of(t) for t in tasks}
        cfg = self.config
        identity = {"policy": self.engine.model_ref, "simulator": self.simulator.ref, "setting": cfg.setting(),
                    "tasks": f"{tasks[0].family}:{tasks[0].split}"}
        with self.db.write() as session:
            before = queries.find_rollout_run(session, **identity)
            check_continued_name(before, cfg.name, identity)
            # The engine's arithmetic (e.g. CTranslate2's GEMM backend and ISA) beside the settings: the same
            # command on another machine can sample from a differently computed model.
            recorded = cfg.labels() | ({"arithmetic": arithmetic} if (arithmetic := self.engine.arithmetic()) else {})
            # What a server was told beyond the settings (every sampling filter off), so the run says what it sampled.
            recorded |= {"sampling": sampling} if (sampling := self.engine.sampling_fields()) else {}
            run = queries.open_rollout_run(session, **identity, config=recorded, name=cfg.name, tags=cfg.tags)
            self.rollout_id, self.run_name, self.continued = run.id, run.name, before is not None
            slot = self.slot(sorted(self.tasks))
            queries.ensure_slots(session, slot)
            rows = queries.slot_trajectories(session, slot)
        self.stats.total = len(rows)
        self.stats.already_done = sum(r.status in ("done", "failed") for r in rows)
        # Finished but never graded (the process stopped in between): grade them now.
        self.ungraded = [r for r in rows if r.status == "done" and r.graded_seq is None]
        return slot

    # ------------------------------------------------------------ the loop

    def run(self, tasks: list[Task]) -> RolloutStats:
        """Run to the end; Ctrl-C or SIGTERM stop it within a second or two, keeping every
        turn already written, and raise KeyboardInterrupt."""
        slot = self.prepare(tasks)
        self.on_progress()  # the total is known: progress shows 0 of it until the first turns come back
        try:
            asyncio.run(self._run(slot))
        except asyncio.CancelledError:
            raise KeyboardInterrupt from None
        return self.stats

    async def _run(self, slot: queries.Slot) -> None:
        self.writer = StoreWriter(self.db)
        self.policy, policy_batcher = _policy_caller(self.engine, self.config, expected=lambda: len(self.under_way))
        self.human = _human_caller(self.simulator, self.config, expected=lambda: len(self.under_way))
        stop_on_sigterm = _cancel_on_sigterm(asyncio.current_task())
        try:
            grading = [asyncio.create_task(self._grade(e)) for e in self._stored_episodes(self.ungraded)]
            await self._episodes(slot)
            await asyncio.gather(*grading)
            self.writer.flush()
            self.writer.check()
        except BaseException:
            self.engine.stop()
            if policy_batcher is not None:
                policy_batcher.join(timeout_s=1.5)
            self.writer.flush(timeout_s=1.0)  # keep what was already generated
            self.writer.submit(lambda session: queries.release(session, self.worker))
            self.writer.flush(timeout_s=1.0)
            raise
        finally:
            stop_on_sigterm()
            self.writer.close(timeout_s=1.0)
            await _close_async_clients(self.engine, self.simulator)

    async def _episodes(self, slot: queries.Slot) -> None:
        running: set[asyncio.Task] = set()
        try:
            await self._keep_running(slot, running)
        except BaseException:
            for task in running:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)
            raise

    async def _keep_running(self, slot: queries.Slot, running: set[asyncio.Task]) -> None:
        more = True
        while True:
            room = self.config.concurrency - len(running)
            if more and room > 0:
                claimed = await self._claim(slot, room)
                more = len(claimed) == room  # fewer than asked: none left for now
                for episode in claimed:
                    running.add(asyncio.create_task(self._episode(episode)))
            if not running:
                if not await self._claimable(slot):
                    return
                # Rows remain that this claim did not get: locked by a worker claiming them
                # right now, or just left by a dead one. Look again shortly rather than exit.
                await asyncio.sleep(CLAIM_RETRY_S)
                more = True
                continue
            done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            running -= done
            for task in done:
                task.result()  # an episode's failure (a dead server) ends the rollout
            self.writer.check()
            more = more or bool(done)  # a place came free: look for work again

    async def _claimable(self, slot: queries.Slot) -> int:
        return await self.writer.call(
            lambda session: queries.claimable(session, slot, _abandoned(self.config.stale_after_s))
        )

    async def _claim(self, slot: queries.Slot, room: int) -> list[Episode]:
        def claim(session):
            claimed = queries.claim(session, slot, self.worker, room, _abandoned(self.config.stale_after_s))
            turns = queries.turns_for(session, [t.id for t in claimed])
            for trajectory in claimed:
                if not turns[trajectory.id]:  # a fresh start: the human's opening is turn 0
                    opening = Turn(trajectory_id=trajectory.id, index=0, role="user",
                                   content=self.tasks[trajectory.task_id].problem_description)
                    queries.add_rows(session, [opening])
                    turns[trajectory.id] = [opening]
            return [(t.id, t.task_id) for t in claimed], turns

        claimed, turns = await self.writer.call(claim)
        return [self.env.episode_class.resume(tid, self.tasks[task_id], turns[tid]) for tid, task_id in claimed]

    async def _episode(self, episode: Episode) -> None:
        """One episode from wherever it stands to its grade, at its own pace."""
        self.under_way[episode.trajectory_id] = episode
        try:
            while not episode.finished:
                if episode.agent_to_move:
                    await self._agent_turn(episode)
                else:
                    await self._human_turn(episode)
        finally:
            del self.under_way[episode.trajectory_id]
        self.writer.submit(lambda session: queries.finish(session, {episode.trajectory_id: episode.answer}))
        self.stats.finished += 1
        self.stats.finished_dialogue_turns += episode.agent_turns
        await self._grade(episode)

    async def _agent_turn(self, episode: Episode) -> None:
        generation = await self.policy(episode.conversation(), self._seed(episode))
        sample = await self._best(episode, generation)
        # A prompt the server templated itself (a chat API) is not the text the policy read: none is stored,
        # so the trainers render the policy's own template, as for imported dialogues (training/sequences.py).
        prompt = generation.prompt_text if self.engine.templated_prompts else None
        shared, tail = queries.compact_prompt(episode.last_prompt, prompt)
        row = Turn(
            trajectory_id=episode.trajectory_id,
            index=len(episode.dialogue),
            role="assistant",
            content=episode.agent_says(sample.text),
            raw=sample.text,
            token_ids=list(sample.token_ids) or None,
            token_logprobs=list(sample.token_logprobs) or None,
            prompt=tail,
            prompt_shared=shared,
            prompt_tokens=generation.prompt_tokens,
            completion_tokens=sample.num_tokens,
            logprob_sum=sample.logprob_sum,
            logprob_mean=sample.logprob_mean,
            latency_s=generation.latency_s,
        )
        episode.last_prompt = prompt
        self.stats.agent_turns += 1
        self.stats.generated_tokens += sample.num_tokens
        if self.env.renders:  # e.g. the screenshot of the page the turn showed
            extras = await asyncio.to_thread(self.env.after_agent_step, [episode])
            for name, value in extras.get(episode.trajectory_id, {}).items():
                setattr(row, name, value)
        self._write_turn(row)
        self.on_progress()

    def _seed(self, episode: Episode) -> int:
        return turn_seed(self.config.seed, episode.trajectory_id, episode.agent_turns)

    async def _best(self, episode: Episode, generation):
        """The sample to keep: the only one, or the critic's favourite (highest advantage),
        each read after c and exactly the prompt the policy was given."""
        samples = generation.samples
        if self.critic is None or len(samples) == 1:
            return samples[0]

        def rank():
            context = self.critic.context(generation.prompt_text, episode.task.hidden)
            scores = self.critic.score_candidates(context.ids, [s.token_ids or s.text for s in samples])
            return samples[max(range(len(samples)), key=lambda i: scores[i].advantage)]

        def rank_alone():
            with self._critic_lock:  # one scoring at a time: it is the memory-hungry part
                return rank()

        return await asyncio.to_thread(rank_alone)

    async def _human_turn(self, episode: Episode) -> None:
        if self.env.renders:
            (request,) = await asyncio.to_thread(self.env.sim_requests, [episode])
        else:
            (request,) = self.env.sim_requests([episode])
        reply = await self.human(request)
        index = len(episode.dialogue)
        # As officially, a simulator that gives no reply (after its retries) does not end the
        # trajectory: the human says "No response." and the agent goes on; the turn keeps why.
        shown = episode.human_says(protocol.NO_RESPONSE if reply.error else reply.text, self.family.reply_limit)
        raw = None if reply.error else reply.text
        self.stats.no_replies += bool(reply.error)
        self.stats.leaks += reply.leak is not None
        self._write_turn(Turn(trajectory_id=episode.trajectory_id, index=index, role="user", content=shown, raw=raw,
                              error=reply.error, latency_s=reply.latency_s, leak=reply.leak))

    def _write_turn(self, row: Turn) -> None:
        def write(session):
            queries.add_screenshots(session, self.env.new_screenshots())
            queries.add_rows(session, [row])
            queries.beat(session, [row.trajectory_id])

        self.writer.submit(write)

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

    async def _grade(self, episode: Episode) -> None:
        grade = await asyncio.wrap_future(self.env.grade_episode(episode))

        def write(session):
            queries.add_screenshots(session, self.env.new_screenshots())
            save_grades(self.db, session, {episode.trajectory_id: grade})

        await self.writer.call(write)  # graded only once stored: the count below means it
        self.stats.graded += 1
        self.stats.successes += bool(grade.success)
        self.stats.reward_sum += grade.reward or 0.0
        self.on_progress()


class RunNameConflict(ColbenchError, ValueError):
    pass


def check_continued_name(run, name: str | None, identity: dict) -> None:
    """A name stays on the run it named. A rollout run is one policy, simulator, setting and task
    set; --offset, --limit and -k only choose which of its slots a command fills, so a command
    that differs from an earlier one in those alone continues the earlier run. Giving it another
    --name would rename that run silently (its trajectories, the earlier command's included,
    would go by the new name): refused, in one line that says what to do instead."""
    if run is None or not name or not run.name or run.name == name:
        return
    from colbench.runs import labelled

    raise RunNameConflict(
        f"this rollout continues rollout:{run.id} ({run.name}): {labelled(identity['policy'], identity['setting'])},"
        f" simulator {identity['simulator']}, on {identity['tasks']} (a rollout run is these four; --offset, --limit"
        f" and -k only choose which of its slots to fill), and it keeps its name: drop --name {name}, or give another"
        " --seed to make a run of its own"
    )


def _policy_caller(engine: Engine, config: RolloutConfig, expected: Callable[[], int]):
    """An async function (conversation, seed) -> Generation: the engine's own when it has
    one (a server), else batched turns of its batched `generate` (local engines); and
    the Batcher, if any."""
    params = SamplingParams(temperature=config.temperature, max_new_tokens=config.max_new_tokens,
                            n=config.samples_per_turn)
    if hasattr(engine, "agenerate"):
        async def one(conversation, seed: int):
            return await engine.agenerate(conversation, replace(params, seed=seed))
        return one, None

    def generate(requests: list[tuple[list, int]]):
        # One seed per batch (the engine samples the batch from one generator): the first's.
        return engine.generate([conversation for conversation, _ in requests], replace(params, seed=requests[0][1]))

    batcher: Batcher = Batcher(generate, config.batch_size, expected=expected)

    async def batched(conversation, seed: int):
        return await batcher((conversation, seed))

    return batched, batcher


def _human_caller(simulator: Simulator, config: RolloutConfig, expected: Callable[[], int]):
    """An async function from a SimRequest to its SimReply: a server simulator's own, else
    batched calls of `reply` (a local model's in a thread; the rule-based one inline)."""
    if hasattr(simulator, "areply"):
        return simulator.areply
    in_thread = not getattr(simulator, "instant", False)
    return Batcher(simulator.reply, config.batch_size if in_thread else config.concurrency, expected=expected,
                   in_thread=in_thread, linger_s=0.05 if in_thread else 0.0)


async def _close_async_clients(*parts) -> None:
    for part in parts:
        close = getattr(part, "aclose", None)
        if close is not None:
            try:
                await close()
            except Exception:  # noqa: BLE001 - closing must not hide the run's outcome
                pass


def _cancel_on_sigterm(task: asyncio.Task) -> Callable[[], None]:
    """SIGTERM cancels the run as Ctrl-C does (asyncio.run handles SIGINT itself)."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    loop = asyncio.get_running_loop()
    try:
        loop.add_signal_handler(signal.SIGTERM, task.cancel)
    except (NotImplementedError, RuntimeError):
        return lambda: None
    return lambda: loop.remove_signal_handler(signal.SIGTERM)


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
    engine: str  # the engine that generated the policy's turns (what --engine auto chose)
    run: str | None = None  # the rollout run: rollout:<id>
    name: str | None = None  # its name (given now or by an earlier command)
    continued: bool = False  # the run was there before: this command continued it


def run(db: Database, config: RolloutConfig, *, on_progress: Progress | None = None) -> RolloutResult:
    """Roll a policy out as ``config`` says: tasks, engine, simulated human, grader, critic
    for best-of-N; everything is stored, and a rerun finishes what is missing. The one way
    in for `colbench rollout` and the experiment."""
    from colbench.model_refs import stored_ref
    from colbench.wiring import build_engine, build_env, build_simulator, parse_task_selector, select_tasks

    # ckpt:<run name> → ckpt:<id>: a rollout is stored under the id (names can be removed, ids cannot).
    config = replace(config, model=stored_ref(db, config.model), rerank_critic=stored_ref(db, config.rerank_critic))
    family, _ = parse_task_selector(config.tasks)
    chosen = select_tasks(db, config.tasks, config.limit, offset=config.offset)
    env, close_env = build_env(
        db, family, sandbox=config.sandbox, workers=config.grade_workers, clip=config.clip, grading=config.grading
    )
    try:
        critic = None
        if config.rerank_critic:
            from colbench.training.scoring import CriticModel

            critic = CriticModel.from_checkpoint(db, config.rerank_critic, device=config.device)
        served = {"timeout_s": config.request_timeout_s, "max_retries": config.retries,
                  "concurrency": config.concurrency}
        if config.served:
            options = {"base_url": config.base_url, "served_model": config.served_model, **served}
        else:
            options = {"device": config.device, "max_batch_size": config.batch_size,
                       "compute_type": config.ct2_compute_type}
        with build_engine(db, config.engine, config.model, **options) as policy:
            local = (
                config.engine if config.engine != AUTO_ENGINE and ENGINES.get(config.engine).local else AUTO_ENGINE
            )  # for local:<model>
            human = build_simulator(db, config.simulator, local, family=family, guard=config.sim_guard, **served)
            try:
                rollout = Rollout(db, policy, human, env, config, critic=critic, on_progress=on_progress)
                stats = rollout.run(chosen)
            finally:
                human.close()
        graded_by = family_named(family).graded_by(env)
        return RolloutResult(stats, policy.model_ref, human.ref, graded_by, policy.kind,
                             run=f"rollout:{rollout.rollout_id}",
                             name=rollout.run_name, continued=rollout.continued)
    finally:
        close_env()
