"""What a backend-lite template is made of (the templates themselves are in templates_*.py).

A template is one short personalised function with 1-3 hidden parameters. The reference
code has a placeholder ``<name>`` for each hidden parameter; an instance of the template
fills every placeholder with one of the parameter's true values, and the naive solution
fills it with the parameter's *guess*: the plausible value someone would pick from the
description alone, never one of the true values.

Values are keys: by default a key is put in the code as ``repr(key)`` and in the
person's sentence as ``str(key)``; ``code`` and ``say`` map keys to a code fragment and to
a phrase when that is not right (a rounding rule, a formula, a separator).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

DOMAINS = (
    "money", "work", "shopping", "health", "travel", "text", "time", "sports", "school", "cooking",
    "energy", "games", "home",
)


@dataclass(frozen=True)
class Param:
    name: str
    values: tuple  # the true values an instance may have
    guess: Any  # the naive solution's value; not one of `values`
    sentence: str  # how the person states it, "{v}" standing for the value's phrase
    question: str  # a natural question that asks for it
    keywords: tuple[str, ...]  # single lower-case words (base forms) a question about it would use
    code: Mapping[Any, str] | None = None  # key -> code fragment (default: repr(key))
    say: Mapping[Any, str] | None = None  # key -> phrase in the sentence (default: str(key))

    def code_of(self, key) -> str:
        if self.code is not None:
            return self.code[key]
        return repr(key)

    def phrase_of(self, key) -> str:
        if self.say is not None:
            return self.say[key]
        return str(key)

    def sentence_of(self, key) -> str:
        return self.sentence.replace("{v}", self.phrase_of(key))


@dataclass(frozen=True)
class Template:
    name: str  # also the function's name
    domain: str
    params: str  # the function's parameters, as in its signature: "price, quantity"
    requests: tuple[str, ...]  # first-person requests (one or two sentences), no hidden value in them
    hidden: tuple[Param, ...]
    code: str  # the reference, "<name>" for each hidden parameter
    calls: tuple[str, ...]  # candidate argument lists for the tests: "19.99, 3"
    novel: bool = False  # every instance in the "novel" split

    @property
    def signature(self) -> str:
        return f"{self.name}({self.params})"

    def render(self, keys: Mapping[str, Any]) -> str:
        """The code with each hidden parameter set to keys[name]."""
        code = self.code
        for param in self.hidden:
            code = code.replace(f"<{param.name}>", param.code_of(keys[param.name]))
        return code


# ---------------------------------------------------------------- shared parameter kinds

ROUNDING_SAY = {
    "whole": "to the nearest whole number",
    "tenth": "to one decimal place",
    "cent": "to two decimal places",
}
ROUNDING_WORDS = ("round", "decimal", "precision", "precise", "digit", "place")


def rounding(var: str, subject: str, values=("whole", "tenth"), guess="cent") -> Param:
    """How `var` is rounded before it is returned: round(var), round(var, 1), round(var, 2)."""
    code = {"whole": f"round({var})", "tenth": f"round({var}, 1)", "cent": f"round({var}, 2)"}
    return Param(
        "rounding", tuple(values), guess,
        f"I round {subject} {{v}}.", f"How should I round {subject}?", ROUNDING_WORDS,
        code=code, say=ROUNDING_SAY,
    )


def quoted(text: str) -> str:
    """A literal string as the person says it: in double quotes."""
    return f'"{text}"'
