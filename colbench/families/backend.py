"""Backend programming: the agent writes a Python function; hidden unit tests in a sandbox grade it."""
from __future__ import annotations

from typing import Any

from colbench.errors import FormatError
from colbench.families.base import TaskFamily
from colbench.tasks.spec import LITE_SPLITS


class BackendFamily(TaskFamily):
    name = "backend"
    summary = "a Python function, graded by hidden unit tests"
    reply_limit = 400
    pair_rule = "correct"  # best fully correct trajectory vs each lower one
    headline_metric = "success"
    headline_label = "success"
    graded_by_tests = True
    renders_pages = False
    answer_language = "python"
    rft_threshold = None  # the paper's: every trajectory that passed all its tests
    tiers = {"backend-lite": LITE_SPLITS}  # colbench/tasks/lite, stored as backend tasks under splits lite-<...>

    def env(self, db, *, sandbox: str, workers: int, clip: str | None, render_pool: int, grading: str):
        from colbench.envs.backend import BackendEnv
        from colbench.grading.grader import Grader

        grader = Grader(sandbox=sandbox, workers=workers, grading=grading)
        return BackendEnv(grader), grader.close

    def builtin_simulator(self):
        from colbench.simulators.rulebased.backend import BuiltinSimulator

        return BuiltinSimulator()

    def system_prompt(self) -> str:
        from colbench.envs.backend import BACKEND_SYSTEM_PROMPT

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

    def graded_by(self, env) -> str:
        return env.grader.backend
