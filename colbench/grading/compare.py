"""The trusted parent's comparison of two canonical texts (canonical.py), by Python's `==`.

Each side's value was turned into text in its own sandbox; here the two texts are compared
with the rules `==` applies to the values they stand for. Most of those rules are an
equivalence that the canonical text already settles (numbers by exact value, sets and
dicts unordered, tuple apart from list, ...): equal texts mean equal values, and texts
without the markers below that differ mean different values. Four rules are not an
equivalence, so texts that hold their markers are parsed and compared structurally:

- an OrderedDict against another compares its order too, against any other dict not;
- a Counter against another counts a missing key as 0 (`Counter(a=1) == Counter(a=1, b=0)`);
- a dict's items view against another compares as their dicts do, against a set as a set
  of (key, value) tuples;
- a numpy array, or a numpy scalar, against anything: numpy compares elementwise and
  the official grader takes the truth of the result, which is the one element's
  comparison when both sides hold exactly one element (`np.array([5]) == [[5]]`,
  `np.int64(5) == [5]`), and raises (counts nothing) otherwise; canonical.py marks every
  array of another size as never equal.

The texts come from sandboxes where graded code ran, so they are untrusted: the parser
reads a small grammar, bounded in depth, and a text it cannot read compares by identity
of text alone.
"""
from __future__ import annotations

STRUCTURAL = ("array(", "np.", "OrderedDict(", "Counter(", "dict_items(")  # markers of the rules above
MAX_DEPTH = 100
ZERO = ("atom", "0")
SEQUENCES = ("list", "tuple", "deque")
MAPPINGS = ("dict", "ordered", "counter", "items")


class Unreadable(ValueError):
    pass


def same(expected: tuple[str, bool], actual: tuple[str, bool]) -> bool:
    """Both (text, comparable) pairs from canonical.encode: would `expected == actual` be true?"""
    (a, a_comparable), (b, b_comparable) = expected, actual
    if not (a_comparable and b_comparable):
        return False
    if a == b:
        return True
    if not any(marker in a or marker in b for marker in STRUCTURAL):
        return False
    try:
        return equal(parse(a), parse(b))
    except (Unreadable, RecursionError):
        return False


def equal(a: tuple, b: tuple) -> bool:
    """`==` on two parsed values."""
    if a[0] in ("array", "np") or b[0] in ("array", "np"):
        # numpy makes an array of the other side: one element each, or the truth value raises.
        x, y = element(a), element(b)
        return x is not None and y is not None and equal(x, y)
    if a[0] in MAPPINGS and b[0] in MAPPINGS and (a[0] == "items") == (b[0] == "items"):
        return _mappings_equal(a, b)
    if {a[0], b[0]} == {"items", "set"}:  # set-like: its (key, value) pairs hashed as tuples
        view, other = (a, b) if a[0] == "items" else (b, a)
        return sorted("tuple(" + k + ", " + key(v) + ")" for k, v in view[1].items()) == other[1]
    if a[0] != b[0]:
        return False
    if a[0] in SEQUENCES:
        return len(a[1]) == len(b[1]) and all(equal(x, y) for x, y in zip(a[1], b[1]))
    return a[1] == b[1]  # atoms and sets: by their canonical text


def element(node: tuple) -> tuple | None:
    """The one element numpy would see in `node` as an array, or None if it holds another number."""
    while True:
        kind = node[0]
        if kind == "np":
            return ("atom", node[1])
        if kind == "array":
            node = node[1]
        elif kind in SEQUENCES:
            if len(node[1]) != 1:
                return None
            node = node[1][0]
        elif kind == "range":
            start, length, _ = node[1]
            return ("atom", str(start)) if length == 1 else None
        else:
            return node


def _mappings_equal(a: tuple, b: tuple) -> bool:
    if a[0] == b[0] == "counter":  # a missing key counts as 0
        keys = a[1].keys() | b[1].keys()
        return all(equal(a[1].get(k, ZERO), b[1].get(k, ZERO)) for k in keys)
    if a[0] == b[0] == "ordered":
        return len(a[2]) == len(b[2]) and a[2] == b[2] and all(equal(a[1][k], b[1][k]) for k in a[2])
    return a[1].keys() == b[1].keys() and all(equal(a[1][k], b[1][k]) for k in a[1])


# ------------------------------------------------------------------ parsing

def parse(text: str) -> tuple:
    """Nodes: ("atom", canonical text), ("np", number text), ("array", node), ("list"|"tuple"|
    "deque", [nodes]), ("range", (start, length, step)), ("set", sorted key texts), ("dict"|
    "counter"|"items", {key text: node}), ("ordered", {key text: node}, [key texts in order])."""
    parser = _Parser(text)
    node = parser.value(0)
    if parser.at < len(text):
        raise Unreadable("text after the value")
    return node


def key(node: tuple) -> str:
    """The canonical text of a hashable value, numpy's mark left out: a set's element or a dict's key
    (hashing puts a numpy scalar with the number it equals, never with a sequence)."""
    kind = node[0]
    if kind in ("atom", "np"):
        return node[1]
    if kind in SEQUENCES:
        return kind + "(" + ", ".join(key(item) for item in node[1]) + ")"
    if kind == "range":
        return "range%r" % (node[1],)
    if kind == "set":
        return "{" + ", ".join(node[1]) + "}"
    if kind == "array":
        return "array(" + key(node[1]) + ")"
    if kind == "ordered":
        return "ordered(" + ", ".join(k + ": " + key(node[1][k]) for k in node[2]) + ")"
    return kind + "(" + ", ".join(sorted(k + ": " + key(v) for k, v in node[1].items())) + ")"


class _Parser:
    def __init__(self, text: str):
        self.text, self.at = text, 0

    def peek(self, literal: str) -> bool:
        return self.text.startswith(literal, self.at)

    def expect(self, literal: str) -> None:
        if not self.peek(literal):
            raise Unreadable(f"expected {literal!r} at {self.at}")
        self.at += len(literal)

    def skip_spaces(self) -> None:
        while self.at < len(self.text) and self.text[self.at] == " ":
            self.at += 1

    def value(self, depth: int) -> tuple:
        if depth > MAX_DEPTH:
            raise Unreadable("nested too deep")
        self.skip_spaces()
        if self.at >= len(self.text):
            raise Unreadable("text ends early")
        char = self.text[self.at]
        if char in "[(":
            close = "]" if char == "[" else ")"
            self.at += 1
            items = self.items(close, depth)
            return ("list" if char == "[" else "tuple", items)
        if char == "{":
            return self.braces(depth)
        if char in "'\"" or self.peek("b'") or self.peek('b"'):
            return ("atom", self.string())
        if char == "<":
            return ("atom", self.tag())
        word = self.word()
        if not word:
            raise Unreadable(f"unexpected {char!r} at {self.at}")
        if not self.peek("("):
            return ("atom", word)  # a number, None, inf, or the name of a singleton
        start = self.at
        self.at += 1
        if word.startswith("np."):
            inner = self.value(depth + 1)
            self.expect(")")
            if inner[0] != "atom":
                raise Unreadable("a numpy scalar holds a number")
            return ("np", inner[1])
        if word in ("array", "deque"):
            inner = self.value(depth + 1)
            self.expect(")")
            return (word, inner) if word == "array" else ("deque", inner[1] if inner[0] == "list" else [inner])
        if word in ("Counter", "OrderedDict", "dict_items"):
            inner = self.value(depth + 1)
            self.expect(")")
            return self.mapping(word, inner)
        if word == "range":
            arguments = self.items(")", depth)
            numbers = [int(item[1]) for item in arguments if item[0] == "atom" and _is_int(item[1])]
            if len(numbers) != len(arguments) or not 1 <= len(numbers) <= 3:
                raise Unreadable("range holds integers")
            span = range(*numbers)  # normal form: only the elements count
            length = len(span)
            return ("range", (span.start if length else 0, length, span.step if length > 1 else 0))
        if word == "set":  # the empty set (a set with elements reads {...})
            self.expect(")")
            return ("set", [])
        # complex, date, datetime, time, timedelta: equal exactly when their canonical texts are
        self.items(")", depth)
        return ("atom", word + self.text[start:self.at])

    def items(self, close: str, depth: int) -> list:
        found = []
        while True:
            self.skip_spaces()
            if self.peek(close):
                self.at += 1
                return found
            if "=" in self.word_ahead():  # a keyword argument: name=value
                self.word()
                self.expect("=")
            found.append(self.value(depth + 1))
            self.skip_spaces()
            if self.peek(","):
                self.at += 1
            elif not self.peek(close):
                raise Unreadable(f"expected {close!r} at {self.at}")

    def braces(self, depth: int) -> tuple:
        self.at += 1
        keys, values = [], []
        while True:
            self.skip_spaces()
            if self.peek("}"):
                self.at += 1
                break
            keys.append(self.value(depth + 1))
            self.skip_spaces()
            if self.peek(":"):
                self.at += 1
                values.append(self.value(depth + 1))
            self.skip_spaces()
            if self.peek(","):
                self.at += 1
            elif not self.peek("}"):
                raise Unreadable(f"expected '}}' at {self.at}")
        if values and len(values) != len(keys):
            raise Unreadable("a dict holds pairs")
        if not values:  # {} is a dict, set() reads as the word "set"
            return ("dict", {}) if not keys else ("set", sorted(key(k) for k in keys))
        return ("dict", {key(k): v for k, v in zip(keys, values)})

    def mapping(self, word: str, inner: tuple) -> tuple:
        if word == "Counter" and inner[0] == "dict":
            return ("counter", inner[1])
        if word != "Counter" and inner[0] == "list" and all(
            pair[0] == "tuple" and len(pair[1]) == 2 for pair in inner[1]
        ):
            order = [key(pair[1][0]) for pair in inner[1]]
            values = {k: pair[1][1] for k, pair in zip(order, inner[1])}
            return ("ordered", values, order) if word == "OrderedDict" else ("items", values)
        raise Unreadable(f"a malformed {word}")

    def word(self) -> str:
        start = self.at
        while self.at < len(self.text) and (self.text[self.at].isalnum() or self.text[self.at] in "._+-/"):
            self.at += 1
        return self.text[start:self.at]

    def word_ahead(self) -> str:
        end = self.at
        while end < len(self.text) and (self.text[end].isalnum() or self.text[end] in "_="):
            end += 1
        return self.text[self.at:end]

    def string(self) -> str:
        start = self.at
        if self.text[self.at] == "b":
            self.at += 1
        quote = self.text[self.at]
        self.at += 1
        while self.at < len(self.text) and self.text[self.at] != quote:
            self.at += 2 if self.text[self.at] == "\\" else 1
        self.expect(quote)
        return self.text[start:self.at]

    def tag(self) -> str:
        start, depth = self.at, 0
        while self.at < len(self.text):
            depth += {"<": 1, ">": -1}.get(self.text[self.at], 0)
            self.at += 1
            if depth == 0:
                return self.text[start:self.at]
        raise Unreadable("an unclosed tag")


def _is_int(text: str) -> bool:
    return text.lstrip("-").isdigit()
