"""A deterministic simulated human for CPU runs and CI.

STAND-IN ONLY. The paper's simulator is a large model (Llama-3.1-70B-Instruct for
backend tasks); numbers measured against this one are not comparable to the paper's
and must not be reported as ColBench results. It exists so that rollouts, grading,
storage and training can run end to end, reproducibly, with no model at all.

How it answers. The hidden reference code is read once into a list of *facts*, each
a short English sentence with the words it is about:

- parameters: what kind of value each one is, the entries read from it, the values it
  is compared with, its default;
- branches: condition → outcome, thresholds included ("when amount is above 1000, the
  discount is set to 0.1"), and early returns or raises for edge cases;
- rounding (``round``, ``floor``, ``ceil``, format specs);
- the result's format: dictionary keys, tuple shape, list contents, text templates;
- named constants and the main computations.

The agent's latest message is split into questions; each question picks the facts
that share the most words with it (identifiers are split, so "discount rate" finds
``discount_rate``), ranked by how rare the shared words are and how important the
fact is. A general request ("any other details?") gets the most important facts not
yet told; a question that matches nothing gets an "I don't know". Expressions are
always put into words: the simulator never writes code.
"""
from __future__ import annotations

import math
import re
import time
import zlib

from colbench.simulators.base import SimReply, SimRequest, Simulator
from colbench.simulators.rulebased import lite
from colbench.simulators.rulebased.facts import Analysis, Fact, text_terms

CACHE_SIZE = 256  # analysed references kept; one is re-read only if evicted

# The environment cuts backend replies to 400 characters; stay under that whole.
REPLY_BUDGET = 380
MAX_FACTS_PER_REPLY = 3

FRONTEND_REPLY = (
    "I can't see the page from here, so I can't compare it with what I have in mind. "
    "Please go with your best judgement."
)

DONT_KNOW = (
    "I don't know, sorry. I haven't thought about that.",
    "I'm not sure about that; use your best judgement.",
    "I don't know. That detail isn't something I have in mind.",
    "Sorry, I have no idea about that part.",
)
NOTHING_MORE = "I think I've told you everything I have in mind."
PARTLY_UNKNOWN = "I don't know about the rest."

GENERAL_ASK = re.compile(
    r"\b(anything else|any (other|more|additional|further|specific|particular)|more (details?|info\w*)"
    r"|other (details?|requirements?|constraints?|information)|requirements?|specifics?|details?"
    r"|clarif\w*|elaborate|tell me (more|about)|preferences?|constraints?|what else|expectations?)\b",
    re.IGNORECASE,
)


# --------------------------------------------------------------------------------------
# Answering
# --------------------------------------------------------------------------------------


class Answerer:
    def __init__(self, analysis: Analysis):
        self.facts = analysis.facts
        df: dict[str, int] = {}
        for fact in self.facts:
            for term in fact.words | fact.topics:
                df[term] = df.get(term, 0) + 1
        n = max(1, len(self.facts))
        # Rare shared words say more about a match than common ones.
        self.idf = {term: math.log(1 + n / count) for term, count in df.items()}

    def score(self, fact: Fact, terms: set[str]) -> float:
        total = 0.0
        for term in terms:
            if term in fact.subject:
                total += 3.0 * self.idf[term]
            elif term in fact.words:
                total += 2.0 * self.idf[term]
            elif term in fact.topics:
                total += 1.5 * self.idf[term]
        return total

    def best(self, terms: set[str], exclude) -> tuple[float, Fact | None]:
        top, choice = 0.0, None
        for fact in self.facts:
            if fact in exclude:
                continue
            s = self.score(fact, terms)
            if s > 0 and (choice is None or (s + 0.05 * fact.priority, -fact.order)
                          > (top + 0.05 * choice.priority, -choice.order)):
                top, choice = s, fact
        return top, choice

    def covered(self, fact: Fact) -> set[str]:
        return set(fact.words | fact.topics)

    def answer(self, question: str, told: str) -> str:
        # "1. ... 2. ..." list markers are not content (and would match the number 1).
        question = re.sub(r"(^|\s)(\d{1,2}[.)]|[-*•])\s+(?=[A-Za-z])", r"\1", question)
        segments = [s for s in re.split(r"\?|\n+|(?<=[.!])\s+", question) if s.strip()]
        chosen: list[Fact] = []
        unanswered = 0
        general = bool(GENERAL_ASK.search(question))
        for segment in segments:
            terms = text_terms(segment)
            if not terms:
                continue
            top, first = self.best(terms, ())
            if first is None:
                if "?" in question and not GENERAL_ASK.search(segment):
                    unanswered += 1
                continue
            if first not in chosen:
                chosen.append(first)
            # A second fact if it covers what the first left out, or is nearly as good.
            rest = terms - self.covered(first)
            extra_score, extra = self.best(rest, chosen) if rest else (0.0, None)
            if extra is None:
                extra_score, extra = self.best(terms, chosen)
                if extra is not None and extra_score < 0.6 * top:
                    extra = None
            if extra is not None:
                chosen.append(extra)
        chosen = chosen[: MAX_FACTS_PER_REPLY + 2]
        if not chosen and general:
            # A prefix suffices: a long fact may have been cut when it was told.
            untold = [f for f in self.facts if f.text[:60] not in told]
            untold.sort(key=lambda f: (-f.priority, f.order))
            if not untold:
                return NOTHING_MORE
            chosen = untold[:MAX_FACTS_PER_REPLY]
        if not chosen:
            return DONT_KNOW[zlib.crc32(question.encode()) % len(DONT_KNOW)]
        return self.compose(chosen, unanswered)

    @staticmethod
    def compose(facts: list[Fact], unanswered: int) -> str:
        reply = ""
        for fact in facts[:MAX_FACTS_PER_REPLY]:
            candidate = f"{reply} {fact.text}".strip()
            if len(candidate) > REPLY_BUDGET:
                if not reply:  # a single long fact: cut at a word boundary
                    reply = candidate[: REPLY_BUDGET - 3].rsplit(" ", 1)[0] + "..."
                break
            reply = candidate
        if unanswered and len(reply) + len(PARTLY_UNKNOWN) + 1 <= REPLY_BUDGET:
            reply += " " + PARTLY_UNKNOWN
        return reply


class BuiltinSimulator(Simulator):
    """Deterministic rule-based human; a stand-in for CPU runs and CI, not a source of
    paper numbers (see the module docstring for how it answers)."""

    ref = "builtin"
    instant = True  # pure Python, microseconds a reply: the rollout calls it inline

    def __init__(self):
        self._cache: dict[tuple[str, str], Answerer] = {}

    def reply(self, requests: list[SimRequest]) -> list[SimReply]:
        return [self._reply_one(r) for r in requests]

    def _answerer(self, hidden: str, description: str) -> Answerer:
        key = (hidden, description)
        if key not in self._cache:
            if len(self._cache) >= CACHE_SIZE:  # a long run sees thousands of tasks
                self._cache.pop(next(iter(self._cache)))
            try:
                analysis = Analysis(hidden, description)
            except Exception:  # noqa: BLE001 - a reference we cannot read gives "I don't know"s
                analysis = Analysis("", "")
            self._cache[key] = Answerer(analysis)
        return self._cache[key]

    def _reply_one(self, request: SimRequest) -> SimReply:
        start = time.monotonic()
        task = request.task
        if request.medium != "text":
            return SimReply(text=FRONTEND_REPLY, latency_s=time.monotonic() - start)
        try:
            question = next((m["content"] for m in reversed(request.dialogue) if m["role"] == "assistant"), "")
            if lite.is_lite(task):  # backend-lite: only targeted questions get answers (lite.py)
                return SimReply(text=lite.reply(task, str(question)), latency_s=time.monotonic() - start)
            told = " ".join(str(m["content"]) for m in request.dialogue[1:] if m["role"] == "user")
            text = self._answerer(task.hidden, task.problem_description).answer(str(question), told)
        except Exception:  # noqa: BLE001 - never crash a run over one reply
            text = DONT_KNOW[0]
        return SimReply(text=text, latency_s=time.monotonic() - start)
