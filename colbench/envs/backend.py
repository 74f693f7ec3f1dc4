"""A backend-programming episode: the ColBench dialogue as a small state machine.

The agent sees our system prompt, then the human's opening (the problem description),
then alternating turns. Each agent turn either ends the episode (`I WANT TO ANSWER:`,
or the last allowed turn) or waits for the simulated human, whose reply is cut to the
protocol's limit before the agent sees it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from colbench import protocol
from colbench.engines.base import Message
from colbench.tasks.spec import TaskSpec

AGENT_SYSTEM_PROMPT = (
    "You are a programmer working with a person who needs a Python function written for them. "
    "They know exactly what they want, but their first message leaves details out: units, thresholds, "
    "rounding, edge cases, the exact output format. Ask short, specific questions to find those details, "
    "one or two per message. You have at most {turns} messages in total, so be concise. "
    "When you are ready, write a message that starts with `" + protocol.ANSWER_MARKER + "` followed by the "
    "complete function as raw Python code, with no explanation."
)


@dataclass
class BackendEpisode:
    trajectory_id: int
    task: TaskSpec
    dialogue: list[Message] = field(default_factory=list)  # without the system prompt
    agent_turns: int = 0
    answer: str | None = None
    failure: str | None = None
    last_prompt: str | None = None  # the previous agent turn's full prompt (for compact storage)

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
        system = AGENT_SYSTEM_PROMPT.format(turns=protocol.MAX_AGENT_TURNS)
        return [{"role": "system", "content": system}] + self.dialogue

    def agent_says(self, text: str) -> None:
        self.dialogue.append({"role": "assistant", "content": text})
        self.agent_turns += 1
        answer = protocol.extract_answer(text, last_turn=self.agent_turns >= protocol.MAX_AGENT_TURNS)
        if answer is not None:
            self.answer = answer

    def human_says(self, raw: str) -> str:
        shown = protocol.truncate_reply(raw, self.task.family)
        self.dialogue.append({"role": "user", "content": shown})
        return shown

    @classmethod
    def resume(cls, trajectory_id: int, task: TaskSpec, turns: list) -> "BackendEpisode":
        """Rebuild an interrupted episode from its stored turns."""
        episode = cls(trajectory_id, task, dialogue=[{"role": t.role, "content": t.content} for t in turns] or None)
        for turn in turns:
            if turn.role == "assistant":
                episode.agent_turns += 1
                episode.last_prompt = turn.prompt
        if episode.dialogue[-1]["role"] == "assistant":
            # Interrupted between the agent's turn and the human's reply: that turn is stored,
            # so re-read whether it answered.
            text = episode.dialogue[-1]["content"]
            answer = protocol.extract_answer(text, last_turn=episode.agent_turns >= protocol.MAX_AGENT_TURNS)
            episode.answer = answer
        return episode
