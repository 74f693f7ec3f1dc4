"""The simulated human: one small interface, three implementations.

A simulator sees the task (including its hidden information, which the agent never
sees) and the dialogue so far, and writes the human's next message. Replies are
returned raw; the environment truncates them by the protocol's limit so the store
keeps both forms.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Callable

from colbench.engines.base import Message
from colbench.tasks.spec import TaskSpec


@dataclass
class SimRequest:
    task: TaskSpec
    dialogue: list[Message]  # roles "user" (the human) and "assistant" (the agent), in order
    # Frontend tasks only (backend requests leave both None). The environment renders the
    # agent's latest page and the reference page and passes, under the keys "agent" and
    # "reference": ``images``, their full-page PNG bytes (the agent's is the black image
    # when it has shown no page or its page failed to render), and ``dom``, their DOM
    # summaries (colbench.render.dom; the agent's is None when its render failed).
    images: dict[str, bytes] | None = None
    dom: dict[str, dict[str, Any] | None] | None = None
    # What the human is shown of the agent's work: "text" (the dialogue in words) or "pages" (rendered pages
    # beside the reference): a text model cannot play a human who looks at pages, nor a vision one the reverse.
    medium: str = "text"
    # What a model playing this human is told (the family's brief, built by its environment): the chat messages
    # for this request. None: no model can play this family's human.
    brief: Callable[["SimRequest"], list[Message]] | None = None

    def messages(self) -> list[Message]:
        """The chat messages a model-backed simulator sends for this request (``brief`` must be set)."""
        return self.brief(self)


@dataclass
class SimReply:
    text: str  # raw reply; "" when error is set
    error: str | None = None  # why no reply could be had (the human then says protocol.NO_RESPONSE)
    latency_s: float = 0.0
    # The guard's verdict on a reply that carried the reference (colbench.simulators.guard); None: clean or unchecked.
    leak: dict | None = None


def no_model_for(request: SimRequest, medium: str) -> str | None:
    """Why a model-backed simulator of ``medium`` cannot play this request's human, if it cannot."""
    if request.medium != medium:
        return (f"this simulator reads {medium}; a {request.task.family} task's human sees {request.medium}: choose a"
                f" simulator for {request.medium}")
    if request.brief is None:
        return f"the {request.task.family} family gives a simulator model no brief"
    return None


class Simulator(ABC):
    #: A short reference stored with every trajectory, e.g. "builtin", "endpoint:http://...#model".
    ref: str

    @abstractmethod
    def reply(self, requests: list[SimRequest]) -> list[SimReply]:
        """One reply per request. Never raises for a single failed request: sets error."""

    def close(self) -> None:
        pass
