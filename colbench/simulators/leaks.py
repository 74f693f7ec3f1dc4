"""Leak detectors: does a simulated human's reply hand over the hidden reference?

A reply may tell the agent what the function must do (that is the simulator's job); it must not dictate how. A
backend reply leaks when it carries the reference's code:

- ``code-block``: a block of code (a fenced block with statements in it, or a ``def`` with a body);
- ``line``: a statement of the reference, verbatim or up to whitespace and the names it defines (renamed
  variables still leak);
- ``expression``: an expression over the reference's own identifiers (two or more operators joining two or
  more of the parameters and variables it defines), which is how "the body as one formula" arrives;
- ``constants``: three or more of the reference's literal values (numbers beyond 0, 1, 2, 10, 100, strings,
  dictionary keys) from statements the agent's question did not ask about. A question asks about a statement
  when it names one of the statement's words (``rates`` for ``rates = {...}``) or one of the words of the
  statement just above or below it; a value the question itself names is never counted.

A frontend reply leaks when it carries the reference page's HTML (tags) or its class lists (three or more of
its utility classes). What is public is no leak: the function's signature, its default values, anything the
question itself says.

Each detector returns a ``Leak`` (its kind and the matched span, a substring of the reply that a guard can cut
out) or None, and never raises: a reference that does not parse is read by tokens alone.
"""
from __future__ import annotations

import ast
import functools
import keyword
import re
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Leak:
    kind: str
    span: str

    def as_dict(self) -> dict:
        return asdict(self)


# One tokenizer for the reference and the reply, so the two are compared token for token. Strings stay on one
# line and short: a reply is prose, and an apostrophe must not swallow a paragraph.
_TOKEN = re.compile(r"""
    (?P<number>\d+\.\d+|\d+)
  | (?P<name>[A-Za-z_]\w*)
  | (?P<string>'[^'\n]{0,60}'|"[^"\n]{0,60}")
  | (?P<op>\*\*|//|==|!=|<=|>=|->|[-+*/%<>=()\[\]{}:,.])
""", re.VERBOSE)
_ARITHMETIC = {"+", "-", "*", "/", "//", "%", "**", "<", ">", "<=", ">=", "==", "!="}
_TRIVIAL_NUMBERS = {0.0, 1.0, 2.0, 10.0, 100.0}
_MIN_LINE_TOKENS = 5
_MIN_CONSTANTS = 3
_MIN_CLASSES = 3


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str
    start: int
    end: int


def _tokens(text: str) -> list[_Token]:
    return [_Token(m.lastgroup, m.group(), m.start(), m.end()) for m in _TOKEN.finditer(text)]


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


# Words that name nothing: a question's "the" must not ask about a statement holding the string 'the'.
_STOPWORDS = set(keyword.kwlist) | {
    "the", "and", "but", "nor", "for", "are", "you", "your", "what", "which", "how", "does", "that", "this",
    "with", "any", "all", "can", "could", "would", "should", "there", "then", "than", "when", "will", "about",
    "into", "from", "out", "get", "use", "its", "it's", "have", "has", "one", "per", "please", "tell", "give"}


def _words(text: str) -> set[str]:
    """Lower-case words of three letters or more that name something, a trailing plural s dropped: ``rates``
    names ``rate``."""
    words = {w for w in re.findall(r"[a-z]{3,}", text.lower()) if w not in _STOPWORDS}
    return {w[:-1] if w.endswith("s") and len(w) > 3 else w for w in words}


def _defined_names(reference: str) -> set[str]:
    """The names the reference itself defines (function, parameters, variables, loop and comprehension
    targets): renaming them changes nothing, and an expression over them is the reference's own."""
    try:
        tree = ast.parse(reference)
    except (SyntaxError, ValueError):
        names = set(re.findall(r"\b([A-Za-z_]\w*)\s*=(?!=)", reference))
        for name, params in re.findall(r"def\s+(\w+)\s*\(([^)]*)\)", reference):
            names |= {name, *re.findall(r"[A-Za-z_]\w*", params)}
        return names
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            if not isinstance(node, ast.Lambda):
                names.add(node.name)
            args = node.args
            names.update(a.arg for a in args.posonlyargs + args.args + args.kwonlyargs)
            names.update(a.arg for a in (args.vararg, args.kwarg) if a is not None)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


@dataclass(frozen=True)
class _Statement:
    line: str
    pattern: tuple[str, ...]  # the line's tokens, the names it defines abstracted to ID
    words: set[str]  # what a question about this statement would name
    constants: tuple[str, ...]  # its non-trivial literals


def _statements(reference: str, defined: set[str]) -> tuple[list[_Statement], set[str]]:
    """The reference's statements, and the literals of its signature (public: the task states the signature)."""
    statements, public = [], set()
    for raw in reference.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        tokens = _tokens(line)
        literals = [t.text for t in tokens if t.kind in ("number", "string")]
        if line.startswith(("def ", "async def ")):
            public.update(literals)
            continue
        if line.startswith(("import ", "from ")):
            continue
        pattern = tuple("ID" if t.kind == "name" and t.text in defined else t.text for t in tokens)
        if pattern and pattern[-1] == ":":
            pattern = pattern[:-1]
        words = _words(" ".join(t.text.replace("_", " ") for t in tokens if t.kind in ("name", "string")))
        constants = tuple(c for c in literals if not _trivial(c))
        statements.append(_Statement(line, pattern, words, constants))
    return statements, public


def _trivial(literal: str) -> bool:
    if literal[0] in "'\"":
        return len(literal) <= 3  # '' or a single character
    return _number(literal) in _TRIVIAL_NUMBERS


def _find(pattern: tuple[str, ...], tokens: list[_Token]) -> tuple[int, int] | None:
    """Where ``pattern`` occurs as consecutive reply tokens (ID matches any name that is not a keyword)."""
    n = len(pattern)
    for i in range(len(tokens) - n + 1):
        for p, t in zip(pattern, tokens[i:i + n]):
            if p == "ID":
                if t.kind != "name" or keyword.iskeyword(t.text):
                    break
            elif p != t.text:
                break
        else:
            return tokens[i].start, tokens[i + n - 1].end
    return None


def _substantial(pattern: tuple[str, ...]) -> bool:
    """A statement worth calling code when seen in prose: five tokens or more, one of them an operator or a call."""
    return len(pattern) >= _MIN_LINE_TOKENS and any(p in _ARITHMETIC or p in {"=", "("} for p in pattern)


_FENCE = re.compile(r"```[\w+-]*\n?(.*?)(?:```|\Z)", re.DOTALL)
_CODE_STATEMENT = re.compile(
    r"^\s*(def |return\b|if .*:|elif .*:|else\s*:|for .*:|while .*:|[A-Za-z_]\w*\s*[-+*/]?=[^=])", re.MULTILINE)
_DEF_WITH_BODY = re.compile(r"def\s+\w+\s*\([^)]*\)\s*(->[^:]*)?:(?:[ \t]*\S[^\n]*|(?:\n[ \t]+\S[^\n]*)+)")


def _code_block(reply: str) -> Leak | None:
    for match in _FENCE.finditer(reply):
        if _CODE_STATEMENT.search(match.group(1)):
            return Leak("code-block", match.group(0))
    match = _DEF_WITH_BODY.search(reply)
    if match:
        return Leak("code-block", match.group(0))
    return None


def _expression(tokens: list[_Token], defined: set[str], reply: str) -> Leak | None:
    """A run of tokens where operands and operators alternate (two operands side by side is prose) holding two
    or more operators and two or more of the reference's own names."""
    operand = ("name", "number", "string")

    def verdict(run: list[_Token]) -> Leak | None:
        operators = sum(t.text in _ARITHMETIC for t in run)
        names = {t.text for t in run if t.kind == "name" and t.text in defined}
        if operators >= 2 and len(names) >= 2:
            return Leak("expression", reply[run[0].start:run[-1].end])
        return None

    run: list[_Token] = []
    for token in tokens:
        previous = run[-1] if run else None
        breaks = previous is not None and (
            (token.kind in operand and (previous.kind in operand or previous.text == ")"))
            or token.text in {",", ":", "."} and not (token.text == "." and previous.kind == "name")
            or token.start - previous.end > 3)
        if token.kind == "name" and keyword.iskeyword(token.text):
            breaks = True
        if breaks:
            found = verdict(run)
            if found:
                return found
            run = []
        if not (token.kind == "name" and keyword.iskeyword(token.text)) and token.text not in {",", ":"}:
            run.append(token)
    return verdict(run) if run else None


def _constants(statements: list[_Statement], public: set[str], reply: str, question: str) -> Leak | None:
    asked = _words(question)
    question_numbers = {_number(t.text) for t in _tokens(question) if t.kind == "number"}
    reply_tokens = _tokens(reply)
    # A question about a statement also asks about its neighbours: "what counts as a letter?" names the
    # ``return "letter"`` whose thresholds sit on the ``if`` above it.
    named = {i for i, statement in enumerate(statements) if statement.words & asked}
    about = named | {i - 1 for i in named} | {i + 1 for i in named}
    found: dict[str, tuple[int, int]] = {}
    for i, statement in enumerate(statements):
        if i in about:
            continue
        for constant in statement.constants:
            if constant in public or constant in found:
                continue
            if constant[0] in "'\"":
                inner = constant[1:-1]
                if inner.lower() in question.lower():
                    continue
                at = reply.find(inner)
                if at >= 0 and re.fullmatch(r".*\w.*", inner):
                    found[constant] = (at, at + len(inner))
            else:
                value = _number(constant)
                if value in question_numbers:
                    continue
                hit = next((t for t in reply_tokens if t.kind == "number" and _number(t.text) == value), None)
                if hit:
                    found[constant] = (hit.start, hit.end)
    distinct = {_number(c) if c[0] not in "'\"" else c for c in found}
    if len(distinct) >= _MIN_CONSTANTS:
        start, end = min(s for s, _ in found.values()), max(e for _, e in found.values())
        return Leak("constants", reply[start:end])
    return None


@functools.lru_cache(maxsize=256)
def _reference_parts(reference: str) -> tuple[frozenset[str], tuple, frozenset[str]]:
    """The reference's defined names, statements and public literals: parsed once per reference, not once per reply
    (the guard judges every reply of a dialogue against the same task). Frozen: the cache hands out one copy."""
    defined = _defined_names(reference)
    statements, public = _statements(reference, defined)
    return frozenset(defined), tuple(statements), frozenset(public)


def backend_leak(reference: str, reply: str, question: str = "") -> Leak | None:
    """Whether ``reply`` (to the agent's ``question``) carries the code of ``reference``, a Python function."""
    if not reply or not reference:
        return None
    try:
        found = _code_block(reply)
        if found:
            return found
        defined, statements, public = _reference_parts(reference)
        tokens = _tokens(reply)
        for statement in statements:
            if _substantial(statement.pattern):
                at = _find(statement.pattern, tokens)
                if at:
                    return Leak("line", reply[at[0]:at[1]])
        return _expression(tokens, defined, reply) or _constants(statements, public, reply, question)
    except Exception:  # noqa: BLE001 - a detector that raises would stop a rollout; a missed verdict is stored as none
        return None


_TAG = re.compile(r"</?[a-zA-Z][a-zA-Z0-9-]*(\s[^<>]*)?/?>")
_CLASS_ATTRIBUTE = re.compile(r"""class\s*=\s*["']([^"']*)["']""")


def frontend_leak(reference: str, reply: str, question: str = "") -> Leak | None:
    """Whether ``reply`` carries the HTML of ``reference`` (a page) or its class lists."""
    if not reply or not reference:
        return None
    try:
        tags = list(_TAG.finditer(reply))
        if len(tags) >= 2 or any(m.group(1) and "=" in m.group(1) for m in tags):
            return Leak("html", reply[tags[0].start():tags[-1].end()])
        # Utility classes carry a hyphen (bg-yellow-50, mx-auto); bare words (flex, shadow) are also plain English.
        classes = {c for attribute in _CLASS_ATTRIBUTE.findall(reference) for c in attribute.split() if "-" in c}
        spans = []
        for cls in classes:
            if cls in question:
                continue
            match = re.search(rf"(?<![\w-]){re.escape(cls)}(?![\w-])", reply)
            if match:
                spans.append(match.span())
        if len(spans) >= _MIN_CLASSES:
            return Leak("classes", reply[min(s for s, _ in spans):max(e for _, e in spans)])
        return None
    except Exception:  # noqa: BLE001 - as backend_leak
        return None
