"""A family graded by hidden tests in the sandbox: backend's, and any plugin's that reuses it (docs/plugins.md).

A task's ``test_cases`` are call expressions (``{"test1": "solve(3)"}``). The grader (colbench.grading) runs the
task's reference and the answer on each call, each in a sandbox, and a test passes when the two outputs are equal and
the reference's is not None: a reference that returns None fails every test. The reward is the fraction of tests
passed, success that all passed. A family subclasses TestedFamily, names its TestedEnv subclass in ``env_class``, and
writes what is its own: name, prompt, simulated human, which unnamed records it claims.
"""
from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from colbench.envs.base import Env, Grade
from colbench.errors import FormatError
from colbench.families.base import TaskFamily
from colbench.tasks.spec import TaskSpec


class TestedEnv(Env):
    """Grades an answer in the sandbox. A subclass sets ``family`` and ``episode_class`` (its system prompt)."""

    __test__ = False  # not a pytest class, despite the name

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


class TestedFamily(TaskFamily):
    """What every family graded by tests shares; a subclass sets ``env_class`` and its own attributes."""

    __test__ = False

    env_class: type[TestedEnv]
    pair_rule = "correct"  # best fully correct trajectory vs each lower one
    headline_metric = "success"
    headline_label = "success"
    reward_label = "% tests passed"
    task_checks = "code"  # `tasks validate` runs the reference against its tests in the sandbox
    answer_language = "python"
    rft_threshold = None  # the paper's: every trajectory that passed all its tests
    regrades = True  # a grade reads the answer alone

    def env(self, db, *, sandbox: str, workers: int, clip: str | None, render_pool: int, grading: str):
        from colbench.grading.grader import Grader

        grader = Grader(sandbox=sandbox, workers=workers, grading=grading)
        return self.env_class(grader), grader.close

    def tests_from_record(self, record: dict, where: str) -> dict[str, str]:
        tests = record.get("test_cases")
        if not isinstance(tests, dict) or not tests:
            raise FormatError(f"{where}: field 'test_cases' must be a non-empty object of call strings")
        bad = [k for k, v in tests.items() if not isinstance(v, str) or not v.strip()]
        if bad:
            raise FormatError(f"{where}: test case '{bad[0]}' must be a call expression string")
        return dict(tests)

    def imported_grade(self, reward: float, record: dict, default_grading: str) -> dict[str, Any]:
        # A reward in an official file was made by the official grader, unless the record says otherwise.
        return {"reward_metric": "tests", "success": float(reward) >= 1.0,
                "grading": record.get("grading", default_grading)}

    def graded_by(self, env) -> str:
        return env.grader.backend
