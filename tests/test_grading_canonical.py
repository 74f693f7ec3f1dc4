"""Canonical forms against Python's own `==`, with no sandbox involved."""
from __future__ import annotations

import ast
import collections
import itertools
import math
import random
from pathlib import Path

import pytest

from colbench.grading.canonical import encode
from colbench.grading.compare import same

ATOMS = [
    None, 0, 1, -1, True, False, 0.0, -0.0, 1.0, 2.5, -2.5, 1e300, 1e-300,
    float("inf"), float("-inf"), 1 + 0j, 1j, 2.5 + 0j, complex(0, -0.0),
    2**53, float(2**53), 2**53 + 1, 10**30, "", "a", "b", "1", "a\nb", "é", b"", b"a",
    bytearray(b"a"), (), [],
]


def equal(a, b) -> bool:
    return same(encode(a), encode(b))


def random_value(rng: random.Random, depth: int = 0, hashable: bool = False):
    """A builtin value, often equal to another one drawn the same way."""
    if depth > 2 or rng.random() < 0.45:
        atom = rng.choice(ATOMS)
        if hashable and type(atom) in (list, bytearray):
            return tuple(atom)
        return atom
    kinds = ["tuple", "frozenset"] if hashable else ["tuple", "list", "dict", "set", "frozenset"]
    kind = rng.choice(kinds)
    size = rng.randint(0, 3)
    if kind == "dict":
        return {random_value(rng, depth + 1, True): random_value(rng, depth + 1) for _ in range(size)}
    if kind in ("set", "frozenset"):
        items = [random_value(rng, depth + 1, True) for _ in range(size)]
        return set(items) if kind == "set" else frozenset(items)
    items = [random_value(rng, depth + 1, kind == "tuple" and hashable) for _ in range(size)]
    return tuple(items) if kind == "tuple" else items


def test_random_builtin_values_agree_with_python_eq():
    rng = random.Random(1234)
    values = [random_value(rng) for _ in range(700)]
    forms = [encode(value) for value in values]
    checked = equal_pairs = 0
    for (a, form_a), (b, form_b) in itertools.combinations(zip(values, forms), 2):
        assert same(form_a, form_b) == (a == b), (a, b, form_a, form_b)
        checked += 1
        equal_pairs += a == b
    # The property means little unless equal pairs that look different were tried too.
    assert checked > 200_000 and equal_pairs > 2_000


def test_every_pair_of_atoms_agrees_with_python_eq():
    for a, b in itertools.product(ATOMS, repeat=2):
        assert equal(a, b) == (a == b), (a, b)


@pytest.mark.parametrize(
    "a, b, expected",
    [
        (1, 1.0, True),
        (1, True, True),
        (1.0, 1 + 0j, True),
        (-0.0, 0, True),
        (0.1 + 0.2, 0.3, False),
        (2**53 + 1, float(2**53), False),
        ({"a": 1, "b": 2}, {"b": 2, "a": 1}, True),
        ({1, 2, 3}, {3, 2, 1}, True),
        ({1, 2}, frozenset({1, 2}), True),
        (set(), frozenset(), True),
        ((1, 2), [1, 2], False),
        ("a", b"a", False),
        (b"a", bytearray(b"a"), True),
        ([{"k": (1, [2.0])}], [{"k": (True, [2])}], True),
        (None, None, True),
        (None, 0, False),
        ({}, set(), False),
        ((1,), 1, False),
    ],
)
def test_table_of_equalities(a, b, expected):
    assert (a == b) == expected  # the table itself states Python's answer
    assert equal(a, b) == expected


def test_nan_never_equals_anything_even_itself():
    nan = float("nan")
    for value in (nan, [nan], {"x": (1, nan)}, complex(nan, 1)):
        assert not equal(value, value)
    assert encode([nan])[0] == "[nan]"


def test_readable_forms():
    assert encode([1, 2.5, "a", (1,), None])[0] == "[1, 2.5, 'a', (1,), None]"
    assert encode({"b": 1, "a": {2, 1}})[0] == "{'a': {1, 2}, 'b': 1}"
    assert encode("line\nbreak é")[0] == "'line\\nbreak \\xe9'"  # one line, ASCII only


class AlwaysEqual:
    def __eq__(self, other):
        return True

    def __hash__(self):
        return 0


class LyingInt(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


class Hostile:
    """Every method that an encoder might be tempted to call raises."""

    def __eq__(self, other):
        raise AssertionError("__eq__ called")

    def __repr__(self):
        raise AssertionError("__repr__ called")

    def __hash__(self):
        raise AssertionError("__hash__ called")

    @property
    def __class__(self):
        return int  # isinstance(self, int) would believe this


def test_objects_are_tagged_by_exact_type_and_never_equal():
    text, comparable = encode(AlwaysEqual())
    assert text == "<opaque test_grading_canonical.AlwaysEqual>" and not comparable
    for builtin in ATOMS + [{}, set()]:
        assert not equal(AlwaysEqual(), builtin)
    assert not equal(AlwaysEqual(), AlwaysEqual())
    assert not equal([AlwaysEqual()], [1])


def test_no_method_of_the_value_is_called():
    assert encode(Hostile())[0] == "<opaque test_grading_canonical.Hostile>"
    assert encode([Hostile(), 1])[1] is False


def test_builtin_subclasses_are_read_through_their_base():
    assert equal(LyingInt(5), 5) and not equal(LyingInt(5), 6)  # content, not __eq__
    Point = collections.namedtuple("Point", "x y")
    assert equal(Point(1, 2), (1, 2)) and not equal(Point(1, 2), [1, 2])
    assert equal(collections.defaultdict(int, a=1), {"a": 1})
    assert equal(collections.Counter("aab"), {"a": 2, "b": 1})

    class Shouty(str):
        def __repr__(self):
            return "'something else'"

    assert encode(Shouty("x"))[0] == "'x'"


def test_cycles_do_not_recurse_forever():
    loop: list = []
    loop.append(loop)
    assert encode(loop) == ("[<cycle>]", False)


def test_exact_integers_for_integral_floats():
    assert encode(1e22)[0] == "10000000000000000000000"
    assert encode(-0.0)[0] == "0"
    assert encode(math.inf)[0] == "inf"


def test_encoder_module_imports_only_what_is_built_into_the_interpreter():
    """It runs inside the sandbox, where every import of a file costs start-up time. The
    modules it takes are compiled into Debian's python3, which the sandbox runs."""
    source = Path(encode.__code__.co_filename).read_text()
    imports = [node for node in ast.walk(ast.parse(source)) if isinstance(node, (ast.Import, ast.ImportFrom))]
    names = {alias.name for node in imports if isinstance(node, ast.Import) for alias in node.names}
    names |= {node.module for node in imports if isinstance(node, ast.ImportFrom)}
    assert names == {"builtins", "math", "sys"}


def test_objects_that_exist_once_per_interpreter_compare_by_identity():
    import math

    # Builtins are the same object for the reference and the answer, so `==` says equal.
    assert encode(int) == ("<builtin int>", True) and encode(len) == ("<builtin len>", True)
    assert encode([Ellipsis, ValueError]) == ("[<builtin Ellipsis>, <builtin ValueError>]", True)
    # A type that only claims to be a builtin is not one.
    forged = type("int", (), {"__module__": "builtins", "__qualname__": "int"})
    assert not encode(forged)[1]
    # math.nan inside a container equals itself (containers compare items by identity
    # first); on its own, or as any other NaN object, it is a NaN and never equal.
    assert encode([math.nan]) == ("[math.nan]", True) and encode({"k": math.nan})[1]
    assert not encode(math.nan)[1] and not encode([float("nan")])[1]


# ------------------------------------------------------------------ beyond the builtins: library values

import datetime as dt  # noqa: E402
from decimal import Decimal  # noqa: E402
from fractions import Fraction  # noqa: E402

import numpy as np  # noqa: E402

# Each row: two values, and whether `a == b` holds (the table states Python's answer, checked first).
LIBRARY_TABLE = [
    (Decimal("0.5"), 0.5, True),
    (Decimal("0.1"), 0.1, False),  # the double nearest a tenth is not a tenth
    (Decimal("0.1"), Fraction(1, 10), True),
    (Fraction(1, 3), 1 / 3, False),
    (Decimal("1E+30"), 10**30, True),
    (Decimal("1E+30"), 1e30, False),
    (Decimal("-0.00"), 0, True),
    (Decimal("Infinity"), float("inf"), True),
    (Decimal(1), 1 + 0j, True),
    (Decimal("0.1"), complex(0.1, 0), False),
    (np.int64(6), 6, True),
    (np.bool_(True), 1, True),
    (np.float32(0.5), Fraction(1, 2), True),
    (np.complex64(1 + 2j), 1 + 2j, True),
    (np.int64(5), [5], True),  # a numpy scalar against a sequence acts as an array
    (np.int64(5), [[5]], True),
    (5, [5], False),
    (np.array([5]), 5, True),
    (np.array([[5]]), (5,), True),
    (np.array([5]), "5", False),
    (np.array([None]), None, True),
    ([np.array([5])], [[5.0]], True),
    ({"k": np.array([1.5])}, {"k": Fraction(3, 2)}, True),
    (range(0, 3), range(3), True),
    (range(0), range(2, 2), True),
    (range(5, 7, 3), range(5, 6), True),
    (range(0, 5, 2), range(0, 6, 2), True),
    (range(3), [0, 1, 2], False),
    (np.array([0]), range(1), True),
    (collections.OrderedDict(a=1, b=2), collections.OrderedDict(b=2, a=1), False),
    (collections.OrderedDict(a=1, b=2), {"b": 2, "a": 1}, True),
    (collections.Counter(a=1), collections.Counter(a=1, b=0), True),
    (collections.Counter(a=1), {"a": 1, "b": 0}, False),
    (collections.deque([1, 2]), [1, 2], False),
    (collections.deque([1, 2]), collections.deque([1.0, 2]), True),
    ({1: 2}.keys(), {1}, True),
    ({1: 2}.items(), {(1, 2.0)}, True),
    ({}.items(), set(), True),
    ({}.keys(), frozenset(), True),
    ({1: [np.int64(2)]}.items(), {1: [[2]]}.items(), True),
    ({Decimal("0.5"): "x"}, {0.5: "x"}, True),
    ({Fraction(1, 2), 1}, {0.5, True}, True),
    (dt.date(2020, 1, 2), dt.datetime(2020, 1, 2), False),
    (dt.datetime(2020, 1, 2, 3), dt.datetime(2020, 1, 2, 5, tzinfo=dt.timezone(dt.timedelta(hours=2))), False),
    (dt.datetime(2020, 1, 2, 3, tzinfo=dt.timezone.utc),
     dt.datetime(2020, 1, 2, 5, tzinfo=dt.timezone(dt.timedelta(hours=2))), True),
    (dt.time(3, tzinfo=dt.timezone.utc), dt.time(4, tzinfo=dt.timezone(dt.timedelta(hours=1))), True),
    (dt.time(3), dt.time(3, tzinfo=dt.timezone.utc), False),
    (dt.timedelta(days=1), dt.timedelta(hours=24), True),
    (dt.timedelta(days=-1, microseconds=5), dt.timedelta(seconds=-86400, microseconds=5), True),
]


@pytest.mark.parametrize("a, b, expected", LIBRARY_TABLE)
def test_library_values_compare_as_python_does(a, b, expected):
    assert bool(a == b) == expected
    assert equal(a, b) == expected and equal(b, a) == expected


def test_numbers_read_as_their_exact_value():
    assert encode(Decimal("0.5")) == encode(Fraction(1, 2)) == encode(0.5) == ("0.5", True)
    assert encode(Decimal("0.1"))[0] == encode(Fraction(1, 10))[0] == "1/10"
    assert encode(np.int64(6)) == ("np.int64(6)", True)
    assert encode(np.float32(0.1))[0] == "np.float32(0.10000000149011612)"  # the float32 nearest a tenth
    for nan in (Decimal("NaN"), Decimal("sNaN"), np.float64("nan"), [Decimal("NaN")]):
        assert not encode(nan)[1]
    assert encode([np.nan]) == ("[numpy.nan]", True) and not encode(np.nan)[1]  # one object: identity


def test_arrays_of_other_sizes_are_never_equal():
    for array in (np.array([1, 2]), np.array([]), np.zeros((2, 1))):
        assert not encode(array)[1]
        assert not equal(array, array)  # bool(array == array) raises, or is False when empty
    assert encode(np.array([[1.5]]))[0] == "array([[np.float64(1.5)]])"
    assert not encode(np.array(["2020-01-01"], dtype="datetime64[D]"))[1]  # numpy's dates are not read


class LyingDecimal(Decimal):
    def __eq__(self, other):
        return True

    __hash__ = Decimal.__hash__

    def __str__(self):
        raise AssertionError("__str__ called")


class LyingArray(np.ndarray):
    def __eq__(self, other):
        return True

    def __getitem__(self, index):
        raise AssertionError("__getitem__ called")


class LyingDate(dt.date):
    @property
    def year(self):
        return 1999


class ShuffledDict(collections.OrderedDict):
    def __iter__(self):
        raise AssertionError("__iter__ called")


def test_subclasses_of_library_types_are_read_through_their_base():
    """Never through their own methods: the content counts, whatever `__eq__` says."""
    assert equal(LyingDecimal("0.5"), 0.5) and not equal(LyingDecimal("0.5"), 0.25)
    lying = np.array([7]).view(LyingArray)
    assert equal(lying, 7) and not equal(lying, 8)
    assert encode(LyingDate(2020, 1, 2))[0] == "date('2020-01-02')"
    shuffled = ShuffledDict(a=1, b=2)
    assert equal(shuffled, collections.OrderedDict(a=1, b=2)) and not equal(shuffled, collections.OrderedDict(b=2, a=1))


def test_other_time_zones_are_opaque():
    """Their utcoffset is code of the value's own (a tzinfo subclass): never run."""

    class Zone(dt.tzinfo):
        def utcoffset(self, when):
            raise AssertionError("utcoffset called")

    assert not encode(dt.datetime(2020, 1, 2, tzinfo=Zone()))[1]


@pytest.mark.parametrize("text", [
    "[", "array(", "np.int64([1])", "OrderedDict([1])", "Counter([])", "{1: 2, 3}", "range(1, 'a')", "<a", "'abc",
    "(" * 500 + ")" * 500, "np." * 50, "array(" * 200 + "1" + ")" * 200, "dict_items([(1, 2, 3)])",
])
def test_the_parent_reads_any_text_without_failing(text):
    """The texts come from sandboxes where graded code ran: whatever they hold, same() answers."""
    assert same((text, True), (text, True))  # identical texts
    assert not same((text, True), ("array([1])", True))
    assert not same((text, True), ("np.int64(1)", True))
