"""Differential grading cases: one answer, two gradings, rewards derived by hand.

Every case is an answer text graded against a small reference task, with the reward
(fraction of tests passed) it must get under each grading:

- ``official``: derived by hand from the official ColBench grader's semantics
  (``check_correctness`` in facebookresearch/sweet_rl ``sweet_rl/utils/code_utils.py``):
  the text blacklist, its fence rule (first ```` ```python ```` block, else first
  ```` ``` ```` block, else the raw text), ``exec`` with locals apart from globals (names
  defined at the answer's top level are invisible inside its functions; the reference
  runs the same way), the module globals that persist from one test to the next, one
  process (one hash seed) for reference and answer, numpy and pandas importable, the
  default int-to-str digit limit, ``==`` on outputs, a reference output of None failing
  the test, an exception or a 1 s timeout of the answer giving None (the reference has
  no time limit).
- ``strict``: fences stripped wherever they open a line (every block joined), no
  blacklist, the code run as a fresh module for each test.

The ``official`` values were cross-checked offline against the official grader itself
(its ``check_correctness`` run in-process on every case); that check and the official
code (CC-BY-NC) are not part of this repository. Where the official grader's outcome
differs from ours, the official outcome is kept as the expected value and the case is
marked ``xfail(strict=True)`` with the reason, so the discrepancy stays visible. Three cases
differ on purpose and expect our outcome in both modes: an answer-made object, and an
answer-made subclass of int, whose ``__eq__`` always says True (officially 1.0: the official
grader asks it; we never do), and an answer raising SystemExit or KeyboardInterrupt (officially no reward at all: it
escapes ``except Exception`` and ends the whole evaluation; we fail that test alone).

All cases of a grading are graded in one batch by one Grader, on each sandbox (bwrap
and Docker, see plugins/sandboxes.py).
"""
from __future__ import annotations

import subprocess
import textwrap
from dataclasses import dataclass

import pytest

from colbench.grading.grader import Grader
from colbench.grading.sandboxes.base import HASH_SEED
from colbench.grading.sandboxes.bwrap import BwrapBackend
from colbench.tasks.spec import TaskSpec

pytestmark = pytest.mark.skipif(BwrapBackend.check() is not None, reason=f"bwrap unusable: {BwrapBackend.check()}")

MODES = ("official", "strict")


def backend_task(name: str, reference: str, calls: list[str]) -> TaskSpec:
    tests = {f"test{i}": call for i, call in enumerate(calls, 1)}
    return TaskSpec("backend", name, textwrap.dedent(reference).strip() + "\n", tests)


@dataclass(frozen=True)
class Case:
    name: str
    task: TaskSpec
    answer: str
    official: float
    strict: float
    xfail_official: str | None = None  # our implementation disagrees with the official grader here

    def expected(self, mode: str) -> float:
        return self.official if mode == "official" else self.strict


# ------------------------------------------------------------------ tasks

# double(1), double(2), double(5), double(-3): 4 tests, so rewards move in quarters.
DOUBLE = backend_task("double", "def double(x):\n    return x * 2",
                      ["double(1)", "double(2)", "double(5)", "double(-3)"])
OK = "def double(x):\n    return x * 2"  # the correct answer, bare

# Iterative, so the reference itself works under the official scoping.
FACT = backend_task(
    "fact",
    """
    def fact(n):
        result = 1
        for i in range(2, n + 1):
            result *= i
        return result
    """,
    ["fact(0)", "fact(1)", "fact(4)", "fact(6)"],
)

CASES: list[Case] = []


def case(name, task, answer, official, strict, xfail_official=None):
    CASES.append(Case(name, task, answer, official, strict, xfail_official))


# ------------------------------------------------------------------ scoping

# fact(0) and fact(1) return before the recursive call; fact(4), fact(6) hit the
# NameError of the function's own name, invisible inside itself officially.
case("recursion", FACT, "def fact(n):\n    return 1 if n <= 1 else n * fact(n - 1)", 0.5, 1.0)
case("top_level_helper", DOUBLE, "def _times(a, b):\n    return a * b\n\ndef double(x):\n    return _times(x, 2)", 0.0,
     1.0)
case("top_level_import_used_inside", FACT, "import math\n\ndef fact(n):\n    return math.factorial(n)", 0.0, 1.0)
case("import_inside_body", FACT, "def fact(n):\n    import math\n    return math.factorial(n)", 1.0, 1.0)
case("top_level_constant", DOUBLE, "FACTOR = 2\n\ndef double(x):\n    return x * FACTOR", 0.0, 1.0)
# The test call is evaluated with the answer's locals, so a top-level lambda is callable.
case("lambda_is_the_function", DOUBLE, "double = lambda x: x + x", 1.0, 1.0)
case("top_level_lambda_used_inside", DOUBLE, "twice = lambda v: 2 * v\n\ndef double(x):\n    return twice(x)", 0.0, 1.0)
case(
    "top_level_class_used_inside",
    DOUBLE,
    "class Doubler:\n    def run(self, x):\n        return 2 * x\n\ndef double(x):\n    return Doubler().run(x)",
    0.0,
    1.0,
)
# Defaults are evaluated at def time, in the answer's own namespace: that works officially.
case("default_arg_from_top_level", DOUBLE, "FACTOR = 2\n\ndef double(x, factor=FACTOR):\n    return x * factor", 1.0,
     1.0)
case("nested_helper", DOUBLE, "def double(x):\n    def helper(v):\n        return v + v\n    return helper(x)", 1.0,
     1.0)
# A nested function recursing on itself is a closure over the outer function's local.
case(
    "nested_recursion",
    FACT,
    "def fact(n):\n    def go(k):\n        return 1 if k <= 1 else k * go(k - 1)\n    return go(n)",
    1.0,
    1.0,
)
# A generator expression is its own scope: BASE inside it is looked up as a global, so
# officially the answer's code itself raises NameError before any test call.
case(
    "top_level_genexp_uses_top_level_name",
    DOUBLE,
    "BASE = 2\nPOWERS = tuple(BASE ** k for k in range(4))\n\ndef double(x):\n    return x * 2",
    0.0,
    1.0,
)
# The reference runs under the same scoping: a reference with a top-level helper fails
# every test officially, whatever the answer.
SQUARE = backend_task(
    "square", "def _sq(v):\n    return v * v\n\ndef square(x):\n    return _sq(x)", ["square(3)", "square(-2)"]
)
case("reference_with_top_level_helper", SQUARE, "def square(x):\n    return x * x", 0.0, 1.0)

# ------------------------------------------------------------------ fences

case("python_fence_with_prose", DOUBLE, f"Here is the function:\n```python\n{OK}\n```\nIt doubles x.", 1.0, 1.0)
case("bare_fence", DOUBLE, f"Sure.\n```\n{OK}\n```", 1.0, 1.0)
# Officially "```py" is no "```python": the bare-fence rule keeps "py" as the first line
# of code, a NameError when the code runs.
case("py_fence", DOUBLE, f"```py\n{OK}\n```", 0.0, 1.0)
# Officially any "```python" counts; strictly a fence must open a line (or follow white
# space), so the whole text is code: a SyntaxError.
case("glued_fence", DOUBLE, f"Here:```python\n{OK}\n```", 1.0, 0.0)
case("function_block_then_example_block", DOUBLE,
     f"```python\n{OK}\n```\nFor example:\n```python\nprint(double(3))  # 6\n```", 1.0, 1.0)
# Officially only the example is graded; strictly the example runs before the definition.
case("example_block_then_function_block", DOUBLE, f"```python\nprint(double(3))\n```\nwith\n```python\n{OK}\n```", 0.0,
     0.0)
# Officially only the first block (the helper) is code; strictly both are joined.
case(
    "two_python_blocks",
    DOUBLE,
    "```python\ndef _twice(v):\n    return v + v\n```\nand then\n```python\ndef double(x):\n    return _twice(x)\n```",
    0.0,
    1.0,
)
case("unclosed_fence", DOUBLE, f"```python\n{OK}", 1.0, 1.0)
case("no_fence", DOUBLE, OK, 1.0, 1.0)
case("leading_space_no_fence", DOUBLE, " " + OK, 0.0, 1.0)
# Officially the block's text is kept as is ("\n def ..."): unexpected indent. Strictly stripped.
case("leading_space_inside_fence", DOUBLE, "```python\n def double(x):\n    return x * 2\n```", 0.0, 1.0)
case("leading_newline", DOUBLE, "\n" + OK, 1.0, 1.0)
# Officially the block ends at the first "```", inside the string: unterminated string.
# Strictly a closing fence must start a line.
case("backticks_inside_code", DOUBLE, "```python\ndef double(x):\n    fence = '```'\n    return x * 2\n```", 0.0, 1.0)
case("prose_only", DOUBLE, "You should double the number.", 0.0, 0.0)
case("syntax_error", DOUBLE, "def double(x)\n    return x * 2", 0.0, 0.0)

# ------------------------------------------------------------------ blacklist

case("bl_import_os_unused", DOUBLE, f"import os\n\n{OK}", 0.0, 1.0)
case("bl_from_os_in_comment", DOUBLE, f"# adapted from oscar's notes\n{OK}", 0.0, 1.0)
case("bl_import_sys_in_body", DOUBLE, "def double(x):\n    import sys\n    return x * 2", 0.0, 1.0)
case("bl_from_sys", DOUBLE, f"from sys import maxsize\n\n{OK}", 0.0, 1.0)
case("bl_sudo_in_prose_outside_fence", DOUBLE, f"No sudo needed:\n```python\n{OK}\n```", 0.0, 1.0)
case("bl_transformers_in_docstring", DOUBLE,
     'def double(x):\n    """Doubles x; no transformers involved."""\n    return x * 2', 0.0, 1.0)
# "sys.exit(" is caught by "exit(" (and "__import__('sys')" contains no "import sys").
case(
    "bl_sys_exit_unreachable",
    DOUBLE,
    "def double(x):\n    if x is None:\n        sys = __import__('sys')\n        sys.exit(1)\n    return x * 2",
    0.0,
    1.0,
)
case(
    "bl_exit_in_identifier",
    DOUBLE,
    "def double(x):\n    def should_exit(v):\n        return v is None\n    return 0 if should_exit(x) else x * 2",
    0.0,
    1.0,
)
case("bl_quit_in_identifier", DOUBLE, "def double(x):\n    def acquit(v):\n        return v * 2\n    return acquit(x)",
     0.0, 1.0)
case("bl_argparse_in_comment", DOUBLE, "def double(x):\n    # argparse is overkill here\n    return x * 2", 0.0, 1.0)
case("bl_import_system_substring", DOUBLE,
     'def double(x):\n    """Does not import system modules."""\n    return x * 2', 0.0, 1.0)
case("bl_and_wrong", DOUBLE, "import os\n\ndef double(x):\n    return x + 2", 0.0, 0.25)
# The blacklist is case-sensitive, and "print(" / "write" (blocked only by a helper the
# official grader never calls) are not in it.
case("not_bl_capitalised_import_os", DOUBLE, f"# Import OS modules? No need.\n{OK}", 1.0, 1.0)
case("not_bl_print_and_write", DOUBLE, "def double(x):\n    rewrite = x * 2\n    print(rewrite)\n    return rewrite",
     1.0, 1.0)

# ------------------------------------------------------------------ equality

HALF = backend_task("half", "def half(n):\n    return n / 2", ["half(4)", "half(3)"])
case("int_vs_float", HALF, "def half(n):\n    return n // 2", 0.5, 0.5)  # 2 == 2.0; 1 != 1.5

COUNT = backend_task(
    "count_true",
    "def count_true(xs):\n    return sum(1 for x in xs if x)",
    ["count_true([1, 0])", "count_true([0, 0])", "count_true([1, 1])", "count_true([])"],
)
case("bool_vs_int", COUNT, "def count_true(xs):\n    return any(xs)", 0.75, 0.75)  # True == 1, False == 0, True != 2

NEG = backend_task("neg", "def neg(x):\n    return -x", ["neg(0.0)", "neg(2.5)"])
case("negative_zero", NEG, "def neg(x):\n    return 0.0 - x", 1.0, 1.0)  # 0.0 == -0.0

RATIO = backend_task("ratio", "def ratio(a, b):\n    return a / b if b else float('nan')",
                     ["ratio(1, 2)", "ratio(1, 0)"])
case("nan_never_equal", RATIO, "def ratio(a, b):\n    return a / b if b else float('nan')", 0.5, 0.5)

NANS = backend_task("nans", "def nans(n):\n    return [float('nan')] * n", ["nans(1)", "nans(0)"])
# Two fresh NaNs inside lists: list == list compares them with ==, False.
case("nan_in_list", NANS, "def nans(n):\n    return [float('nan')] * n", 0.5, 0.5)

MATH_NANS = backend_task("math_nans", "def nans(n):\n    import math\n    return [math.nan] * n",
                         ["nans(1)", "nans(0)"])
# Officially the reference and the answer run in one process, so both lists hold the
# same math.nan object, and list == list takes identity as equality: [nan] == [nan] is
# True. Our grader compares canonical texts, NaN never equal anywhere.
case(
    "math_nan_in_list",
    MATH_NANS,
    "def nans(n):\n    import math\n    return [math.nan] * n",
    1.0,  # both lists hold the one math.nan object, and list == compares items by identity first
    1.0,
)

TOTAL = backend_task("total", "def total(a, b):\n    return a + b", ["total(0.1, 0.2)", "total(1, 2)"])
case("float_rounding", TOTAL, "def total(a, b):\n    return round(a + b, 2)", 0.5, 0.5)  # 0.3 != 0.30000000000000004

COUNTS = backend_task(
    "counts",
    """
    def counts(s):
        d = {}
        for c in s:
            d[c] = d.get(c, 0) + 1
        return d
    """,
    ["counts('abca')", "counts('')"],
)
case("dict_order_ignored", COUNTS, "def counts(s):\n    return {c: s.count(c) for c in sorted(set(s), reverse=True)}",
     1.0, 1.0)

PAIR = backend_task("pair", "def pair(x):\n    return (x, x + 1)", ["pair(1)", "pair(5)"])
case("tuple_vs_list", PAIR, "def pair(x):\n    return [x, x + 1]", 0.0, 0.0)

UNIQ = backend_task("uniq", "def uniq(xs):\n    return set(xs)", ["uniq([1, 2, 2])", "uniq([])"])
case("set_vs_frozenset", UNIQ, "def uniq(xs):\n    return frozenset(xs)", 1.0, 1.0)

GROUP = backend_task(
    "group",
    """
    def group(xs):
        out = {}
        for x in xs:
            out.setdefault(x % 2, []).append((x, float(x)))
        return out
    """,
    ["group([1, 2, 3])", "group([])"],
)
# Keys in another order, ints for the floats: equal.
case(
    "nested_equal",
    GROUP,
    "def group(xs):\n    return {p: [(x, x) for x in xs if x % 2 == p] for p in (1, 0) if any(x % 2 == p for x in xs)}",
    1.0,
    1.0,
)
# Lists where tuples are expected, deep inside: only the empty case passes.
case(
    "nested_tuple_vs_list",
    GROUP,
    "def group(xs):\n    return {p: [[x, x] for x in xs if x % 2 == p] for p in (1, 0) if any(x % 2 == p for x in xs)}",
    0.5,
    0.5,
)

KIND = backend_task("kind", "def kind(x):\n    return type(x)", ["kind(1)", "kind('a')"])
# Officially int == int and str == str: both pass. Our canonical text makes every
# non-builtin-value object (a type included) opaque, never equal.
case(
    "builtin_type_returned",
    KIND,
    "def kind(x):\n    return x.__class__",
    1.0,  # a builtin type exists once per interpreter: int == int
    1.0,
)

# Deliberate difference: the official grader calls the answer's __eq__ (ref == obj falls
# back to obj.__eq__, True) and scores 1.0; we never ask answer-made objects, so 0 in both.
case(
    "answer_class_eq_always_true",
    DOUBLE,
    (
        "def double(x):\n    class Anything:\n        def __eq__(self, other):\n            return True\n    return"
        " Anything()"
    ),
    0.0,
    0.0,
)

# ------------------------------------------------------------------ None, partial credit, errors, timeout

FIND = backend_task(
    "find",
    """
    def find(xs, t):
        for i, x in enumerate(xs):
            if x == t:
                return i
        return None
    """,
    ["find([5, 6], 6)", "find([5, 6], 7)", "find([], 1)", "find([7], 7)"],
)
case("reference_none_answer_none", FIND, textwrap.dedent(FIND.ground_truth), 0.5, 0.5)
case("reference_none_answer_minus_one", FIND, "def find(xs, t):\n    return xs.index(t) if t in xs else -1", 0.5, 0.5)

LOG = backend_task("log", "def log(x):\n    pass", ["log(1)", "log(2)"])
case("reference_always_none", LOG, "def log(x):\n    return None", 0.0, 0.0)

case("partial_credit", DOUBLE, "def double(x):\n    return x * 2 if x > 0 else x", 0.75, 0.75)
case("exceptions_on_odd", DOUBLE, "def double(x):\n    if x % 2:\n        raise ValueError(x)\n    return x * 2", 0.25,
     0.25)

INV = backend_task("inv", "def inv(x):\n    return 1 / x", ["inv(0)", "inv(2)"])
case("reference_raises", INV, "def inv(x):\n    return 1 / x if x else 0", 0.5, 0.5)

case("timeout_on_one_test", DOUBLE, "def double(x):\n    while x == 5:\n        pass\n    return x * 2", 0.75, 0.75)

# Deliberate difference: SystemExit and KeyboardInterrupt are no Exception, so the official
# grader's `except Exception` lets them out of check_correctness and its whole evaluation
# ends there (no reward at all; "exit(" is blacklisted, `raise SystemExit` is not). We fail
# the test that raised and grade the rest: 2 of 4 here, in both modes.
case(
    "answer_raises_system_exit_and_keyboard_interrupt",
    DOUBLE,
    (
        "def double(x):\n    if x == 2:\n        raise SystemExit(0)\n    if x == 5:\n        raise"
        " KeyboardInterrupt\n    return x * 2"
    ),
    0.5,
    0.5,
)

# ------------------------------------------------------------------ one process, officially

# One hash seed: the official grader runs reference and answer in one process, so equal
# code iterates a set of strings in one order. Every one of our sandboxes starts under one
# fixed PYTHONHASHSEED; with a seed per interpreter this scored 0.0-0.4, varying by run.
SET_WORDS = ["pear apple fig kiwi lime plum date lemon", "one two three four five six",
         "red green blue cyan magenta yellow black white", "a b c d e f g h i"]
UNIQ_WORDS = backend_task("uniq_words", "def uniq_words(s):\n    return list(set(s.split()))",
                          [f"uniq_words({w!r})" for w in SET_WORDS])
SAME_SET_ORDER = "def uniq_words(s):\n    return list(set(s.split()))"
case("same_set_order", UNIQ_WORDS, SAME_SET_ORDER, 1.0, 1.0)

# The reference has no time limit officially (ours: REFERENCE_TIMEOUT_S), the answer 1 s.
SLOW = "def triple(x):\n    import time\n    time.sleep(1.5)\n    return 3 * x"
TRIPLE = backend_task("triple", SLOW, ["triple(1)", "triple(4)"])
case("slow_reference_fast_answer", TRIPLE, "def triple(x):\n    return x * 3", 1.0, 1.0)
case("slow_reference_equally_slow_answer", TRIPLE, SLOW, 0.0, 0.0)  # the answer's 1.5 s times out

# Third-party libraries of the official environment (its requirements pull in numpy and
# pandas), imported inside the function.
MEAN = backend_task("mean", "def mean(xs):\n    return sum(xs) / len(xs)",
                    ["mean([1, 2, 3, 4])", "mean([2.5])", "mean([-1, 1, 6])"])
case(
    "numpy_inside_body", MEAN, "def mean(xs):\n    import numpy as np\n    return np.mean(xs)", 1.0, 1.0
)  # np.float64 is a float
SUM = backend_task("total", "def total(xs):\n    return sum(xs)",
                   ["total([1, 2, 3])", "total([5])", "total([-1, 1, 9])"])
case("pandas_inside_body", SUM,
     "def total(xs):\n    import pandas as pd\n    return int(pd.Series(xs, dtype='int64').sum())", 1.0, 1.0)
# np.int64(6) == 6: numpy scalars compare by exact value (the canonical form reads them).
case("numpy_int64_returned", SUM, "def total(xs):\n    import numpy as np\n    return np.sum(xs)", 1.0, 1.0)
PARITY = backend_task("is_even", "def is_even(x):\n    return x % 2 == 0", ["is_even(2)", "is_even(3)", "is_even(0)"])
# np.bool_(True) == True and np.bool_(False) == False (the reference's False is no None).
case("numpy_bool_returned", PARITY, "def is_even(x):\n    import numpy as np\n    return np.array([x])[0] % 2 == 0",
     1.0, 1.0)

# ------------------------------------------------------------------ the numeric tower, ranges, arrays

# Money done carefully: Decimal('0.5') == 0.5, Decimal('0.75') == 0.75, Decimal('2.5') == 2.5; but
# Decimal('0.1') != 0.1, the double nearest a tenth (a Fraction likewise), as Python compares them.
SPLIT = backend_task("split", "def split(total, n):\n    return total / n",
                     ["split(1, 2)", "split(3, 4)", "split(1, 10)", "split(10, 4)"])
case("decimal_against_float", SPLIT,
     "def split(total, n):\n    from decimal import Decimal\n    return Decimal(total) / Decimal(n)", 0.75, 0.75)
case("fraction_against_float", SPLIT,
     "def split(total, n):\n    from fractions import Fraction\n    return Fraction(total, n)", 0.75, 0.75)
UPTO = backend_task("upto", "def upto(n):\n    return range(n)", ["upto(3)", "upto(0)", "upto(1)"])
case("range_with_start", UPTO, "def upto(n):\n    return range(0, n)", 1.0, 1.0)  # range(0, 3) == range(3)
case("range_against_list", UPTO, "def upto(n):\n    return list(range(n))", 0.0, 0.0)  # a range is no list
# A numpy array against the reference's list: numpy compares elementwise and the grader takes
# the truth of the result: one element, its comparison; two, the truth value raises; none, false.
EVENS = backend_task("evens", "def evens(xs):\n    return [x for x in xs if x % 2 == 0]",
                     ["evens([1, 2])", "evens([2, 4])", "evens([1])", "evens([4, 5])"])
case("numpy_array_against_list", EVENS,
     "def evens(xs):\n    import numpy as np\n    a = np.array(xs)\n    return a[a % 2 == 0]", 0.5, 0.5)
# Deliberate difference: an int subclass whose __eq__ says True is read as the int it holds (0),
# never asked; the official grader asks it (the reflected operand goes first) and scores 1.0.
case(
    "answer_int_subclass_eq_always_true",
    DOUBLE,
    "def double(x):\n    class Yes(int):\n        def __eq__(self, other):\n            return True\n"
    "        __hash__ = int.__hash__\n    return Yes(0)",
    0.0,
    0.0,
)

# Officially each test re-runs the code in the grader module's namespace, so a global the
# answer's function sets is there in its next test: test1 gives 1, then 2, 3, ... Strictly
# each test runs a fresh module.
CALLS_TEN = backend_task("calls_ten", "def f(x):\n    return 1", [f"f({i})" for i in range(10)])
COUNTER = "def f(x):\n    global n\n    try:\n        n += 1\n    except NameError:\n        n = 1\n    return n"
case("global_counter_persists", CALLS_TEN, COUNTER, 0.1, 1.0)
# The reference runs under the same scoping: its own counter gives 1, 2, 3, 4.
COUNTING_REFERENCE = backend_task(
    "counting_reference",
    "def f(x):\n    global m\n    try:\n        m += 1\n    except NameError:\n        m = 1\n    return m",
    [f"f({i})" for i in range(4)],
)
case("reference_global_counter_persists", COUNTING_REFERENCE, "def f(x):\n    return 1", 0.25, 1.0)

# Python's default int-to-str limit (4,300 digits), which the official Python 3.10/3.11
# has: str(10 ** 5000) raises there, but a returned 5,001-digit int still compares.
DIGITS = backend_task("count_digits", "def count_digits(e):\n    return e + 1",
                      ["count_digits(3)", "count_digits(5000)"])
case("big_int_to_str_raises", DIGITS, "def count_digits(e):\n    return len(str(10 ** e))", 0.5, 0.5)
POWER = backend_task("power", "def power(e):\n    return 10 ** e", ["power(3)", "power(5000)"])
case("big_int_returned", POWER, "def power(e):\n    return pow(10, e)", 1.0, 1.0)
case("big_int_returned_wrong", POWER, "def power(e):\n    return pow(10, e) + 1", 0.0, 0.0)
case("big_int_from_str_raises", POWER, "def power(e):\n    return int('1' + '0' * e)", 0.5, 0.5)


# ------------------------------------------------------------------ tests

@pytest.fixture(scope="module")
def reports(sandbox):
    """{mode: {case name: GradeReport}}: every case of a mode in one batch, on each sandbox."""
    graded = {}
    for mode in MODES:
        with Grader(sandbox=sandbox, workers=2, grading=mode) as grader:
            results = grader.grade([(c.task, c.answer) for c in CASES])
        graded[mode] = {c.name: report for c, report in zip(CASES, results)}
    return graded


def _params():
    for c in CASES:
        for mode in MODES:
            marks = []
            if mode == "official" and c.xfail_official:
                marks.append(pytest.mark.xfail(strict=True, reason=c.xfail_official))
            yield pytest.param(c, mode, id=f"{mode}-{c.name}", marks=marks)


def test_case_set_is_well_formed():
    names = [c.name for c in CASES]
    assert len(names) == len(set(names)), "duplicate case names"
    assert len(CASES) >= 36
    for c in CASES:
        n = len(c.task.test_cases)
        for value in (c.official, c.strict):
            assert round(value * n) == pytest.approx(value * n), f"{c.name}: {value} is not k/{n}"


@pytest.mark.parametrize("case, mode", list(_params()))
def test_reward(reports, case: Case, mode: str):
    report = reports[mode][case.name]
    expected = case.expected(mode)
    rows = [(t.name, t.call, t.expected, t.actual, t.passed, t.error) for t in report.tests]
    assert report.grading == mode
    assert report.fraction_passed == pytest.approx(expected), (
        f"case {case.name!r} under {mode}: expected {expected}, got {report.fraction_passed}\n"
        f"answer: {case.answer!r}\ntask error: {report.error}\nrows: {rows}"
    )
    assert report.success == (expected == 1.0), f"case {case.name!r} under {mode}: success={report.success}"


# ------------------------------------------------------------------ what the cases rest on, on each sandbox

def _host_hash(text: str, seed: int) -> str:
    """hash(text) in Debian's python3 under PYTHONHASHSEED=seed."""
    done = subprocess.run(["/usr/bin/python3", "-c", f"print(hash({text!r}))"], env={"PYTHONHASHSEED": str(seed)},
                          capture_output=True, text=True, check=True)
    return done.stdout.strip()


HASH = backend_task("str_hash", "def str_hash(s):\n    return hash(s)", ["str_hash('colbench')"])


def test_every_sandbox_starts_under_the_graders_hash_seed(sandbox):
    """Reference and answer sandboxes hash alike, so equal code orders a set alike, on every
    grading; the seed is the Grader's (HASH_SEED unless it is given another)."""
    for seed in (HASH_SEED, 12345):
        with Grader(sandbox=sandbox, workers=2, grading="official", hash_seed=seed) as grader:
            reports = grader.grade([(UNIQ_WORDS, SAME_SET_ORDER)] * 4 + [(HASH,
                                                                          "def str_hash(s):\n    return hash(s)")])
        assert all(r.success for r in reports[:4]), [r.fraction_passed for r in reports[:4]]
        row = reports[4].tests[0]
        assert row.expected == row.actual == _host_hash("colbench", seed), (seed, row)


COUNT_TEN = backend_task("count_ten", "def f(x):\n    return 1", [f"f({i})" for i in range(10)])
SETS_A_GLOBAL = "def f(x):\n    global left_behind\n    left_behind = 'by the answer before'\n    return 1"
READS_THE_GLOBAL = "def f(x):\n    try:\n        return left_behind\n    except NameError:\n        return 1"


def test_globals_persist_within_an_answer_never_into_the_next(sandbox):
    """One worker: every answer runs in the same sandbox, one after the other. Each answer's
    globals are its own: the reader never sees what the setter before it left."""
    with Grader(sandbox=sandbox, workers=1, grading="official") as grader:
        reports = grader.grade([(COUNT_TEN, SETS_A_GLOBAL), (COUNT_TEN, READS_THE_GLOBAL)] * 2 + [(COUNT_TEN, COUNTER)])
    assert [r.fraction_passed for r in reports] == [1.0, 1.0, 1.0, 1.0, 0.1]
    assert [t.actual for t in reports[-1].tests] == [str(k) for k in range(1, 11)]


def test_globals_are_lost_when_a_child_is_forked_again(sandbox):
    """The documented edge: after a timeout (or a crash) the server forks a fresh child
    for the remaining tests, and its globals start empty (officially the count would go on)."""
    task = backend_task("count_on", "def f(x):\n    return x", ["f(1)", "f(2)", "f(3)", "f(4)"])
    answer = COUNTER.replace("    return n", "    while x == 3:\n        pass\n    return n")
    with Grader(sandbox=sandbox, workers=1, grading="official") as grader:
        (report,) = grader.grade([(task, answer)])
    assert [(t.actual, t.error) for t in report.tests] == [("1", None), ("2", None), (None, "timeout"), ("1", None)]


def test_system_exit_and_keyboard_interrupt_fail_their_own_test(sandbox):
    """Our outcome for what ends the official grader's whole evaluation: rows say why."""
    answer = next(c.answer for c in CASES if c.name == "answer_raises_system_exit_and_keyboard_interrupt")
    with Grader(sandbox=sandbox, workers=1, grading="official") as grader:
        (report,) = grader.grade([(DOUBLE, answer)])
    assert [(t.actual, t.error) for t in report.tests] == [
        ("2", None),
        (None, "SystemExit: 0"),
        (None, "KeyboardInterrupt"),
        ("-6", None)
    ]
