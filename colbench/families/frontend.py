"""Frontend design: the agent writes an HTML/Tailwind page; it is rendered in a real
browser, the simulated human compares it with the reference page, and the visual
similarity to the reference of the last page the agent showed (in any turn, as
officially; the black image if it never showed one) is the reward.
"""
from __future__ import annotations

import re
import threading
from concurrent.futures import Future
from typing import Any

from colbench import protocol
from colbench.envs.base import Env, Episode, Grade
from colbench.errors import FormatError
from colbench.families.base import TaskFamily
from colbench.simulators.base import SimRequest
from colbench.simulators.vision import frontend_request
from colbench.tasks.spec import TaskSpec

_PAGE = re.compile(r"<(html|body|div|main|section)\b", re.IGNORECASE)  # what a reference page opens with

FRONTEND_SYSTEM_PROMPT = (
    "You are a web developer building a web page with a person who has a clear picture of it in mind. "
    "Each of your messages may show one version of the page: first a few words of reasoning, then `"
    + protocol.THINKING_MARKER + "` followed by one complete HTML document styled with Tailwind CSS classes "
    "(inside <html>...</html>). The person sees your page rendered beside the page they want and tells you "
    "the most important differences. You have at most {turns} messages. When the page is right, write a message "
    "that starts with `" + protocol.ANSWER_MARKER + "` followed by the final HTML document."
)


def last_page(dialogue: list[dict]) -> str | None:
    """The HTML of the last page the agent showed, in any turn (None if it never showed one).

    Officially the reward scores this page, not the answer turn's alone: a final
    "I WANT TO ANSWER: looks good" keeps the page shown before it.
    """
    for message in reversed(dialogue):
        if message["role"] == "assistant":
            html = protocol.extract_html(message["content"])
            if html:
                return html
    return None


class FrontendEpisode(Episode):
    system_prompt = FRONTEND_SYSTEM_PROMPT
    last_render = None  # RenderResult of last_page(dialogue); None until rendered (or after a resume)


class FrontendEnv(Env):
    family = "frontend"
    episode_class = FrontendEpisode
    renders = True

    def __init__(self, renderer, similarity, screenshots):
        self.renderer = renderer  # colbench.render.browser.Renderer (one thread only)
        self.similarity = similarity  # colbench.similarity.Similarity
        self.screenshots = screenshots  # colbench.render.storage.ScreenshotStore
        self._references: dict[str, object] = {}
        self._new: dict[str, dict] = {}
        self._new_lock = threading.Lock()  # renders run in threads; the store writer takes the rows

    def _save(self, png: bytes) -> str:
        sha, path = self.screenshots.put(png)
        width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")  # PNG IHDR
        with self._new_lock:
            self._new[sha] = {"sha256": sha, "path": str(path), "width": width, "height": height}
        return sha

    def new_screenshots(self) -> list[dict]:
        with self._new_lock:
            rows, self._new = list(self._new.values()), {}
        return rows

    def reference(self, task: TaskSpec):
        """The reference page's render, once per task."""
        if task.content_hash not in self._references:
            result = self.renderer.render(task.ground_truth)
            self._save(result.png_bytes)
            self._references[task.content_hash] = result
        return self._references[task.content_hash]

    def after_agent_step(self, episodes: list[Episode]) -> dict[int, dict]:
        # As officially, a turn shows a page when its visible text holds an HTML snippet, answer or not.
        shown = [(e, protocol.extract_html(e.dialogue[-1]["content"])) for e in episodes]
        shown = [(e, html) for e, html in shown if html]
        extras = {}
        for (episode, _), result in zip(shown, self.renderer.render_many([html for _, html in shown])):
            episode.last_render = result
            sha = self._save(result.png_bytes)
            extras[episode.trajectory_id] = {"screenshot": sha, "error": result.error}
        return extras

    def page_render(self, episode: FrontendEpisode):
        """The render of the last page the episode showed (None if none); an episode rebuilt from
        stored turns has none in memory, so its last page is rendered again."""
        if episode.last_render is None:
            html = last_page(episode.dialogue)
            episode.last_render = self.renderer.render(html) if html else None
        return episode.last_render

    def shown_now(self, episode: FrontendEpisode):
        """The render of the page the agent's latest turn showed, or None when that turn showed
        none: as officially, the human sees only the page of the turn it answers."""
        latest = episode.dialogue[-1]
        if latest["role"] != "assistant" or not protocol.extract_html(latest["content"]):
            return None
        return self.page_render(episode)  # the latest turn's page is the last page shown

    def sim_requests(self, episodes: list[Episode]) -> list[SimRequest]:
        return [frontend_request(e.task, e.dialogue, self.shown_now(e), self.reference(e.task)) for e in episodes]

    def grade(self, task: TaskSpec, answer: str) -> "Future[Grade]":
        """An answer on its own: the page it shows, else the black image."""
        html = protocol.extract_html(answer)
        return _resolved(
            lambda: self._score(task, self.renderer.render(html) if html else None, "no page in the answer")
        )

    def grade_episode(self, episode: Episode) -> "Future[Grade]":
        """The last page shown in any turn, not only the answer's; the black image if none was."""
        return _resolved(lambda: self._score(episode.task, self.page_render(episode), "no page in any turn"))

    def _score(self, task: TaskSpec, result, no_page: str) -> Grade:
        """A page's render (None: no page, scored as the black image) against the reference."""
        png = result.png_bytes if result else self.renderer.black()
        score = self.similarity.score(png, self.reference(task).png_bytes)
        error = result.error if result else no_page
        return Grade(reward=float(score), metric=self.similarity.name, error=error, screenshot=self._save(png))


def _resolved(work) -> Future:
    """A finished Future with work()'s result, or its exception (handed to whoever waits on it)."""
    done: Future = Future()
    try:
        done.set_result(work())
    except BaseException as exc:
        done.set_exception(exc)
    return done


class FrontendFamily(TaskFamily):
    name = "frontend"
    summary = "an HTML/Tailwind page, scored by its rendered similarity to the reference"
    reply_limit = 1000
    pair_rule = "margin"  # every pair of trajectories at least 0.1 apart
    headline_metric = "reward"  # a page is not solved or not: its similarity is the figure
    headline_label = "similarity"
    reward_label = "similarity"
    task_checks = "page"
    answer_language = "html"
    rft_threshold = 0.8  # per task, the best page when its similarity reaches 0.8

    def env(self, db, *, sandbox: str, workers: int, clip: str | None, render_pool: int, grading: str):
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
        return FRONTEND_SYSTEM_PROMPT

    def tests_from_record(self, record: dict, where: str) -> dict[str, str]:
        tests = record.get("test_cases")
        if tests is not None and not isinstance(tests, dict):
            raise FormatError(f"{where}: field 'test_cases' must be an object")
        return dict(tests or {})

    def claims(self, record: dict) -> bool:
        # A page to match, and no tests: not every record without tests (a plugin family's need not be pages).
        return not record.get("test_cases") and bool(_PAGE.search(str(record.get("ground_truth") or "")))

    def imported_grade(self, reward: float, record: dict, default_grading: str) -> dict[str, Any]:
        return {"reward_metric": "official", "success": None, "grading": None}

    def leak(self, task, question: str, reply: str):
        from colbench.simulators.leaks import frontend_leak

        return frontend_leak(task.ground_truth, reply, question)

    def graded_by(self, env) -> str:
        return env.similarity.name

    def reference_page(self, task) -> str | None:
        return task.ground_truth

    def eval_note(self, metrics: list[str]) -> str | None:
        if any(metric.startswith("clip") for metric in metrics):
            return None
        return "similarity is the weight-free metric named above, not CLIP (pass --clip to rollout for CLIP)"
