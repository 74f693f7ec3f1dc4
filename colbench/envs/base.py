"""What every ColBench episode shares: the dialogue, turn counting and the answer.

A family (backend, frontend) supplies an Episode subclass (its system prompt and what
its answer is) and an Env (what happens around the dialogue: rendering pages, what the
simulated human is shown, how a finished episode is graded). The rollout drives any
family through these two small interfaces.
"""
from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field

from colbench import protocol
from colbench.engines.base import Message
from colbench.simulators.base import SimRequest
from colbench.simulators.prompts import generic_brief
from colbench.tasks.spec import TaskSpec


@dataclass
class Grade:
    """A finished episode's outcome, as the store records it."""

    reward: float  # backend: fraction of tests passed; frontend: page similarity
    metric: str  # "tests", or the similarity's name ("ssim-edges", "clip:<model>")
    success: bool | None = None  # backend only: every test passed
    error: str | None = None
    tests: list = field(default_factory=list)  # backend: grading.grader.TestOutcome rows
    screenshot: str | None = None  # frontend: sha256 of the final page's render
    grading: str | None = None  # backend: the grading semantics (grading/semantics.py)


@dataclass
class Episode:
    trajectory_id: int
    task: TaskSpec
    dialogue: list[Message] = field(default_factory=list)  # without the system prompt
    agent_turns: int = 0
    answer: str | None = None
    failure: str | None = None
    last_prompt: str | None = None  # the previous agent turn's full prompt (for compact storage)

    system_prompt = ""

    def __post_init__(self):
        if not self.dialogue:
            self.dialogue = [{"role": "user", "content": self.task.problem_description}]

    @property
    def finished(self) -> bool:
        return self.answer is not None or self.failure is not None

    @property
    def agent_to_move(self) -> bool:
        return not self.finished and self.dialogue[-1]["role"] == "user"

    def conversation(self) -> list[Message]:
        """What the policy is shown for its next turn."""
        system = self.system_prompt.format(turns=protocol.MAX_AGENT_TURNS)
        return [{"role": "system", "content": system}] + self.dialogue

    def agent_says(self, text: str) -> str:
        """Take the agent's raw generation; returns what the dialogue keeps of it (its visible text)."""
        shown = protocol.visible_text(text)
        self.dialogue.append({"role": "assistant", "content": shown})
        self.agent_turns += 1
        self.answer = protocol.extract_answer(shown, last_turn=self.agent_turns >= protocol.MAX_AGENT_TURNS)
        return shown

    def human_says(self, raw: str, reply_limit: int) -> str:
        """Take the simulated human's reply, cut to the family's ``reply_limit`` (colbench.families)."""
        shown = protocol.truncate_reply(raw, reply_limit)
        self.dialogue.append({"role": "user", "content": shown})
        return shown

    @classmethod
    def resume(cls, trajectory_id: int, task: TaskSpec, turns: list) -> "Episode":
        """Rebuild an interrupted episode from its stored turns."""
        episode = cls(trajectory_id, task, dialogue=[{"role": t.role, "content": t.content} for t in turns])
        for turn in turns:
            if turn.role == "assistant":
                episode.agent_turns += 1
                episode.last_prompt = turn.prompt
        if episode.dialogue[-1]["role"] == "assistant":
            # Stopped between the agent's turn and the human's reply: re-read whether it answered.
            text = episode.dialogue[-1]["content"]
            episode.answer = protocol.extract_answer(text, last_turn=episode.agent_turns >= protocol.MAX_AGENT_TURNS)
        return episode


class Env:
    """A task family's side of a rollout."""

    family: str
    episode_class: type[Episode] = Episode
    renders = False  # does after_agent_step or sim_requests do slow work (a browser)? then off the event loop
    # What a model playing the human is told (SimRequest.brief): the family's own, or a generic one that hands it
    # the task's hidden information.
    simulator_brief = staticmethod(generic_brief)

    def after_agent_step(self, episodes: list[Episode]) -> dict[int, dict]:
        """Work after agent turns are generated; returns extra Turn fields per trajectory id."""
        return {}

    def sim_requests(self, episodes: list[Episode]) -> list[SimRequest]:
        return [SimRequest(task=e.task, dialogue=list(e.dialogue), brief=self.simulator_brief) for e in episodes]

    def grade(self, task: TaskSpec, answer: str) -> "Future[Grade]":
        """Grade an answer on its own (re-grading stored answers)."""
        raise NotImplementedError

    def grade_episode(self, episode: Episode) -> "Future[Grade]":
        """Grade a finished episode, live or rebuilt from its stored turns (Episode.resume).

        Backend grades the answer; a family whose reward depends on more of the dialogue
        (frontend: the last page shown in any turn) overrides this.
        """
        return self.grade(episode.task, episode.answer or "")

    def new_screenshots(self) -> list[dict]:
        """Screenshot rows saved since the last call, to be stored before turns refer to them."""
        return []

    def close(self) -> None:
        pass
