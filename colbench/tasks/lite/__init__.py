"""Backend-lite: a learnable tier of small personalised backend tasks.

Each task is a short Python function (a body of at most 8 lines) whose description leaves
out 1-3 *hidden* parameters that the person knows: a rate, a threshold, a separator, a
rounding rule... An agent that asks the right questions can then write it; one that guesses
fails tests. The tasks are generated from the templates in templates_<domain>.py
(schema.py says what a template is): each template has INSTANCES instances with different
hidden values and differently worded descriptions, all deterministic.

- ``source`` is ``"lite:<template>"``; the template's name is also the function's name.
- ``hidden_information`` is readable by a model-backed simulated human and parsed back by
  :func:`facts_of`: the :data:`LITE_MARKER` line, then one line per hidden fact::

      Hidden details the person knows (backend-lite):
      - The sales tax rate is 8 percent. [asked as: What sales tax rate should I apply? | keywords: tax, \
vat, rate | name: tax_rate]

- ``naive_solution`` is the reference with each hidden parameter set to its plausible guess.
- ``test_cases`` are 10 calls chosen from the template's candidates (by running the code
  in-process: it is our own) so that the naive solution fails at least NAIVE_FAILS of them,
  the reference with any single hidden parameter guessed fails at least ONE_WRONG_FAILS,
  and the reference with any single hidden parameter set to any other of its values fails
  at least one. Calls whose result would depend on floating-point rounding order (a value
  within rounding noise of an integer under ceil/floor/int, or of a half under round) are
  never used: an equivalent formula written another way must pass.
- Splits: every instance of a template in :data:`NOVEL_TEMPLATES` is ``"novel"``; of the
  other templates, instance i is ``"test"`` when i % TEST_EVERY == TEST_AT (4 of 25),
  ``"val"`` when i % TEST_EVERY == VAL_AT (3 of 25: the tasks every setting is chosen on,
  which neither demonstrations nor training data ever touch), else ``"train"``.
- Instances numbered INSTANCES and on are ``"fresh"``: new value combinations of the trained
  templates that no earlier study read (fresh.py says why and holds their new values); those
  numbered INSTANCES + fresh.PER_TEMPLATE and on are ``"fresh2"``, each holding a value no earlier
  split has (fresh2.py), the fourth study's test set.
"""
from __future__ import annotations

import builtins
import functools
import hashlib
import itertools
import math
import re
import types
from dataclasses import dataclass
from typing import Any

from colbench.tasks.lite.fresh import FRESH_VALUES, PER_TEMPLATE as FRESH_PER_TEMPLATE
from colbench.tasks.lite.fresh2 import FRESH2_VALUES, PER_TEMPLATE as FRESH2_PER_TEMPLATE
from colbench.tasks.lite.schema import Template
from colbench.tasks.lite.templates import BY_NAME, LATER_OPENERS, OPENERS, TEMPLATES
from colbench.tasks.spec import TaskSpec

SOURCE_PREFIX = "lite:"
LITE_MARKER = "Hidden details the person knows (backend-lite):"
NOVEL_TEMPLATES: frozenset[str] = frozenset(template.name for template in TEMPLATES if template.novel)

INSTANCES = 25  # per template
TEST_EVERY, TEST_AT = 7, 3  # non-novel instance i is a test task iff i % 7 == 3 (4 of 25)
VAL_AT = 6  # ... and a validation task iff i % 7 == 6 (3 of 25)
TESTS = 10
NAIVE_FAILS = 4  # the naive solution fails at least this many of the 10 tests
ONE_WRONG_FAILS = 2  # ... and so does the reference with one hidden parameter guessed


@dataclass(frozen=True)
class HiddenFact:
    name: str  # the parameter's short name, e.g. "tax_rate"
    sentence: str  # how the person states it: "The sales tax rate is 8 percent."
    question: str  # a natural question that asks for it: "What sales tax rate should I apply?"
    keywords: tuple[str, ...]  # words a question about it would use: ("tax", "rate", "percent")


@dataclass(frozen=True)
class LiteInstance:
    """A task with what it was made from (for tests and tools; the task itself carries all
    an agent, a simulator or the grader needs)."""

    spec: TaskSpec
    template: Template
    index: int  # the instance's number within its template
    keys: dict[str, Any]  # hidden parameter name -> the value's key (see schema.Param)


# ---------------------------------------------------------------- reading tasks

_FACT_LINE = re.compile(
    r"^- (?P<sentence>.+) \[asked as: (?P<question>.+) \| keywords: (?P<keywords>[^|\]]*) \| name: (?P<name>\w+)\]$"
)


def fact_line(fact: HiddenFact) -> str:
    return f"- {fact.sentence} [asked as: {fact.question} | keywords: {', '.join(fact.keywords)} | name: {fact.name}]"


def hidden_information(facts: list[HiddenFact]) -> str:
    return "\n".join([LITE_MARKER, *(fact_line(fact) for fact in facts)])


def is_lite(task: TaskSpec) -> bool:
    hidden = task.hidden_information
    return isinstance(hidden, str) and hidden.startswith(LITE_MARKER)


@functools.lru_cache(maxsize=4096)
def _parse(hidden: str) -> tuple[HiddenFact, ...]:
    facts = []
    for line in hidden.splitlines()[1:]:
        if not line.strip():
            continue
        match = _FACT_LINE.match(line.strip())
        if match is None:
            raise ValueError(f"not a backend-lite fact line: {line!r}")
        keywords = tuple(word.strip() for word in match["keywords"].split(",") if word.strip())
        facts.append(HiddenFact(match["name"], match["sentence"], match["question"], keywords))
    return tuple(facts)


def facts_of(task: TaskSpec) -> list[HiddenFact]:
    """The hidden facts of a lite task, read back from its hidden_information ([] for another task)."""
    if not is_lite(task):
        return []
    return list(_parse(task.hidden_information))


_SIGNATURE_NAME = re.compile(r"The signature of the function is:?\s*`*(?:python)?\s*def\s+([A-Za-z_]\w*)")


def template_of(task: TaskSpec) -> str:
    """The template a lite task was made from: from its source, else (a task imported back
    from the official format loses its source) from its function's name, which is the template's."""
    if task.source.startswith(SOURCE_PREFIX):
        return task.source[len(SOURCE_PREFIX):]
    match = _SIGNATURE_NAME.search(task.problem_description or "")
    if is_lite(task) and match and match.group(1) in BY_NAME:
        return match.group(1)
    raise ValueError(f"not a backend-lite task (source {task.source!r})")


# ---------------------------------------------------------------- running our own template code


class _Probe:
    """Notes when a float sits on a rounding edge: a value within noise of an integer given to
    ceil/floor/int, or of a half given to round. Another, equivalent formula could land on
    the other side of the edge, so a test call that does this is not used."""

    def __init__(self):
        self.edgy = False

    def near_integer(self, x) -> None:
        if type(x) is float and math.isfinite(x) and abs(x - builtins.round(x)) <= 1e-9 * max(1.0, abs(x)):
            self.edgy = True

    def near_half(self, x, ndigits) -> None:
        if type(x) is float and math.isfinite(x):
            scaled = x * 10 ** (ndigits or 0)
            if abs(scaled - math.floor(scaled) - 0.5) <= 1e-6:
                self.edgy = True


_PROBE = _Probe()


def _probing_builtins() -> dict:
    def probed_round(x, ndigits=None):
        _PROBE.near_half(x, ndigits)
        return builtins.round(x, ndigits)

    def probed_int(*args, **kwargs):
        if args:
            _PROBE.near_integer(args[0])
        return builtins.int(*args, **kwargs)

    def probed(function):
        def call(x):
            _PROBE.near_integer(x)
            return function(x)

        return call

    fake_math = types.ModuleType("math")
    fake_math.__dict__.update({k: v for k, v in vars(math).items() if not k.startswith("__")})
    fake_math.ceil, fake_math.floor, fake_math.trunc = probed(math.ceil), probed(math.floor), probed(math.trunc)

    def probed_import(name, *args, **kwargs):
        if name == "math":
            return fake_math
        raise ImportError(f"template code may import math only, not {name}")

    table = dict(vars(builtins))
    table.update(round=probed_round, int=probed_int, __import__=probed_import)
    return table


_BUILTINS = _probing_builtins()
_ERROR = object()


def _plain_float(value) -> bool:
    """No float in the value carries arithmetic noise (a result should be rounded, or exact)."""
    if type(value) is float:
        return math.isfinite(value) and value == builtins.round(value, 9)
    if isinstance(value, (list, tuple)):
        return all(_plain_float(item) for item in value)
    if isinstance(value, dict):
        return all(_plain_float(item) for item in value.values())
    return True


class _Runner:
    """Outputs of template code on a template's candidate calls, cached by code."""

    def __init__(self, template: Template):
        self.template = template
        self.cache: dict[str, list] = {}
        self.edgy: dict[str, list[bool]] = {}

    def outputs(self, code: str) -> list:
        if code not in self.cache:
            namespace: dict = {"__builtins__": _BUILTINS}
            exec(compile(code, f"<lite:{self.template.name}>", "exec"), namespace)  # noqa: S102 - our own templates
            function = namespace[self.template.name]
            results, edges = [], []
            for args in self.template.calls:
                _PROBE.edgy = False
                try:
                    value = eval(f"__f({args})", {"__builtins__": _BUILTINS, "__f": function})  # noqa: S307
                except Exception:  # noqa: BLE001 - a variant may raise where the reference does not
                    value = _ERROR
                results.append(value)
                edges.append(_PROBE.edgy)
            self.cache[code], self.edgy[code] = results, edges
        return self.cache[code]


def _differs(a, b) -> bool:
    if a is _ERROR or b is _ERROR:
        return True
    try:
        return not bool(a == b)
    except Exception:  # noqa: BLE001
        return True


def _choose_tests(template: Template, runner: _Runner, keys: dict, where: str, values: dict | None = None) -> list[str]:
    """Ten candidate calls that make every hidden parameter matter (module docstring) among ``values`` (each
    parameter's name -> its values; default: the template's)."""
    reference = template.render(keys)
    expected = runner.outputs(reference)
    edgy = runner.edgy[reference]
    usable = [
        i for i, value in enumerate(expected)
        if value is not _ERROR and value is not None and not edgy[i] and _plain_float(value)
    ]
    guesses = {p.name: p.guess for p in template.hidden}
    needs: dict[tuple, int] = {("naive",): NAIVE_FAILS}
    variants: dict[tuple, str] = {("naive",): template.render(guesses)}
    for param in template.hidden:
        needs[("guess", param.name)] = ONE_WRONG_FAILS
        variants[("guess", param.name)] = template.render({**keys, param.name: param.guess})
        for other in (values or {}).get(param.name, param.values):
            if other != keys[param.name]:
                needs[("other", param.name, other)] = 1
                variants[("other", param.name, other)] = template.render({**keys, param.name: other})
    covers = {i: set() for i in usable}
    for need, code in variants.items():
        outputs = runner.outputs(code)
        for i in usable:
            if _differs(outputs[i], expected[i]):
                covers[i].add(need)
    chosen: list[int] = []
    left = dict(needs)
    while any(left.values()) and len(chosen) < TESTS:
        best = max(
            (i for i in usable if i not in chosen),
            key=lambda i: (sum(1 for n in covers[i] if left[n] > 0), -i),
            default=None
        )
        if best is None or not any(left[n] > 0 for n in covers[best]):
            break
        chosen.append(best)
        for need in covers[best]:
            left[need] = max(0, left[need] - 1)
    unmet = [need for need, count in left.items() if count > 0]
    if unmet:
        raise RuntimeError(
            f"backend-lite {where}: no {TESTS} tests make every hidden parameter matter; unmet: {unmet[:4]}"
        )
    for i in usable:
        if len(chosen) >= TESTS:
            break
        if i not in chosen:
            chosen.append(i)
    if len(chosen) < TESTS:
        raise RuntimeError(f"backend-lite {where}: only {len(chosen)} usable test calls")
    return [f"{template.name}({template.calls[i]})" for i in sorted(chosen)]


# ---------------------------------------------------------------- building the tier


def _split(template: Template, index: int) -> str:
    if index >= INSTANCES:
        return "fresh" if index < INSTANCES + FRESH_PER_TEMPLATE else "fresh2"
    if template.novel:
        return "novel"
    return {TEST_AT: "test", VAL_AT: "val"}.get(index % TEST_EVERY, "train")


def _description(template: Template, position: int, index: int) -> str:
    requests = template.requests
    request = requests[index % len(requests)]
    first = len(OPENERS) * len(requests)  # the instances OPENERS words distinctly; later ones get LATER_OPENERS
    openers, turn = (OPENERS, index) if index < first else (LATER_OPENERS, index - first)
    opener = openers[(turn // len(requests) + position) % len(openers)]
    return f"{opener} {request} The signature of the function is: def {template.signature}"


def _facts(template: Template, keys: dict) -> list[HiddenFact]:
    return [HiddenFact(p.name, p.sentence_of(keys[p.name]), p.question, tuple(p.keywords)) for p in template.hidden]


def _instances_of(template: Template, position: int) -> list[LiteInstance]:
    combos = _hash_order(template, itertools.product(*(param.values for param in template.hidden)))
    if len(combos) < INSTANCES:
        raise RuntimeError(f"backend-lite template {template.name}: {len(combos)} value combinations, need {INSTANCES}")
    runner = _Runner(template)
    naive = template.render({p.name: p.guess for p in template.hidden})
    made = []
    for index, combo in enumerate(combos[:INSTANCES]):
        keys = dict(zip((p.name for p in template.hidden), combo))
        tests = _choose_tests(template, runner, keys, f"{template.name} #{index}")
        made.append(LiteInstance(_spec(template, position, index, keys, tests, naive), template, index, keys))
    return made


def _spec(template: Template, position: int, index: int, keys: dict, tests: list[str], naive: str) -> TaskSpec:
    return TaskSpec(
        family="backend",
        split=_split(template, index),
        source=SOURCE_PREFIX + template.name,
        problem_description=_description(template, position, index),
        ground_truth=template.render(keys),
        test_cases={f"test{n}": call for n, call in enumerate(tests, start=1)},
        hidden_information=hidden_information(_facts(template, keys)),
        naive_solution=naive,
    )


def _hash_order(template: Template, combos) -> list[tuple]:
    # A fixed pseudo-random order of value combinations (sha256: the same on every Python).
    def key(combo) -> str:
        return hashlib.sha256(f"colbench-lite:{template.name}:{combo!r}".encode()).hexdigest()

    return sorted(combos, key=key)


def _fresh_instances_of(template: Template, position: int) -> list[LiteInstance]:
    """Up to fresh.PER_TEMPLATE instances numbered from INSTANCES on, on value combinations no other instance has
    (fresh.py), in the same fixed order; a combination whose tests cannot make every value matter is passed over."""
    if template.novel or template.name not in FRESH_VALUES:
        return []
    extra = FRESH_VALUES[template.name]
    values = {p.name: tuple(p.values) + tuple(extra.get(p.name, ())) for p in template.hidden}
    used = set(_hash_order(template, itertools.product(*(p.values for p in template.hidden)))[:INSTANCES])
    combos = [c for c in _hash_order(template, itertools.product(*values.values())) if c not in used]
    return _instances_on(template, position, combos, values, INSTANCES, FRESH_PER_TEMPLATE, "fresh")


def _fresh2_instances_of(template: Template, position: int) -> list[LiteInstance]:
    """Up to fresh2.PER_TEMPLATE instances numbered from INSTANCES + fresh.PER_TEMPLATE on, each on a combination
    that holds a value of fresh2.py's table (so no earlier instance has it), in the same fixed order."""
    if template.novel or template.name not in FRESH2_VALUES:
        return []
    new = FRESH2_VALUES[template.name]
    earlier = FRESH_VALUES.get(template.name, {})
    values = {p.name: tuple(p.values) + tuple(earlier.get(p.name, ())) + tuple(new.get(p.name, ()))
              for p in template.hidden}
    combos = [c for c in _hash_order(template, itertools.product(*values.values()))
              if any(v in new.get(name, ()) for name, v in zip(values, c))]
    return _instances_on(template, position, combos, values, INSTANCES + FRESH_PER_TEMPLATE, FRESH2_PER_TEMPLATE,
                         "fresh2")


def _instances_on(template: Template, position: int, combos: list[tuple], values: dict, first: int, most: int,
                  split: str) -> list[LiteInstance]:
    """Up to ``most`` instances numbered from ``first`` on, on ``combos`` in order (of ``values``' parameters); a
    combination whose tests cannot make every value of ``values`` matter is passed over."""
    runner = _Runner(template)
    naive = template.render({p.name: p.guess for p in template.hidden})
    made = []
    for combo in combos:
        if len(made) == most:
            break
        keys = dict(zip(values, combo))
        try:
            tests = _choose_tests(template, runner, keys, f"{template.name} {split}", values)
        except RuntimeError:
            continue
        made.append(LiteInstance(_spec(template, position, first + len(made), keys, tests, naive), template,
                                 first + len(made), keys))
    return made


@functools.cache
def lite_instances() -> tuple[LiteInstance, ...]:
    """Every lite task with the template and hidden values it was made from, in a fixed order: each template's
    INSTANCES, then its fresh ones (numbered on from INSTANCES), then its fresh2 ones."""
    return tuple(
        item
        for position, template in enumerate(TEMPLATES)
        for item in (_instances_of(template, position) + _fresh_instances_of(template, position)
                     + _fresh2_instances_of(template, position))
    )


@functools.cache
def lite_tasks() -> list[TaskSpec]:
    """Every backend-lite task (deterministic; the same list on every call: do not modify it)."""
    return [item.spec for item in lite_instances()]


__all__ = [
    "SOURCE_PREFIX", "LITE_MARKER", "NOVEL_TEMPLATES", "HiddenFact", "LiteInstance", "lite_tasks", "lite_instances",
    "facts_of", "is_lite", "template_of", "TEMPLATES",
]
