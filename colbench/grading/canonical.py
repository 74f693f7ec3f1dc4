"""Canonical text for values returned by graded code.

The grader never calls `==` on objects made by untrusted code. Instead the sandbox turns
each output into a canonical string and the trusted parent compares strings. The forms
keep Python's `==` for builtin values:

- numbers compare by value: 1, 1.0, True and 1+0j all read "1"; -0.0 reads "0";
- dict, set and frozenset contents are sorted, so order does not matter, and a set
  equals a frozenset with the same elements, as in Python;
- a tuple is not a list; str is not bytes; bytes equals bytearray;
- a subclass of a builtin container or scalar (namedtuple, defaultdict, Counter, IntEnum)
  is read through its builtin base, which is what `==` does when the subclass does not
  override it. Its own methods are never asked, so an `__eq__` that always says True
  buys nothing: only the content counts.

Objects that exist once per interpreter compare by identity under `==`, and the official
grader runs the reference and the answer in one interpreter, so they are equal there:
- builtins such as the type `int`, the function `len`, `Ellipsis` read "<builtin name>";
- the one `math.nan` object inside a container reads "math.nan" (containers compare
  items by identity first, so `[math.nan] == [math.nan]`; at the top level it is a NaN).

Two things never compare equal, matching fresh objects under `==`:
- any other NaN (nan != nan), anywhere inside the value;
- any other object: it is shown as `<opaque module.Name>`, tagged by its exact type.
`encode` reports these by returning comparable=False.

This file runs inside the sandbox too (sent as source, ahead of runner.py), so it must
import nothing heavy: `import json` alone costs half of a worker's start-up (builtins and
math are built into the interpreter). What it captures of them at import time was taken
before any graded code ran, so graded code cannot replace it. It also must
not look at values through their own methods, so types are tested with `type(x) is int`
and content is read with the builtin base's unbound methods.
"""

import builtins as _builtins_module
from math import nan as _MATH_NAN

# name -> object of every public builtin but the constants handled by value.
_BUILTINS = {
    name: value
    for name, value in _builtins_module.__dict__.items()
    if not name.startswith("_") and value is not None and type(value) is not bool
}
_BUILTIN_NAME = {id(value): name for name, value in _BUILTINS.items()}

_SCALARS = (int, float, complex, str, bytes, bytearray)
_CONTAINERS = (tuple, list, dict, set, frozenset)
_INF = float("inf")


def encode(value):
    """Canonical text of `value` and whether it may compare equal to anything.

    Returns (text, comparable). Two values are equal under the grader iff both are
    comparable and their texts are the same.
    """
    never_equal = []  # gets an entry for each NaN or opaque object met
    text = _encode(value, never_equal, set())
    return text, not never_equal


def same(expected, actual):
    """The parent's comparison: both (text, comparable) pairs from `encode`."""
    return expected[1] and actual[1] and expected[0] == actual[0]


def _builtin_base(kind):
    """The builtin type that `kind` derives from, or None.

    Uses the class's real MRO via issubclass on the type, never `__class__`, which an
    object can fake.
    """
    if kind is bool:
        return int
    for base in _SCALARS + _CONTAINERS:
        if kind is base:
            return base
    for base in _SCALARS + _CONTAINERS:
        if issubclass(kind, base):
            return base
    return None


def _encode(value, never_equal, path):
    if value is None:
        return "None"
    if value is _MATH_NAN and path:
        return "math.nan"
    name = _BUILTIN_NAME.get(id(value))
    if name is not None and _BUILTINS[name] is value:
        return "<builtin " + name + ">"
    kind = type(value)
    base = _builtin_base(kind)
    if base is None:
        never_equal.append(1)
        return "<opaque " + _type_name(kind) + ">"
    if base is int:
        return int.__repr__(value)  # for bool too: int.__repr__(True) == "1"
    if base is float:
        return _float(float.__float__(value), never_equal)
    if base is complex:
        # The member descriptors of complex itself, so a subclass's `real` property is ignored.
        real, imag = complex.real.__get__(value), complex.imag.__get__(value)
        if imag == 0:
            return _float(real, never_equal)
        return "complex(" + _float(real, never_equal) + ", " + _float(imag, never_equal) + ")"
    if base is str:
        return ascii(str.__getitem__(value, slice(None)))  # exact str copy, then escaped
    if base is bytes or base is bytearray:
        return repr(bytes(base.__getitem__(value, slice(None))))

    # Containers: guard against cycles, which `==` would answer with RecursionError.
    marker = id(value)
    if marker in path:
        never_equal.append(1)
        return "<cycle>"
    path.add(marker)
    try:
        if base is tuple:
            items = [_encode(item, never_equal, path) for item in tuple.__getitem__(value, slice(None))]
            return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
        if base is list:
            items = [_encode(item, never_equal, path) for item in list.__getitem__(value, slice(None))]
            return "[" + ", ".join(items) + "]"
        if base is dict:
            pairs = [
                _encode(key, never_equal, path) + ": " + _encode(item, never_equal, path)
                for key, item in dict.items(value)
            ]
            return "{" + ", ".join(sorted(pairs)) + "}"
        # set and frozenset: equal to each other under ==, so one form for both.
        items = [_encode(item, never_equal, path) for item in base.__iter__(value)]
        if not items:
            return "set()"
        return "{" + ", ".join(sorted(items)) + "}"
    finally:
        path.discard(marker)


def _float(number, never_equal):
    if number != number:
        never_equal.append(1)
        return "nan"
    if number == _INF or number == -_INF:
        return "inf" if number > 0 else "-inf"
    if float.is_integer(number):
        # Exact integer value, so 2.0**53 and 2**53 + 1 stay different, as under ==.
        return int.__repr__(int(number))
    return float.__repr__(number)


def _type_name(kind):
    """`module.Qualname` of a type, reduced to safe characters (names can be anything)."""
    try:
        module = type.__getattribute__(kind, "__module__")
        name = type.__getattribute__(kind, "__qualname__")
        text = str.__str__(module) + "." + str.__str__(name)
    except BaseException:
        return "?"
    return "".join(c for c in text[:120] if c.isalnum() or c in "._<>")
