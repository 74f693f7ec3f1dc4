"""Return values compare as the official grader compares them: Python's `==`, differentially.

The official grader counts a test when `reference_output == answer_output` is true (and the
reference's output is not None; a comparison that raises counts nothing), with both values
in its one interpreter. We grade each in its own sandbox and compare canonical texts
(canonical.py, compare.py). Here a seeded generator makes pairs of nested values of mixed
types (numbers of every kind in the numeric tower, numpy scalars and arrays, ranges,
sequences, sets, mappings and their views, dates and times), each pair often equal under
`==` though written with other types; a reference returns one side and an answer the
other, graded through the sandbox on bwrap and on Docker, and every test's outcome must
be the oracle's: the official rule evaluated on the same values in this process.

The only outcomes allowed to differ are the deliberate differences of docs/grading.md that
the generator can reach (`documented`); each is counted, and they must stay rare.

pandas is not in this process's environment, so its values are checked against Debian's
python3 (the sandbox's own interpreter, with pandas 1.5) evaluating the same rule.

Checked once, offline, against the official `check_correctness` (facebookresearch/sweet_rl)
itself, run from a scratch copy under Debian's python3 (numpy 1.24, pandas 1.5) on these
pairs and 3,000 more (seed 1), and on the 559 pandas pairs: it agreed with `official` below
on every one, 33 and 13 of them ending its evaluation by a comparison that raised something
other than ValueError (which `official` counts as nothing). That copy is not part of this
repository (CC-BY-NC).
"""
from __future__ import annotations

import math
import random
import re
import subprocess
import warnings
from collections import Counter, OrderedDict, defaultdict, deque
from datetime import date, datetime, time, timedelta, timezone
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

from colbench.grading.grader import Grader
from colbench.grading.sandboxes.bwrap import BwrapBackend
from colbench.tasks.spec import TaskSpec

pytestmark = pytest.mark.skipif(BwrapBackend.check() is not None, reason=f"bwrap unusable: {BwrapBackend.check()}")

# Every spelling in a group has the same value under `==`; groups differ from one another
# (0.1 the double against Decimal('0.1'), 2**53 + 1 against float(2**53), ...). numpy
# floats are dyadic, so numpy 1 (the sandbox's) and numpy 2 (this process's) agree on them.
NUMBERS = {
    "zero": ["0", "0.0", "-0.0", "False", "Decimal('0')", "Decimal('-0.00')", "Fraction(0)", "0j", "np.int64(0)",
             "np.float32(0)", "np.bool_(False)", "np.uint8(0)"],
    "one": ["1", "1.0", "True", "Decimal('1.000')", "Fraction(2, 2)", "complex(1, 0)", "np.int64(1)",
            "np.float64(1)", "np.bool_(True)", "np.int8(1)", "np.complex64(1)"],
    "minus_two": ["-2", "-2.0", "Decimal(-2)", "Fraction(-4, 2)", "np.int32(-2)", "np.float16(-2)"],
    "half": ["0.5", "Decimal('0.5')", "Fraction(1, 2)", "np.float32(0.5)", "np.float64(0.5)", "complex(0.5, 0)",
             "np.float16(0.5)"],
    "double_tenth": ["0.1", "np.float64(0.1)", "1 / 10"],
    "tenth": ["Decimal('0.1')", "Fraction(1, 10)", "Decimal('0.10')"],
    "third": ["Fraction(1, 3)", "Fraction(2, 6)"],
    "double_third": ["1 / 3", "np.float64(1 / 3)"],
    "two_53_plus_one": ["2**53 + 1", "Decimal(2**53 + 1)", "Fraction(2**53 + 1)"],
    "two_53": ["2**53", "float(2**53 + 1)", "Decimal(2**53)"],
    "big": ["10**30", "Decimal('1E+30')", "Fraction(10**30)"],
    "big_double": ["1e30", "Decimal(1e30)"],
    "inf": ["float('inf')", "Decimal('Infinity')", "np.float64('inf')", "math.inf"],
    "complex": ["1+2j", "complex(1, 2)", "np.complex64(1+2j)", "np.complex128(1+2j)"],
    "nan": ["float('nan')", "Decimal('NaN')", "math.nan", "np.nan", "np.float64('nan')", "Decimal('sNaN')"],
}
OTHERS = {
    "none": ["None"],
    "a": ["'a'", "np.str_('a')"],
    "one_text": ["'1'"],
    "bytes_a": ["b'a'", "bytearray(b'a')", "np.bytes_(b'a')"],
    "empty_text": ["''"],
    "date": ["date(2020, 1, 2)"],
    "naive": ["datetime(2020, 1, 2, 3, 4, 5)", "datetime(2020, 1, 2, 3, 4, 5, 0)"],
    "naive_later": ["datetime(2020, 1, 2, 3, 4, 5, 250000)"],
    "aware": ["datetime(2020, 1, 2, 3, 4, 5, tzinfo=timezone.utc)",
              "datetime(2020, 1, 2, 5, 4, 5, tzinfo=timezone(timedelta(hours=2)))"],
    "clock": ["time(3, 4, 5)"],
    "aware_clock": ["time(3, 4, tzinfo=timezone.utc)", "time(4, 4, tzinfo=timezone(timedelta(hours=1)))"],
    "day": ["timedelta(days=1)", "timedelta(hours=24)", "timedelta(seconds=86400)"],
    "no_time": ["timedelta(0)", "timedelta()"],
}
RANGES = {
    "three": ["range(3)", "range(0, 3)", "range(0, 3, 1)", "[0, 1, 2]", "(0, 1, 2)", "np.array([0, 1, 2])"],
    "single": ["range(5, 6)", "range(5, 7, 3)", "[5]", "np.array([5])", "np.int64(5)", "5", "np.array([[5.0]])"],
    "empty": ["range(0)", "range(2, 2)", "range(5, 1)", "[]", "np.array([])"],
    "evens": ["range(0, 6, 2)", "range(0, 5, 2)", "[0, 2, 4]"],
}
ATOMS = {**NUMBERS, **OTHERS}
HASHABLE = [name for name in ATOMS if name != "none"]
# What np.array() is given; not a bytearray, which numpy 2 refuses beside other elements.
ARRAY_ELEMENTS = {spelling for name in list(NUMBERS) + ["a", "one_text", "none"] for spelling in ATOMS[name]}
NAMESPACE = {
    "math": math, "np": np, "Decimal": Decimal, "Fraction": Fraction, "OrderedDict": OrderedDict, "Counter": Counter,
    "deque": deque, "defaultdict": defaultdict, "date": date, "datetime": datetime, "time": time,
    "timedelta": timedelta, "timezone": timezone,
}
IMPORTS = """\
    import math
    import numpy as np
    from decimal import Decimal
    from fractions import Fraction
    from collections import OrderedDict, Counter, deque, defaultdict
    from datetime import date, datetime, time, timedelta, timezone
"""


# ------------------------------------------------------------------ values

def skeleton(rng: random.Random, depth: int = 0) -> tuple:
    """The shape of a value: which group each leaf's value comes from, not how it is spelled."""
    roll = rng.random()
    if depth >= 3 or roll < 0.4:
        return ("atom", rng.choice(list(ATOMS)))
    if roll < 0.5:
        return ("range", rng.choice(list(RANGES)))
    if roll < 0.62:  # a one-element sequence: where numpy's arrays and scalars meet lists
        return ("seq", [skeleton(rng, depth + 1)])
    if roll < 0.75:
        return ("seq", [skeleton(rng, depth + 1) for _ in range(rng.randint(0, 3))])
    if roll < 0.9:
        return ("map", [(rng.choice(HASHABLE), skeleton(rng, depth + 1)) for _ in range(rng.randint(0, 3))])
    return ("set", [rng.choice(HASHABLE) for _ in range(rng.randint(0, 3))])


def spell(shape: tuple, rng: random.Random, drift: float, atoms: dict = ATOMS) -> str:
    """An expression of a value of this shape, spelled with random types. With probability
    `drift` a part is changed instead (another group, another container, an element less)."""
    kind = shape[0]
    if rng.random() < drift:
        shape = mutate(shape, rng)
        kind = shape[0]
    if kind == "atom":
        return rng.choice(atoms[shape[1]])
    if kind == "range":
        return rng.choice(RANGES[shape[1]])
    if kind == "seq":
        items = [spell(child, rng, drift, atoms) for child in shape[1]]
        leaves = all(item in ARRAY_ELEMENTS for item in items)
        choices = ["list", "tuple", "deque"] + (["array", "array"] if leaves else [])
        if len(items) == 1 and leaves:
            choices.append("scalar_in_array_2d")
        how = rng.choice(choices)
        if how == "list":
            return "[" + ", ".join(items) + "]"
        if how == "tuple":
            return "(" + "".join(item + ", " for item in items) + ")"
        if how == "deque":
            return "deque([" + ", ".join(items) + "])"
        if how == "array":
            return "np.array([" + ", ".join(items) + "])"
        return "np.array([[" + items[0] + "]])"
    if kind == "map":
        pairs = [(hashable(name, rng, atoms), spell(child, rng, drift, atoms)) for name, child in shape[1]]
        how = rng.choice(["dict", "ordered", "ordered", "counter", "defaultdict", "items"])
        if how == "ordered" and rng.random() < 0.5:
            pairs.reverse()
        body = ", ".join(f"({k}, {v})" for k, v in pairs)
        if how == "dict":
            return "{" + ", ".join(f"{k}: {v}" for k, v in pairs) + "}"
        if how == "ordered":
            return f"OrderedDict([{body}])"
        if how == "counter":
            if rng.random() < 0.5:  # a Counter counts a missing key as 0
                body = ", ".join(f"({k}, {v})" for k, v in pairs + [("'zero'", "0")])
            return f"Counter(dict([{body}]))"
        if how == "defaultdict":
            return f"defaultdict(int, [{body}])"
        return f"dict([{body}]).items()"
    elements = [hashable(name, rng, atoms) for name in shape[1]]
    how = rng.choice(["set", "frozenset", "keys"])
    if how == "set":
        return "{" + ", ".join(elements) + "}" if elements else "set()"
    if how == "frozenset":
        return "frozenset([" + ", ".join(elements) + "])"
    return "dict.fromkeys([" + ", ".join(elements) + "]).keys()"


def hashable(name: str, rng: random.Random, atoms: dict = ATOMS) -> str:
    # A signalling NaN and a bytearray cannot be hashed.
    return rng.choice([spelling for spelling in atoms[name] if "sNaN" not in spelling and "bytearray" not in spelling])


def mutate(shape: tuple, rng: random.Random) -> tuple:
    kind = shape[0]
    if kind == "atom":
        return ("atom", rng.choice(list(ATOMS)))
    if kind in ("seq", "map", "set") and shape[1] and rng.random() < 0.5:
        return (kind, shape[1][:-1])
    if kind == "seq":
        return ("map", [("one", child) for child in shape[1][:1]])
    return ("range", rng.choice(list(RANGES)))


def pairs(seed: int, count: int, atoms: dict = ATOMS) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    found = []
    while len(found) < count:
        shape = skeleton(rng)
        found.append((spell(shape, rng, 0.0, atoms), spell(shape, rng, rng.choice([0.0, 0.0, 0.1]), atoms)))
    return found


# ------------------------------------------------------------------ the oracle

def official(reference, answer) -> bool:
    """The official grader's rule: `reference == answer` is true, the reference is not None;
    a comparison that raises counts nothing."""
    if reference is None:
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numpy's deprecations along the way
        try:
            return bool(reference == answer)
        except Exception:
            return False


def outcome(reference: str, answer: str) -> bool:
    """`official` on the values of two expressions. One that cannot be built (a set holding a
    Decimal and a numpy integer: their comparison raises) is a function that raises, and the
    official grader takes its output as None: nothing counts."""
    try:
        values = eval(reference, dict(NAMESPACE)), eval(answer, dict(NAMESPACE))  # noqa: S307
    except Exception:
        return False
    return official(*values)


def documented(reference: str, answer: str) -> str | None:
    """The deliberate difference (docs/grading.md) a pair can show, if any."""
    both = reference + answer
    if "Decimal(" in both and re.search(r"np\.u?int\d*\(", both):
        # Decimal(5) == np.int64(5) raises, np.int64(5) == Decimal(5) is True; sets and dicts
        # compare their members in either order. We say equal both ways.
        return "a Decimal against a numpy integer"
    if "pd.Timestamp(" in both and "date(" in both:
        # pandas 1.5 lets date's own comparison decide: the day alone (deprecated; pandas 2 says unequal).
        return "a pandas Timestamp against a date"
    return None


def function(expressions: list[str], pandas: bool = False) -> str:
    lines = ["def f(k):", IMPORTS.rstrip("\n")] + (["    import pandas as pd"] if pandas else []) + ["    values = ("]
    lines += [f"        lambda: {expression}," for expression in expressions]
    lines += ["    )", "    return values[k]()", ""]
    return "\n".join(lines)


def tasks_and_answers(pairs_: list[tuple[str, str]], per_task: int, pandas: bool = False) -> list[tuple[TaskSpec, str]]:
    batch = []
    for start in range(0, len(pairs_), per_task):
        chunk = pairs_[start:start + per_task]
        tests = {f"test{k}": f"f({k})" for k in range(len(chunk))}
        task = TaskSpec("backend", f"equality_{start}", function([ref for ref, _ in chunk], pandas), tests)
        batch.append((task, function([ans for _, ans in chunk], pandas)))
    return batch


def graded_outcomes(sandbox: str, pairs_: list[tuple[str, str]], pandas: bool = False) -> list[bool]:
    batch = tasks_and_answers(pairs_, per_task=250, pandas=pandas)
    with Grader(sandbox=sandbox, workers=2, grading="official") as grader:
        reports = grader.grade(batch)
    outcomes = []
    for report in reports:
        assert report.error is None, report.error
        outcomes += [t.passed for t in sorted(report.tests, key=lambda t: int(t.name[4:]))]
    return outcomes


PAIRS = pairs(seed=20261128, count=3000)


def test_generated_pairs_reach_every_rule():
    """The property means little unless many pairs are equal though spelled with other types."""
    truths = [outcome(ref, ans) for ref, ans in PAIRS]
    assert sum(truths) > 300 and len(truths) - sum(truths) > 300
    differently_spelled = sum(truth and ref != ans for truth, (ref, ans) in zip(truths, PAIRS))
    assert differently_spelled > 200
    texts = " ".join(ref + ans for ref, ans in PAIRS)
    for spelling in ("Decimal(", "Fraction(", "np.array(", "np.int64(", "range(", "OrderedDict(", "Counter(",
                     "deque(", ".keys()", ".items()", "timezone(", "math.nan"):
        assert spelling in texts, spelling


def test_sandbox_grading_agrees_with_python_eq(sandbox):
    expected = [outcome(ref, ans) for ref, ans in PAIRS]
    graded = graded_outcomes(sandbox, PAIRS)
    disagreements, allowed = [], []
    for (ref, ans), truth, ours in zip(PAIRS, expected, graded):
        if truth != ours:
            row = f"{ref}  ==  {ans}: official {truth}, ours {ours}"
            (allowed if documented(ref, ans) else disagreements).append(row)
    assert not disagreements, f"{len(disagreements)} disagreements:\n" + "\n".join(disagreements[:20])
    assert len(allowed) < len(PAIRS) // 50, allowed[:5]


# ------------------------------------------------------------------ pandas, against Debian's python3

# pandas 1.5 lets date's comparison decide, by the day alone (deprecated; pandas 2 says unequal):
# a deliberate difference, never equal here.
TIMESTAMP_AND_DATE = ("pd.Timestamp('2020-01-02 03:04')", "date(2020, 1, 2)")
PANDAS_PAIRS = [
    ("pd.Timestamp('2020-01-02 03:04:05')", "datetime(2020, 1, 2, 3, 4, 5)"),
    ("datetime(2020, 1, 2, 3, 4, 5)", "pd.Timestamp('2020-01-02 03:04:05')"),
    ("pd.Timestamp('2020-01-02 03:04:05.000000001')", "datetime(2020, 1, 2, 3, 4, 5)"),
    ("pd.Timestamp('2020-01-02 03:04:05.000000001')", "pd.Timestamp('2020-01-02 03:04:05.000000001')"),
    ("pd.Timestamp('2020-01-02 05:04', tz='Europe/Paris')", "datetime(2020, 1, 2, 4, 4, tzinfo=timezone.utc)"),
    ("pd.Timestamp('2020-01-02 05:04', tz='Europe/Paris')", "pd.Timestamp('2020-01-02 04:04', tz='UTC')"),
    ("pd.Timestamp('2020-01-02 04:04', tz='UTC')", "datetime(2020, 1, 2, 4, 4)"),
    ("pd.Timedelta(days=1)", "timedelta(hours=24)"),
    ("pd.Timedelta(1)", "timedelta(0)"),
    ("[pd.Timedelta(minutes=3)]", "(timedelta(seconds=180),)"),
    ("{pd.Timestamp('2020-01-02'): 1}", "{datetime(2020, 1, 2): 1.0}"),
    ("[pd.NaT]", "[pd.NaT]"),
    ("pd.NaT", "pd.NaT"),
    ("[pd.NA]", "[pd.NA]"),
    ("pd.NA", "pd.NA"),
    ("[pd.NaT]", "[pd.NA]"),
    ("pd.Series([1])", "pd.Series([1])"),
    ("[pd.Series([1])]", "[pd.Series([1])]"),
    ("pd.DataFrame({'a': [1]})", "pd.DataFrame({'a': [1]})"),
    ("pd.Series([1, 2]).sum()", "3"),
    ("pd.Series([1.5]).mean()", "Fraction(3, 2)"),
    ("pd.Series([True]).all()", "1"),
    ("pd.Series([1, 2]).tolist()", "[1, 2]"),
    ("pd.Series([1, 2]).to_numpy()[:1]", "[1.0]"),
    TIMESTAMP_AND_DATE,
]
DEBIAN_ORACLE = """
import sys, warnings
warnings.simplefilter("ignore")
import pandas as pd
{imports}
def official(reference, answer):
    if reference is None:
        return False
    try:
        return bool(reference == answer)
    except Exception:
        return False
def outcome(ref, ans):
    try:
        values = eval(ref), eval(ans)
    except Exception:
        return False
    return official(*values)
for line in sys.stdin.read().splitlines():
    print(int(outcome(*line.split("\\t"))))
"""


# The generator's groups with pandas' spellings added: a Timestamp is a datetime (to the
# nanosecond), a Timedelta a timedelta; NaT and NA are never equal but to themselves in a container.
PANDAS_ATOMS = {name: list(spellings) for name, spellings in ATOMS.items()}
PANDAS_ATOMS["naive"].append("pd.Timestamp('2020-01-02 03:04:05')")
PANDAS_ATOMS["naive_later"] += ["pd.Timestamp('2020-01-02 03:04:05.25')",
                                "pd.Timestamp('2020-01-02 03:04:05.000000001')"]
PANDAS_ATOMS["aware"] += ["pd.Timestamp('2020-01-02 04:04:05', tz='Europe/Paris')",
                          "pd.Timestamp('2020-01-02 03:04:05', tz='UTC')"]
PANDAS_ATOMS["day"].append("pd.Timedelta(days=1)")
PANDAS_ATOMS["no_time"].append("pd.Timedelta(0)")
PANDAS_ATOMS["nan"] += ["pd.NaT", "pd.NA"]
GENERATED_PANDAS_PAIRS = [pair for pair in pairs(seed=7, count=3000, atoms=PANDAS_ATOMS) if "pd." in pair[0] + pair[1]]


def debian_official(pairs_: list[tuple[str, str]]) -> list[bool]:
    """`official` on each pair, evaluated by Debian's python3 (which has pandas)."""
    imports = "\n".join(line.strip() for line in IMPORTS.splitlines())
    done = subprocess.run(["/usr/bin/python3", "-c", DEBIAN_ORACLE.format(imports=imports)], text=True,
                          input="\n".join(f"{ref}\t{ans}" for ref, ans in pairs_), capture_output=True, check=True)
    return [line == "1" for line in done.stdout.split()]


def test_pandas_values_agree_with_python_eq_in_debians_python(sandbox):
    cases = PANDAS_PAIRS + GENERATED_PANDAS_PAIRS
    expected = debian_official(cases)
    assert len(expected) == len(cases) and 100 < sum(expected) < len(expected) - 100
    graded = graded_outcomes(sandbox, cases, pandas=True)
    wrong = [f"{ref} == {ans}: official {truth}, ours {ours}"
             for (ref, ans), truth, ours in zip(cases, expected, graded)
             if truth != ours and not documented(ref, ans)]
    assert not wrong, f"{len(wrong)} disagreements:\n" + "\n".join(wrong[:20])
    # The deliberate difference is real: pandas 1.5 says equal, we do not.
    assert [(truth, ours) for pair, truth, ours in zip(cases, expected, graded) if pair == TIMESTAMP_AND_DATE] == [
        (True, False)]


# ------------------------------------------------------------------ long values travel as a digest

LONG = 20_000  # elements: far past the 64 KiB above which a canonical text travels as its digest


def test_a_long_list_of_numpy_floats_equals_the_references_floats(sandbox):
    """A digest compares by exact text, so the numpy marks are left out of long texts: numpy's
    floats still equal the reference's (and one element off still fails)."""
    task = TaskSpec("backend", "halves", f"def halves(k):\n    return [i / 2 + k for i in range({LONG})]\n",
                    {"test1": "halves(0)", "test2": "halves(1)"})
    numpy_answer = f"def halves(k):\n    import numpy as np\n    return list(np.arange({LONG}) / 2 + k)\n"
    off_by_one = f"def halves(k):\n    import numpy as np\n    return list(np.arange({LONG}) / 2 + (k if k else 1))\n"
    with Grader(sandbox=sandbox, workers=1, grading="official") as grader:
        right, wrong = grader.grade([(task, numpy_answer), (task, off_by_one)])
    assert right.tests[0].expected.startswith("<sha256") and right.tests[0].expected == right.tests[0].actual
    assert right.fraction_passed == 1.0 and wrong.fraction_passed == 0.5
