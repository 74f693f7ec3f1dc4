"""Frontend design: the agent writes an HTML/Tailwind page; it is rendered in a real
browser, the simulated human compares it with the reference page, and the final page's
visual similarity to the reference is the reward.
"""
from __future__ import annotations

from concurrent.futures import Future

from colbench import protocol
from colbench.envs.base import Env, Episode, Grade
from colbench.simulators.base import SimRequest
from colbench.simulators.vision import frontend_request
from colbench.tasks.spec import TaskSpec

FRONTEND_SYSTEM_PROMPT = (
    "You are a web developer building a web page with a person who has a clear picture of it in mind. "
    "Each of your messages may show one version of the page: first a few words of reasoning, then `"
    + protocol.THINKING_MARKER + "` followed by one complete HTML document styled with Tailwind CSS classes "
    "(inside <html>...</html>). The person sees your page rendered beside the page they want and tells you "
    "the most important differences. You have at most {turns} messages. When the page is right, write a message "
    "that starts with `" + protocol.ANSWER_MARKER + "` followed by the final HTML document."
)


def page_of(text: str | None) -> str | None:
    """The HTML an agent message (or a final answer) shows."""
    if not text:
        return None
    return protocol.extract_html(text) or (text if "<" in text else None)


class FrontendEpisode(Episode):
    system_prompt = FRONTEND_SYSTEM_PROMPT
    last_render = None  # RenderResult of the agent's latest page (None until it shows one)


class FrontendEnv(Env):
    family = "frontend"
    episode_class = FrontendEpisode

    def __init__(self, renderer, similarity, screenshots):
        self.renderer = renderer  # colbench.render.browser.Renderer (one thread only)
        self.similarity = similarity  # colbench.similarity.Similarity
        self.screenshots = screenshots  # colbench.render.storage.ScreenshotStore
        self._references: dict[str, object] = {}
        self._new: dict[str, dict] = {}

    def _save(self, png: bytes) -> str:
        sha, path = self.screenshots.put(png)
        width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")  # PNG IHDR
        self._new[sha] = {"sha256": sha, "path": str(path), "width": width, "height": height}
        return sha

    def new_screenshots(self) -> list[dict]:
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
        shown = [(e, page_of(e.answer if e.answer is not None else e.dialogue[-1]["content"])) for e in episodes]
        shown = [(e, html) for e, html in shown if html]
        extras = {}
        for (episode, _), result in zip(shown, self.renderer.render_many([html for _, html in shown])):
            episode.last_render = result
            sha = self._save(result.png_bytes)
            extras[episode.trajectory_id] = {"screenshot": sha, "error": result.error}
        return extras

    def sim_requests(self, episodes: list[Episode]) -> list[SimRequest]:
        return [frontend_request(e.task, e.dialogue, e.last_render, self.reference(e.task)) for e in episodes]

    def grade(self, task: TaskSpec, answer: str) -> "Future[Grade]":
        """Render the final page and score it against the reference (a missing page is black)."""
        graded: Future = Future()
        try:
            html = page_of(answer)
            result = self.renderer.render(html) if html else None
            png = result.png_bytes if result else self.renderer.black()
            sha = self._save(png)
            score = self.similarity.score(png, self.reference(task).png_bytes)
            error = (result.error if result else "no page in the answer")
            graded.set_result(Grade(reward=float(score), metric=self.similarity.name, error=error, screenshot=sha))
        except BaseException as exc:
            graded.set_exception(exc)
        return graded
