"""The simulated human: one small interface, three implementations.

A simulator sees the task (including its hidden information, which the agent never
sees) and the dialogue so far, and writes the human's next message. Replies are
returned raw; the environment truncates them by the protocol's limit so the store
keeps both forms.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from colbench.engines.base import Message
from colbench.tasks.spec import TaskSpec


@dataclass
class SimRequest:
    task: TaskSpec
    dialogue: list[Message]  # roles "user" (the human) and "assistant" (the agent), in order


@dataclass
class SimReply:
    text: str  # raw reply; "" when error is set
    error: str | None = None  # why no reply could be had (the trajectory is then failed)
    latency_s: float = 0.0


class Simulator(ABC):
    #: A short reference stored with every trajectory, e.g. "builtin", "endpoint:http://...#model".
    ref: str

    @abstractmethod
    def reply(self, requests: list[SimRequest]) -> list[SimReply]:
        """One reply per request. Never raises for a single failed request: sets error."""

    def close(self) -> None:
        pass
