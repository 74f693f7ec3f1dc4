"""Backend programming: the agent writes a Python function; hidden unit tests in a sandbox grade it."""
from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from colbench import protocol
from colbench.envs.base import Env, Episode, Grade
from colbench.errors import FormatError
from colbench.families.base import TaskFamily
from colbench.simulators.prompts import build_messages
from colbench.tasks.spec import LITE_SPLITS, TaskSpec

BACKEND_SYSTEM_PROMPT = (
    "You are a programmer working with a person who needs a Python function written for them. "
    "They know exactly what they want, but their first message leaves details out: units, thresholds, "
    "rounding, edge cases, the exact output format. Ask short, specific questions to find those details, "
    "one or two per message. You have at most {turns} messages in total, so be concise. "
    "When you are ready, write a message that starts with `" + protocol.ANSWER_MARKER + "` followed by the "
    "complete function as raw Python code, with no explanation."
)


class BackendEpisode(Episode):
    system_prompt = BACKEND_SYSTEM_PROMPT


class BackendEnv(Env):
    family = "backend"
    episode_class = BackendEpisode
    simulator_brief = staticmethod(build_messages)  # the person who has the code (or backend-lite's facts) in mind

    def __init__(self, grader):
        self.grader = grader  # colbench.grading.grader.Grader: the sandbox

    def grade(self, task: TaskSpec, answer: str) -> "Future[Grade]":
        graded: Future = Future()

        def convert(done: Future) -> None:
            try:
                report = done.result()
            except BaseException as exc:  # handed to whoever waits on the grade
                graded.set_exception(exc)
                return
            graded.set_result(
                Grade(
                    reward=report.fraction_passed, metric="tests", success=report.success, error=report.error,
                    tests=report.tests, grading=report.grading,
                )
            )

        self.grader.submit(task, answer).add_done_callback(convert)
        return graded


class BackendFamily(TaskFamily):
    name = "backend"
    summary = "a Python function, graded by hidden unit tests"
    reply_limit = 400
    pair_rule = "correct"  # best fully correct trajectory vs each lower one
    headline_metric = "success"
    headline_label = "success"
    reward_label = "% tests passed"
    task_checks = "code"
    answer_language = "python"
    rft_threshold = None  # the paper's: every trajectory that passed all its tests
    tiers = {"backend-lite": LITE_SPLITS}  # colbench/tasks/lite, stored as backend tasks under splits lite-<...>

    def env(self, db, *, sandbox: str, workers: int, clip: str | None, render_pool: int, grading: str):
        from colbench.grading.grader import Grader

        grader = Grader(sandbox=sandbox, workers=workers, grading=grading)
        return BackendEnv(grader), grader.close

    def builtin_simulator(self):
        from colbench.simulators.rulebased.backend import BuiltinSimulator

        return BuiltinSimulator()

    def system_prompt(self) -> str:
        return BACKEND_SYSTEM_PROMPT

    def tests_from_record(self, record: dict, where: str) -> dict[str, str]:
        tests = record.get("test_cases")
        if not isinstance(tests, dict) or not tests:
            raise FormatError(f"{where}: field 'test_cases' must be a non-empty object of call strings")
        bad = [k for k, v in tests.items() if not isinstance(v, str) or not v.strip()]
        if bad:
            raise FormatError(f"{where}: test case '{bad[0]}' must be a call expression string")
        return dict(tests)

    def claims(self, record: dict) -> bool:
        return bool(record.get("test_cases"))

    def imported_grade(self, reward: float, record: dict, default_grading: str) -> dict[str, Any]:
        # A reward in an official file was made by the official grader, unless the record says otherwise.
        return {"reward_metric": "tests", "success": float(reward) >= 1.0,
                "grading": record.get("grading", default_grading)}

    def leak(self, task, question: str, reply: str):
        from colbench.simulators.leaks import backend_leak

        return backend_leak(task.ground_truth, reply, question)

    def graded_by(self, env) -> str:
        return env.grader.backend

    def turn_oracle(self, db, trajectory_ids, sandbox: str = "auto"):
        from colbench.families.lite_truth import TurnOracle  # backend-lite's: the lite human knows each turn's worth

        return TurnOracle(db, trajectory_ids, sandbox)

    def pair_preferences(self, db, run_id: int) -> dict:
        from colbench.families.lite_truth import pair_preferences

        return pair_preferences(db, run_id)

    def task_writer(self):
        from colbench.families.backend_authoring import generator_messages

        return generator_messages
