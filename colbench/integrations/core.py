"""What every framework integration shares: colbench's own parts, and one dialogue driven by them.

A framework (TRL, verifiers) decides when the agent speaks and what it says; everything else is
colbench's, unchanged: the tasks come from ``wiring.select_tasks``, the simulated human from
``wiring.build_simulator``, the grader from ``wiring.build_env`` (the family's environment: the
sandbox under the official metric, or the browser and the page similarity), and each turn is read
by the protocol through the family's Episode (visible text, answer marker, turn limit, reply
truncation). So the human and the grader see what they would see in ``colbench rollout``.

Dialogues are synchronous here: an async framework runs them in a thread (a simulator or a grader
call blocks, and the frontend environment renders in a browser).
"""
from __future__ import annotations

import itertools
import threading
from concurrent.futures import Future

from colbench import protocol
from colbench.envs.base import Episode, Grade
from colbench.families import family_of_selector
from colbench.store import queries
from colbench.store.db import Database
from colbench.store.models import Trajectory, Turn, utcnow
from colbench.store.writer import StoreWriter
from colbench.tasks.rows import spec_of
from colbench.tasks.spec import TaskSpec
from colbench.wiring import build_env, build_simulator, select_tasks


class ColBench:
    """The tasks, the family's environment, the simulated human and (optionally) the store of one run.

    ``tasks`` is a task selector as ``colbench rollout --tasks`` takes it (``backend-lite:train``,
    ``backend:test``, ``frontend:train``); ``simulator`` a simulator spec (``builtin``,
    ``endpoint:<base_url>#<model>``, ``vision:...``); ``db`` the store the tasks are read from (a URL or a
    Database; default: $COLBENCH_DB or sqlite:///colbench.db). With ``record``, every graded dialogue is
    written into that store as a trajectory of ``policy``, so ``colbench inspect``, ``view``, ``eval``
    and ``compare`` read a framework's run as they read a rollout.
    """

    def __init__(self, tasks: str = "backend-lite:train", *, simulator: str = "builtin",
                 db: str | Database | None = None, limit: int | None = None, offset: int = 0,
                 sandbox: str = "auto", grading: str = "official", workers: int = 2, clip: str | None = None,
                 record: bool = False, policy: str = "external", simulator_engine: str = "auto",
                 sim_guard: str = "flag"):
        self.db = db if isinstance(db, Database) else Database(db)
        self.family = family_of_selector(tasks)
        rows = select_tasks(self.db, tasks, limit, offset)
        self.tasks: dict[int, TaskSpec] = {row.id: spec_of(row) for row in rows}
        self.task_ids = [row.id for row in rows]
        self.env, self._close_env = build_env(self.db, self.family.name, sandbox=sandbox, workers=workers, clip=clip,
                                              grading=grading)
        self.simulator = build_simulator(self.db, simulator, simulator_engine, family=self.family.name,
                                         guard=sim_guard)
        # The store's identity of a task set ("backend:lite-train"), as a rollout run names it.
        split_label = f"{rows[0].family}:{rows[0].split}"
        self.recorder = Recorder(self.db, policy, self.simulator.ref, split_label) if record else None
        self._ids = itertools.count(1)  # episode ids in memory (the store gives its own when it records)
        self._ids_lock = threading.Lock()

    def system_prompt(self) -> str:
        """The agent's instructions exactly as a rollout shows them (the family's, with the turn limit)."""
        return self.family.system_prompt().format(turns=protocol.MAX_AGENT_TURNS)

    def dialogue(self, task_id: int) -> "Dialogue":
        with self._ids_lock:
            local_id = next(self._ids)
        return Dialogue(self, task_id, local_id)

    def grade(self, dialogues: list["Dialogue"], setting: str = "") -> list[Grade]:
        """Grade finished dialogues together (the sandbox's workers run side by side), recording each if asked.

        ``setting`` tells the recorded trajectories apart (e.g. a training step); see Recorder.
        """
        futures: list[Future] = [self.env.grade_episode(d.episode) for d in dialogues]
        grades = [future.result() for future in futures]
        if self.recorder is not None:
            screenshots = self.env.new_screenshots()  # rows the turns and grades refer to: stored first
            for dialogue, grade in zip(dialogues, grades):
                self.recorder.record(dialogue, grade, setting, screenshots)
                screenshots = []
        return grades

    def flush(self) -> None:
        """Wait until every recorded dialogue is in the store (and raise a write's error, if one failed)."""
        if self.recorder is not None:
            self.recorder.flush()

    def close(self) -> None:
        try:
            self.flush()
        finally:
            if self.recorder is not None:
                self.recorder.close()
            self.simulator.close()
            self._close_env()

    def __enter__(self) -> "ColBench":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Dialogue:
    """One episode: the agent's turns come in from the framework, the human's replies go back to it."""

    def __init__(self, bench: ColBench, task_id: int, local_id: int):
        self.bench = bench
        self.task_id = task_id
        self.episode: Episode = bench.env.episode_class(local_id, bench.tasks[task_id])
        # The turns as the store keeps them (index 0: the human's opening, the problem description).
        self.turns: list[dict] = [{"role": "user", "content": self.episode.task.problem_description}]

    @property
    def task(self) -> TaskSpec:
        return self.episode.task

    @property
    def finished(self) -> bool:
        return self.episode.finished

    def agent_turn(self, text: str) -> str | None:
        """One agent turn, read by the protocol; returns the human's reply as the agent is shown it (cut to the
        family's limit), or None when this turn ended the dialogue (it answered, or it was the last allowed)."""
        if self.finished:
            raise ValueError("the dialogue has ended: it takes no more agent turns")
        self._agent_says(text)
        if self.finished:
            return None
        env, episode = self.bench.env, self.episode
        (request,) = env.sim_requests([episode])
        (reply,) = self.bench.simulator.reply([request])
        # As in a rollout: a simulator that gives no reply makes the human say "No response." and the dialogue goes on.
        shown = episode.human_says(protocol.NO_RESPONSE if reply.error else reply.text, self.bench.family.reply_limit)
        self.turns.append({"role": "user", "content": shown, "raw": None if reply.error else reply.text,
                           "error": reply.error, "latency_s": reply.latency_s, "leak": reply.leak})
        return shown

    def final_turn(self, text: str | None) -> None:
        """The framework ended the dialogue with this agent turn (None: with no turn). The turn is read as the
        protocol reads the last allowed turn: the text after the answer marker, else the whole visible text."""
        if self.finished:
            return
        if text is not None:
            shown = self._agent_says(text)
            if not self.finished:
                self.episode.answer = protocol.extract_answer(shown, last_turn=True)
        if not self.finished:  # no turn at all: graded as an empty answer (backend) or the last page shown (frontend)
            self.episode.answer = ""

    def _agent_says(self, text: str) -> str:
        shown = self.episode.agent_says(text)
        row = {"role": "assistant", "content": shown, "raw": text}
        env = self.bench.env
        if env.renders:  # the frontend's render of the page this turn showed (its screenshot is the turn's)
            row.update(env.after_agent_step([self.episode]).get(self.episode.trajectory_id, {}))
        self.turns.append(row)
        return shown


class Recorder:
    """Writes graded dialogues into the store through its one writer thread, off the framework's critical path.

    Each (policy, simulator, setting, task set) is a rollout run, as ``colbench rollout`` makes them, so the
    store's commands read a framework's dialogues as they read a rollout's: a TRL run records each training
    step's dialogues under the setting ``step=<n>`` (``colbench compare`` then compares two steps).
    """

    def __init__(self, db: Database, policy: str, simulator: str, tasks: str):
        self.db, self.policy, self.simulator, self.tasks = db, policy, simulator, tasks
        self.writer = StoreWriter(db)
        self._runs: dict[str, int] = {}  # setting -> rollout run id (touched by the writer thread only)

    def record(self, dialogue: Dialogue, grade: Grade, setting: str, screenshots: list[dict]) -> None:
        episode = dialogue.episode

        def write(session):
            queries.add_screenshots(session, screenshots)
            if setting not in self._runs:
                run = queries.open_rollout_run(session, policy=self.policy, simulator=self.simulator, setting=setting,
                                               tasks=self.tasks, config={"recorded_by": "colbench.integrations"})
                self._runs[setting] = run.id
            # The next sample index of this policy on the task: unique across settings, as the slot's key needs.
            index = queries.sample_counts(session, self.policy, [dialogue.task_id]).get(dialogue.task_id, 0)
            now = utcnow()
            row = Trajectory(task_id=dialogue.task_id, rollout_id=self._runs[setting], policy=self.policy,
                             simulator=self.simulator, setting=setting, sample_index=index, status="running",
                             started_at=now)
            queries.add_rows(session, [row])
            session.flush()  # the row's id, for its turns
            queries.add_rows(session, [Turn(trajectory_id=row.id, index=i, **turn)
                                       for i, turn in enumerate(dialogue.turns)])
            queries.finish(session, {row.id: episode.answer})
            self.db.lock_for_sequence(session)
            queries.save_grades(session, {row.id: grade})

        self.writer.submit(write)

    def flush(self) -> None:
        self.writer.flush()
        self.writer.check()

    def close(self) -> None:
        self.writer.close(timeout_s=10.0)
