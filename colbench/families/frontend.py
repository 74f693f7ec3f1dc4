"""Frontend design: the agent writes an HTML/Tailwind page; its render's similarity to the reference is the reward."""
from __future__ import annotations

from typing import Any

from colbench.errors import FormatError
from colbench.families.base import TaskFamily


class FrontendFamily(TaskFamily):
    name = "frontend"
    summary = "an HTML/Tailwind page, scored by its rendered similarity to the reference"
    reply_limit = 1000
    pair_rule = "margin"  # every pair of trajectories at least 0.1 apart
    headline_metric = "reward"  # a page is not solved or not: its similarity is the figure
    headline_label = "similarity"
    graded_by_tests = False
    renders_pages = True
    answer_language = "html"
    rft_threshold = 0.8  # per task, the best page when its similarity reaches 0.8

    def env(self, db, *, sandbox: str, workers: int, clip: str | None, render_pool: int, grading: str):
        from colbench.envs.frontend import FrontendEnv
        from colbench.render.browser import Renderer
        from colbench.render.storage import ScreenshotStore
        from colbench.similarity import make_similarity

        renderer = Renderer(pool_size=render_pool).start()
        env = FrontendEnv(renderer, make_similarity(clip), ScreenshotStore(db.folder / "screenshots"))
        return env, renderer.close

    def builtin_simulator(self):
        from colbench.simulators.rulebased.frontend import FrontendBuiltinSimulator

        return FrontendBuiltinSimulator()

    def system_prompt(self) -> str:
        from colbench.envs.frontend import FRONTEND_SYSTEM_PROMPT

        return FRONTEND_SYSTEM_PROMPT

    def tests_from_record(self, record: dict, where: str) -> dict[str, str]:
        tests = record.get("test_cases")
        if tests is not None and not isinstance(tests, dict):
            raise FormatError(f"{where}: field 'test_cases' must be an object")
        return dict(tests or {})

    def claims(self, record: dict) -> bool:
        return not record.get("test_cases")

    def imported_grade(self, reward: float, record: dict, default_grading: str) -> dict[str, Any]:
        return {"reward_metric": "official", "success": None, "grading": None}

    def graded_by(self, env) -> str:
        return env.similarity.name
