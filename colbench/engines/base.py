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


def encode_text(tokenizer, text: str) -> list[int]:
    """Ids of a templated prompt, as the engines encode it: the template writes every special token."""
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def end_of_turn_ids(tokenizer) -> list[int]:
    """The ids the chat template closes an agent turn with, when that is the tokenizer's EOS (``<|im_end|>``)."""
    messages = [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]
    text = tokenizer.apply_chat_template(messages, tokenize=False)
    eos = tokenizer.eos_token
    if eos and "y" + eos in text:
        return encode_text(tokenizer, eos)
    return []


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
    #: Whether ``Generation.prompt_text`` is the templated prompt the model continued (what trainers read).
    templated_prompts: bool = True

    @abstractmethod
    def generate(self, conversations: list[list[Message]], params: SamplingParams) -> list[Generation]:
        """One Generation per conversation, each with ``params.n`` samples."""

    def render_prompt(self, conversation: list[Message]) -> str:
        """The prompt text the model sees for this conversation (chat template applied)."""
        raise NotImplementedError

    def arithmetic(self) -> dict:
        """What computes this engine's numbers beyond its kind (libraries, ISA), recorded with a rollout run so
        that two runs on different machines can be told apart; {} where nothing more is known."""
        return {}

    def sampling_fields(self) -> dict:
        """The sampling settings this engine fixes beyond temperature, length, n and seed (a server's, sent with
        every request), recorded with a rollout run; {} where it samples the model's distribution as it is."""
        return {}

    def stop(self) -> None:
        """Make a generate under way return soon, its output no longer wanted (Ctrl-C)."""

    def close(self) -> None:
        """Free the engine's resources (GPU memory, worker processes)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class TokenizerEngine(Engine):
    """A local engine with a transformers tokenizer (``self.tokenizer``): prompts are its chat
    template, encoded without added special tokens, and generation continues them."""

    tokenizer: object

    def render_prompt(self, conversation: list[Message]) -> str:
        if not getattr(self.tokenizer, "chat_template", None):
            raise EngineError(f"the tokenizer of {self.model_ref} has no chat template")
        return self.tokenizer.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True)

    def encode(self, text: str) -> list[int]:
        # The chat template already writes every special token (BOS included), so add none.
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def generate(self, conversations: list[list[Message]], params: SamplingParams) -> list[Generation]:
        return self.generate_from_prompts([self.render_prompt(c) for c in conversations], params)

    @abstractmethod
    def generate_from_prompts(self, prompts: list[str], params: SamplingParams) -> list[Generation]:
        """Continue prompts that are already templated (e.g. a stored turn's exact prompt)."""


def token_ids(*values) -> set[int]:
    """The ids among values that are each an id, a list of ids, or None (e.g. the generation
    config's eos_token_id and the tokenizer's)."""
    ids: set[int] = set()
    for value in values:
        if isinstance(value, int):
            ids.add(value)
        elif value:
            ids.update(int(v) for v in value)
    return ids


class EngineError(ColbenchError, RuntimeError):
    """A generation request failed for a reason worth one line to the user."""
