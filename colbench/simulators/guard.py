"""The simulator guard: every reply of a simulated human checked for the reference it must not hand over.

A simulated human sees the hidden reference so that it can answer; a policy under optimisation pressure learns to
get the reference out of it instead of solving the task (a public ColBench GRPO run saw leaking dialogues climb
from 2% to 46% as reward rose). The family knows what its reference is, so it judges a reply
(``TaskFamily.leak``); the guard wraps any simulator and acts on the verdict:

- ``off``: no check;
- ``flag`` (the default): the verdict and its evidence are stored with the reply, which reaches the agent as written;
- ``redact``: each leaking span is replaced by a fixed refusal (the whole reply, if the span cannot be cut out);
- ``resample``: the simulator is asked again, up to ``max_resamples`` times, and the reply is redacted if every
  draw leaks.

A checked reply carries ``SimReply.leak``: ``{"kind", "span", "action", "original", "resamples"}`` (action: flagged,
redacted or resampled; original: the simulator's first reply, which the agent did not see unless action is
flagged). A clean reply carries None, as does every reply under ``off``.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

from colbench.simulators.base import SimReply, SimRequest, Simulator

GUARDS = ("off", "flag", "redact", "resample")
DEFAULT_GUARD = "flag"
GUARD_HELP = ("Simulator guard against replies that hand over the hidden reference (the family's leak detector): off,"
              " flag (store the verdict, deliver the reply), redact (replace the leaking span by a refusal, keep the"
              " original in the store), resample (ask again, up to 3 times, then redact).")
# What the agent reads in place of a leaking span: a human who will not dictate the code.
REFUSAL = "(I can't share the code itself, but ask me about what it should do.)"
MAX_RESAMPLES = 3
_MAX_CUTS = 8  # spans cut from one reply before the whole reply is refused


def last_question(request: SimRequest) -> str:
    """The agent's latest message: what the reply answers (a fact it asked for is no leak)."""
    return next((m["content"] for m in reversed(request.dialogue) if m["role"] == "assistant"), "")


Detector = Callable[[SimRequest, str], "object | None"]  # (request, reply text) -> a Leak (kind, span) or None


class GuardedSimulator(Simulator):
    """``inner`` behind the guard. It keeps what the rollout reads of its simulator: ``instant`` (called inline),
    and, through AsyncGuardedSimulator, ``areply``/``aclose`` (a server's human answered on the event loop, so a
    stopped run cancels its requests instead of waiting on a thread)."""

    def __init__(self, inner: Simulator, detect: Detector, mode: str = DEFAULT_GUARD,
                 max_resamples: int = MAX_RESAMPLES):
        if mode not in GUARDS:
            raise ValueError(f"--sim-guard must be one of {', '.join(GUARDS)}; got {mode!r}")
        self.inner, self.detect, self.mode, self.max_resamples = inner, detect, mode, max_resamples
        self.ref = inner.ref
        self.instant = getattr(inner, "instant", False)

    def reply(self, requests: list[SimRequest]) -> list[SimReply]:
        replies = self.inner.reply(requests)
        if self.mode == "off":
            return replies
        checked = []
        for request, reply in zip(requests, replies):
            leak = self._leak(reply, request)
            draws = 0
            while self._resampling(leak, draws):
                draws += 1
                (again,) = self.inner.reply([request])
                if self._clean(again, request):
                    break
            checked.append(self._verdict(request, reply, leak, again if draws else None, draws))
        return checked

    def _leak(self, reply: SimReply, request: SimRequest):
        return None if reply.error is not None or not reply.text else self.detect(request, reply.text)

    def _clean(self, reply: SimReply, request: SimRequest) -> bool:
        return reply.error is None and bool(reply.text) and self.detect(request, reply.text) is None

    def _resampling(self, leak, draws: int) -> bool:
        return leak is not None and self.mode == "resample" and draws < self.max_resamples

    def _verdict(self, request: SimRequest, reply: SimReply, leak, last: SimReply | None, draws: int) -> SimReply:
        """What the agent reads: ``reply`` as it came when clean (or under flag), the last redraw when that one is
        clean, else ``reply`` redacted."""
        if leak is None:
            return reply
        verdict = {"kind": leak.kind, "span": leak.span, "action": "flagged", "original": reply.text,
                   "resamples": draws}
        if self.mode == "flag":
            return replace(reply, leak=verdict)
        if last is not None and self._clean(last, request):
            return replace(last, leak={**verdict, "action": "resampled"}, latency_s=reply.latency_s + last.latency_s)
        return replace(reply, text=self.redacted(request, reply.text, leak), leak={**verdict, "action": "redacted"})

    def redacted(self, request: SimRequest, text: str, leak) -> str:
        """``text`` with every leaking span the detector finds replaced by the refusal; the refusal alone when
        spans keep appearing (or a span is not found verbatim)."""
        for _ in range(_MAX_CUTS):
            if leak is None:
                return text
            if not leak.span or leak.span not in text:
                break
            text = text.replace(leak.span, REFUSAL)
            leak = self.detect(request, text)
        return REFUSAL

    def close(self) -> None:
        self.inner.close()


class AsyncGuardedSimulator(GuardedSimulator):
    """The guard over a simulator that answers on the event loop (a model behind a server)."""

    async def areply(self, request: SimRequest) -> SimReply:
        reply = await self.inner.areply(request)
        if self.mode == "off":
            return reply
        leak, draws, again = self._leak(reply, request), 0, None
        while self._resampling(leak, draws):
            draws += 1
            again = await self.inner.areply(request)
            if self._clean(again, request):
                break
        return self._verdict(request, reply, leak, again, draws)

    async def aclose(self) -> None:
        close = getattr(self.inner, "aclose", None)
        if close is not None:
            await close()


def guarded(simulator: Simulator, family, mode: str) -> Simulator:
    """``simulator`` behind the guard, judged by ``family``'s leak detector; ``simulator`` itself under off."""
    if mode not in GUARDS:
        raise ValueError(f"--sim-guard must be one of {', '.join(GUARDS)}; got {mode!r}")
    if mode == "off":
        return simulator

    def detect(request: SimRequest, text: str):
        return family.leak(request.task, last_question(request), text)

    kind = AsyncGuardedSimulator if hasattr(simulator, "areply") else GuardedSimulator
    return kind(simulator, detect, mode)
