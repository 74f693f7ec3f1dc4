"""The generation interface every engine implements (transformers, vLLM, OpenAI-compatible).

A conversation is a list of chat messages ``{"role": ..., "content": ...}``. Engines
render it with the model's chat template and record the exact prompt text, so the
store keeps what the policy really saw.

Log-probs are those of the sampled tokens under the model's own distribution
(temperature 1, no top-k/top-p), whatever temperature was used to sample. That is
the quantity SWEET-RL subtracts ("the sampler's own mean log-prob").
"""
from __future__ import annotations

from colbench.errors import ColbenchError

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from colbench import protocol

Message = dict[str, str]


@dataclass
class Sample:
    text: str
    token_ids: list[int] = field(default_factory=list)
    token_logprobs: list[float] = field(default_factory=list)
    finish_reason: str = "stop"  # "stop" | "length"

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids) if self.token_ids else len(self.token_logprobs)

    @property
    def logprob_sum(self) -> float | None:
        return float(sum(self.token_logprobs)) if self.token_logprobs else None

    @property
    def logprob_mean(self) -> float | None:
        return self.logprob_sum / len(self.token_logprobs) if self.token_logprobs else None


@dataclass
class Generation:
    """All samples drawn for one conversation, with the prompt exactly as the model saw it."""

    prompt_text: str
    prompt_tokens: int
    samples: list[Sample]
    latency_s: float


@dataclass
class SamplingParams:
    temperature: float = protocol.TEMPERATURE
    max_new_tokens: int = protocol.MAX_NEW_TOKENS
    n: int = 1
    seed: int | None = None


class Engine(ABC):
    """Generates continuations of chat conversations, batched."""

    #: A short reference to the model, stored with every trajectory (e.g. "hf:/path", "ckpt:3").
    model_ref: str
    #: Which engine this is, as --engine names it (for reports).
    kind: str = "custom"

    @abstractmethod
    def generate(self, conversations: list[list[Message]], params: SamplingParams) -> list[Generation]:
        """One Generation per conversation, each with ``params.n`` samples."""

    def render_prompt(self, conversation: list[Message]) -> str:
        """The prompt text the model sees for this conversation (chat template applied)."""
        raise NotImplementedError

    def stop(self) -> None:
        """Make a generate under way return soon, its output no longer wanted (Ctrl-C)."""

    def close(self) -> None:
        """Free the engine's resources (GPU memory, worker processes)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class EngineError(ColbenchError, RuntimeError):
    """A generation request failed for a reason worth one line to the user."""
