"""The facts of a hidden reference function, for the built-in simulated human.

``Analysis`` reads the reference once into short English sentences (``Fact``), each
tagged with the words it is about, so that a question can be matched to them.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from colbench.simulators.rulebased.english import (
    STR_METHODS,
    Speaker,
    format_spec_words,
    join_words,
    looks_like_code,
    split_identifier,
)

STOPWORDS = frozenset(
    """a an the is are was were be been being to of in on for and or it its this that these
    those what which who whom how when where why do does did should would could can will
    shall may might must i you we me my your our us please any there if with as at by from
    about function code python want wanted need needs like know tell let here so then than
    just some such each also have has had ok okay thanks thank sure them they their more other
    else anything something specific detail details information info question questions
    clarify clarification value values get use used using go make mean means one two way
    could provide give given case cases happen happens handle handled handling
    correct right assume assumption confirm understand understanding exactly""".split()
)

# Different words people use for the same thing: mapped to one canonical stem.
SYNONYMS = {
    "output": "return", "returned": "return", "result": "return", "results": "return",
    "dictionary": "dict", "dictionaries": "dict", "map": "dict", "mapping": "dict",
    "key": "key", "keys": "key", "field": "key", "fields": "key",
    "percentage": "percent", "pct": "percent",
    "cutoff": "threshold", "limit": "threshold", "boundary": "threshold", "thresholds": "threshold",
    "rounded": "round", "rounding": "round", "decimals": "decimal", "precision": "decimal",
    "digits": "decimal", "places": "decimal", "place": "decimal",
    "string": "text", "str": "text", "strings": "text", "message": "text",
    "arguments": "parameter", "argument": "parameter", "param": "parameter", "params": "parameter",
    "inputs": "input", "parameters": "parameter",
    "error": "error", "errors": "error", "exception": "error", "exceptions": "error", "raise": "error",
    "raises": "error", "invalid": "error",
    "default": "default", "defaults": "default", "optional": "default", "omitted": "default",
    "empty": "empty", "nothing": "empty", "none": "none", "null": "none",
    "bigger": "greater", "larger": "greater", "higher": "greater", "exceed": "greater",
    "exceeds": "greater", "above": "greater", "over": "greater",
    "smaller": "less", "lower": "less", "below": "less", "under": "less", "fewer": "less",
    "minimum": "min", "maximum": "max",
    "sort": "sort", "sorted": "sort", "order": "sort", "ordering": "sort",
}

TOPIC_RESULT = {"return", "format", "structure", "shape", "type", "look", "produce", "back"}
TOPIC_THRESHOLD = {"threshold", "greater", "less", "range", "min", "max", "between", "condition",
                   "rule", "criteria", "depend", "when", "tier", "level"}
# Which edge (empty, zero, negative, missing) a check is about comes from the check itself.
TOPIC_EDGE = {"edge", "special", "error", "return", "invalid", "check", "validate", "validation"}
TOPIC_ROUND = {"round", "decimal", "format", "accuracy", "exact", "whole", "integer"}
TOPIC_DEFAULT = {"default", "provide", "omit", "specify", "missing", "parameter"}
TOPIC_PARAM = {"parameter", "input", "type", "unit", "expect", "format", "represent", "contain",
               "structure", "look"}
TOPIC_LOOP = {"loop", "iterate", "every", "all", "process", "through", "collection"}
TOPIC_CONST = {"constant", "fixed", "factor", "percent", "table", "lookup"}


def stem(word: str) -> str:
    word = word.lower()
    word = SYNONYMS.get(word, word)
    if len(word) > 4 and word.endswith("ies"):
        word = word[:-3] + "y"
    elif len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    if len(word) > 5 and word.endswith("ing"):
        word = word[:-3]
    elif len(word) > 4 and word.endswith("ed"):
        word = word[:-2]
    return SYNONYMS.get(word, word)


def text_terms(text: str) -> set[str]:
    """Content words of free text (a question), identifiers split, stemmed."""
    terms = set()
    for token in re.findall(r"[A-Za-z][A-Za-z0-9_]*|\d+(?:\.\d+)?", text):
        parts = [token] if token[0].isdigit() else split_identifier(token)
        if "_" in token.strip("_"):
            parts.append(token.lower())  # the identifier itself, as named in the code
        for part in parts:
            if part.lower() in STOPWORDS or len(part) < 2 and not part.isdigit():
                continue
            terms.add(stem(part))
    return terms


# --------------------------------------------------------------------------------------
# Facts
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fact:
    text: str
    words: frozenset[str]  # stems of identifiers, literals and numbers the fact mentions
    subject: frozenset[str]  # stems of what the fact is chiefly about (a parameter, a key)
    topics: frozenset[str]  # stems of what kind of question it answers
    priority: int  # importance when the agent asks generally: higher first
    order: int  # position in the source, for stable ties


def node_terms(*nodes: ast.AST | None) -> set[str]:
    terms: set[str] = set()
    for node in nodes:
        if node is None:
            continue
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name):
                terms.update(stem(w) for w in split_identifier(sub.id))
                terms.add(sub.id.lower())
            elif isinstance(sub, ast.Attribute):
                terms.update(stem(w) for w in split_identifier(sub.attr))
            elif isinstance(sub, ast.arg):
                terms.update(stem(w) for w in split_identifier(sub.arg))
            elif isinstance(sub, ast.Constant):
                if isinstance(sub.value, str) and len(sub.value) <= 60:
                    terms.update(text_terms(sub.value))
                elif isinstance(sub.value, (int, float)) and not isinstance(sub.value, bool):
                    terms.add(repr(sub.value))
                    if isinstance(sub.value, float) and sub.value.is_integer():
                        terms.add(str(int(sub.value)))
    return {t for t in terms if t and t not in STOPWORDS}


def sentence(text: str) -> str:
    text = " ".join(text.split())
    if not text:
        return text
    first = text.split(" ", 1)[0]
    if len(first) > 1 and "_" not in first:  # keep parameter names ("a", "max_len") as named
        text = text[0].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."


class Analysis:
    """The facts of one hidden reference, built once."""

    def __init__(self, hidden: str, description: str = ""):
        self.facts: list[Fact] = []
        self._seen: set[str] = set()
        self._order = 0
        try:
            tree = ast.parse(hidden)
        except (SyntaxError, ValueError):
            self._prose_facts(hidden)
            return
        target = self._target(tree, description)
        self.module_constants(tree)
        functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        if target is not None:
            self.function(target, main=True)
        for fn in functions:
            if fn is not target:
                try:
                    self.function(fn, main=False)
                except Exception:  # noqa: BLE001 - a helper we cannot read costs only its facts
                    pass
        if target is None and not functions:
            try:
                self.block(tree.body, Speaker(), [], None, boost=0)
            except Exception:  # noqa: BLE001
                pass

    # -- bookkeeping --

    def add(self, text: str, nodes, topics, priority: int, extra_words=(), subject=()) -> None:
        text = sentence(text)
        if not text or text in self._seen or looks_like_code(text):
            return
        self._seen.add(text)
        subject_terms = {stem(w) for name in subject for w in split_identifier(name) + [name.lower()]}
        words = node_terms(*nodes) | {stem(w) for w in extra_words} | subject_terms
        self._order += 1
        self.facts.append(Fact(text, frozenset(words), frozenset(subject_terms),
                               frozenset(stem(t) for t in topics), priority, self._order))

    def _prose_facts(self, hidden: str) -> None:
        # Hidden information that is not code: its sentences are the facts.
        for i, part in enumerate(re.split(r"(?<=[.!?])\s+|\n+", hidden)):
            part = part.strip()
            if len(part) > 3:
                self.add(part, [], [], priority=max(1, 9 - i), extra_words=text_terms(part))

    @staticmethod
    def _target(tree: ast.Module, description: str):
        functions = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        names = re.findall(r"def\s+([A-Za-z_]\w*)", description or "")
        for name in reversed(names):
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
                    return node
        return functions[-1] if functions else None

    # -- module level --

    def module_constants(self, tree: ast.Module) -> None:
        speaker = Speaker()
        for stmt in tree.body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                if isinstance(stmt.value, (ast.Constant, ast.Dict, ast.List, ast.Tuple, ast.Set, ast.UnaryOp)):
                    name = stmt.targets[0].id
                    self.add(constant_text(speaker, name, stmt.value), [stmt], TOPIC_CONST, priority=7, subject=[name])

    # -- one function --

    def function(self, fn: ast.FunctionDef, main: bool) -> None:
        args = fn.args
        positional = args.posonlyargs + args.args
        params = [a.arg for a in positional + args.kwonlyargs if a.arg not in ("self", "cls")]
        flags = {a.arg for a, d in zip(positional[len(positional) - len(args.defaults):], args.defaults)
                 if isinstance(d, ast.Constant) and isinstance(d.value, bool)}
        flags |= {a.arg for a, d in zip(args.kwonlyargs, args.kw_defaults)
                  if isinstance(d, ast.Constant) and isinstance(d.value, bool)}
        speaker = Speaker(set(params), flags)
        boost = 0 if main else -3
        where = "" if main else f" (in the helper {' '.join(split_identifier(fn.name))})"

        doc = ast.get_docstring(fn)
        if doc and main:
            for line in doc.splitlines():
                line = line.strip(" -*")
                if len(line) > 8 and not looks_like_code(line) and "(" not in line:
                    self.add(line, [], TOPIC_PARAM | text_terms(line), priority=3)

        covered: set = set()
        if main:
            covered = self.result_format(fn, speaker)
        self.parameters(fn, params, positional, speaker, boost, where)
        self.rounding(fn, speaker, boost, where, covered)
        body = fn.body[1:] if ast.get_docstring(fn) else fn.body
        self.block(body, speaker, [], None, boost, top=True, where=where)

    def parameters(self, fn, params, positional, speaker: Speaker, boost: int, where: str = "") -> None:
        args = fn.args
        defaults = dict(zip([a.arg for a in positional][len(positional) - len(args.defaults):], args.defaults))
        defaults.update({a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None})
        for p in params:
            kind, details, literals = self._param_usage(fn, p, speaker)
            literal_words = [w for lit in literals for w in text_terms(lit)]
            bits = []
            if kind:
                bits.append(f"{p} is {kind}")
            bits.extend(details)
            if bits:
                self.add("the input " + "; ".join(bits) + where, [], TOPIC_PARAM | {kind_word(kind)},
                         priority=5 + boost,
                         extra_words=literal_words, subject=[p])
            if p in defaults:
                self.add(f"if {p} is not given, it defaults to {speaker.expr(defaults[p])}{where}",
                         [defaults[p]], TOPIC_DEFAULT, priority=6 + boost, subject=[p])

    def _param_usage(self, fn, p: str, speaker: Speaker) -> tuple[str, list[str]]:
        kinds: list[str] = []
        entries: list[str] = []
        item_entries: list[str] = []
        options: list[str] = []
        loop_vars: set[str] = set()
        methods: set[str] = set()
        text_items = False
        for node in ast.walk(fn):
            if isinstance(node, (ast.For, ast.comprehension)):
                it = node.iter
                if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr == "items" \
                        and isinstance(it.func.value, ast.Name) and it.func.value.id == p:
                    kinds.append("a dictionary")
                elif isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "enumerate" \
                        and it.args and isinstance(it.args[0], ast.Name) and it.args[0].id == p:
                    kinds.append("a list")
                    if (
                        isinstance(node.target, ast.Tuple)
                        and len(node.target.elts) == 2
                        and isinstance(node.target.elts[1], ast.Name)
                    ):
                        loop_vars.add(node.target.elts[1].id)
                elif isinstance(it, ast.Name) and it.id == p:
                    kinds.append("a collection of items")
                    if isinstance(node.target, ast.Name):
                        loop_vars.add(node.target.id)
            elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == p:
                if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                    kinds.append("a dictionary")
                    add_unique(entries, speaker.literal(node.slice.value))
                else:
                    kinds.append("a list")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == p:
                m = node.func.attr
                if m in ("get", "items", "keys", "values", "update"):
                    kinds.append("a dictionary")
                    if (
                        m == "get"
                        and node.args
                        and isinstance(node.args[0], ast.Constant)
                        and isinstance(node.args[0].value, str)
                    ):
                        add_unique(entries, speaker.literal(node.args[0].value))
                elif m in ("append", "extend", "sort", "index", "pop"):
                    kinds.append("a list")
                elif m in STR_METHODS:
                    kinds.append("text")
            elif isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                if any(isinstance(s, ast.Name) and s.id == p for s in sides):
                    for s in sides:
                        if isinstance(s, ast.Constant) and isinstance(s.value, str):
                            kinds.append("text")
                            add_unique(options, speaker.literal(s.value))
                        elif (
                            isinstance(s, ast.Constant)
                            and isinstance(s.value, (int, float))
                            and not isinstance(s.value, bool)
                        ):
                            kinds.append("a number")
                        elif isinstance(s, (ast.List, ast.Tuple, ast.Set)):
                            for elt in s.elts:
                                if isinstance(elt, ast.Constant) and isinstance(elt.value, str):
                                    kinds.append("text")
                                    add_unique(options, speaker.literal(elt.value))
            elif isinstance(node, ast.BinOp):
                if any(isinstance(s, ast.Name) and s.id == p for s in (node.left, node.right)) \
                        and not isinstance(node.op, ast.Mod):
                    kinds.append("a number")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len" \
                    and node.args and isinstance(node.args[0], ast.Name) and node.args[0].id == p:
                kinds.append("a collection of items")
        # entries read from each item of p
        if loop_vars:
            for node in ast.walk(fn):
                if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in loop_vars \
                        and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                    add_unique(item_entries, speaker.literal(node.slice.value))
                elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                        and isinstance(node.func.value, ast.Name) and node.func.value.id in loop_vars:
                    methods.add(node.func.attr)
            for node in ast.walk(fn):
                if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in loop_vars \
                        and node.attr not in methods:
                    add_unique(item_entries, "'" + node.attr + "'")
            text_items = bool(methods & STR_METHODS) and not item_entries
            if methods & {"isdigit", "isalpha", "isalnum", "isupper", "islower", "isspace"}:
                kinds += ["text"] * 10  # its items are characters: it is a string
                text_items = False
        kind = most_common(kinds)
        if kind == "a collection of items" and "a list" in kinds:
            kind = "a list"
        if kind == "a collection of items" and "a dictionary" in kinds:
            kind = "a dictionary"
        details = []
        if entries:
            details.append(f"it has the entries {join_words(entries[:8])}")
        if text_items:
            details.append("each item in it is text")
        if item_entries:
            what = "dictionary" if any(e.startswith("'") for e in item_entries) else "item"
            details.append(f"each item in it is a {what} with {join_words(item_entries[:8])}")
        if options:
            details.append(f"it can be {join_words(options[:8], 'or')}")
        return kind, details, entries + item_entries + options

    def rounding(self, fn, speaker: Speaker, boost: int, where: str, covered=()) -> None:
        """Rounding anywhere in the function, except where the result's own facts say it."""
        for node in ast.walk(fn):
            if isinstance(node, ast.Call) and node not in covered:
                fname = (
                    node.func.id
                    if isinstance(node.func, ast.Name)
                    else node.func.attr if isinstance(node.func, ast.Attribute) else ""
                )
                if fname in ("round", "floor", "ceil") and node.args:
                    text = speaker.expr(node)
                    inner = speaker.expr(node.args[0])
                    if text.startswith("a value computed") or not text.startswith(inner):
                        continue
                    if isinstance(node.args[0], ast.BinOp):
                        inner = f"({inner})"
                    self.add(f"{inner} is{text[len(speaker.expr(node.args[0])):]}{where}", [node], TOPIC_ROUND,
                             priority=8 + boost,
                             subject=[n.id for n in ast.walk(node.args[0]) if isinstance(n, ast.Name)][:1])
            elif isinstance(node, ast.FormattedValue):
                spec = format_spec_words(node.format_spec)
                if "decimal" in spec:
                    self.add(f"{speaker.expr(node.value)} is shown with {spec}{where}", [node.value],
                             TOPIC_ROUND | {"text", "format"}, priority=8 + boost)

    def result_format(self, fn, speaker: Speaker) -> set:
        """Facts on what the function gives back; the rounding calls they already describe."""
        returns = [n for n in walk_function(fn) if isinstance(n, ast.Return)]
        if not returns:
            self.add("the function gives back nothing (None); it works by its side effects", [], TOPIC_RESULT, 9)
            return set()
        main = fn.body[-1] if isinstance(fn.body[-1], ast.Return) else returns[-1]
        if main.value is None:
            self.add("the result is None", [], TOPIC_RESULT, 9)
            return set()
        shape, type_word, parts = self._shape(fn, main.value, speaker)
        constants = [r.value.value for r in returns if isinstance(r.value, ast.Constant)]
        if len(constants) == len(returns) > 1:
            shown = []
            for value in constants:
                add_unique(shown, speaker.literal(value))
            shape = f"one of {join_words(shown, 'or')}" if len(shown) > 1 else shape
        covered = set(rounding_calls(main.value))
        topics = TOPIC_RESULT | {type_word} | ({"key"} if type_word == "dict" else set())
        self.add(f"the result is {shape}", [main.value], topics | (TOPIC_ROUND if covered else set()), priority=10)
        for key, value_text, nodes in parts:
            calls = {c for n in nodes for c in rounding_calls(n)}
            covered |= calls
            self.add(f"the {key} entry of the result is {value_text}", nodes,
                     TOPIC_RESULT | {"key"} | (TOPIC_ROUND if calls else set()), priority=6, subject=[key.strip("'")])
        return covered

    def _shape(self, fn, value: ast.AST, speaker: Speaker):
        """(description, type word, [(key, value description, nodes)]) of a returned value."""
        parts: list[tuple[str, str, list]] = []
        if isinstance(value, ast.Name):
            assigned = [n for n in walk_function(fn) if isinstance(n, ast.Assign)
                        and any(isinstance(t, ast.Name) and t.id == value.id for t in n.targets)]
            first = assigned[0].value if assigned else None
            if isinstance(first, (ast.Dict, ast.Call)) and (
                isinstance(first, ast.Dict) or (isinstance(first.func, ast.Name) and first.func.id == "dict")
            ):
                keys = []
                if isinstance(first, ast.Dict):
                    for k, v in zip(first.keys, first.values):
                        if isinstance(k, ast.Constant):
                            keys.append(speaker.literal(k.value))
                            parts.append((speaker.literal(k.value), speaker.expr(v), [v]))
                for n in walk_function(fn):
                    if isinstance(n, ast.Assign):
                        for t in n.targets:
                            if (
                                isinstance(t, ast.Subscript)
                                and isinstance(t.value, ast.Name)
                                and t.value.id == value.id
                            ):
                                if isinstance(t.slice, ast.Constant):
                                    key = speaker.literal(t.slice.value)
                                    if key not in keys:
                                        keys.append(key)
                                        parts.append((key, speaker.expr(n.value), [n.value]))
                                else:
                                    return (f"a dictionary mapping {speaker.expr(t.slice)} to {speaker.expr(n.value)}",
                                            "dict", parts)
                if keys:
                    return f"a dictionary with the keys {join_words(keys)}", "dict", parts
                return "a dictionary", "dict", parts
            if isinstance(first, ast.List) and not first.elts:
                for n in walk_function(fn):
                    if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "append" \
                            and isinstance(n.func.value, ast.Name) and n.func.value.id == value.id and n.args:
                        inner, _, _ = self._shape(fn, n.args[0], speaker)
                        return f"a list; each item is {inner}", "list", parts
                return "a list", "list", parts
            if first is not None and not (isinstance(first, ast.Constant) and len(assigned) > 1):
                inner, word, parts = self._shape(fn, first, speaker)
                return inner, word, parts
            return speaker.expr(value), "value", parts
        if isinstance(value, ast.Dict):
            keys = []
            for k, v in zip(value.keys, value.values):
                if isinstance(k, ast.Constant):
                    keys.append(speaker.literal(k.value))
                    parts.append((speaker.literal(k.value), speaker.expr(v), [v]))
            if keys:
                return f"a dictionary with the keys {join_words(keys)}", "dict", parts
            return speaker.expr(value), "dict", parts
        if isinstance(value, ast.Tuple):
            items = [speaker.expr(elt) for elt in value.elts]
            return f"a tuple of {len(items)} values: {join_words(items)}", "tuple", parts
        if isinstance(value, (ast.List, ast.ListComp)):
            return speaker.expr(value), "list", parts
        if isinstance(value, ast.JoinedStr):
            return f"a text of the form {speaker.template(value)}", "text", parts
        if isinstance(value, ast.Constant):
            kind = "text" if isinstance(value.value, str) else "value"
            return speaker.literal(value.value), kind, parts
        if isinstance(value, (ast.Compare, ast.BoolOp)) or (
                isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.Not)):
            return f"True or False: whether {speaker.cond(value)}", "bool", parts
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "join":
            return speaker.expr(value) + " (one text)", "text", parts
        return speaker.expr(value), "value", parts

    # -- statements: branches, loops, computations --

    def block(self, stmts, speaker: Speaker, path: list[str], loop: str | None, boost: int,
              top: bool = False, where: str = "") -> None:
        for i, stmt in enumerate(stmts):
            try:
                self.statement(stmt, speaker, path, loop, boost, early=top and i < len(stmts) - 1, where=where)
            except Exception:  # noqa: BLE001 - one statement we cannot read costs only its facts
                continue

    def statement(self, stmt, speaker: Speaker, path, loop, boost, early: bool, where: str) -> None:
        prefix = ""
        if loop:
            prefix += f"for each {loop}, "
        if path:
            prefix += f"when {' and '.join(path)}, "
        if isinstance(stmt, ast.If):
            self.if_chain(stmt, speaker, path, loop, boost, early, where)
        elif isinstance(stmt, (ast.For, ast.AsyncFor)):
            target = speaker.bare(stmt.target)
            self.add(f"{prefix}it goes through each {target} in {speaker.expr(stmt.iter)}{where}",
                     [stmt.target, stmt.iter],
                     TOPIC_LOOP, priority=3 + boost)
            self.block(stmt.body, speaker, path, target, boost, where=where)
        elif isinstance(stmt, ast.While):
            self.add(f"{prefix}it repeats while {speaker.cond(stmt.test)}{where}", [stmt.test], TOPIC_LOOP,
                     priority=3 + boost)
            self.block(stmt.body, speaker, path, loop, boost, where=where)
        elif isinstance(stmt, (ast.Try,)) or type(stmt).__name__ == "TryStar":
            self.block(stmt.body, speaker, path, loop, boost, where=where)
            for handler in stmt.handlers:
                what = speaker._type_name(handler.type) if handler.type is not None else "an error"
                what = what.replace("a ", "", 1) if what.startswith("a ") else what
                outcome = self.outcome(handler.body, speaker)
                if outcome:
                    self.add(f"if {what} happens, {outcome}{where}", [handler], TOPIC_EDGE, priority=6 + boost)
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            self.block(stmt.body, speaker, path, loop, boost, where=where)
        elif isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and not path:
            value = stmt.value
            if value is None or (
                isinstance(value, (ast.List, ast.Dict)) and not getattr(value, "elts", getattr(value, "keys", None))
            ):
                return  # an empty container being set up; the result format covers it
            clause = self.clause(stmt, speaker)
            if not clause:
                return
            constant = isinstance(value, (ast.Constant, ast.Dict, ast.List, ast.Tuple)) and not loop
            topics = TOPIC_CONST if constant else {"compute", "calculate", "formula", "how", "total"}
            if isinstance(value, ast.Constant) and isinstance(value.value, (int, float)) and value.value in (0, 1, 0.0):
                priority, topics = 2, set()  # a counter or accumulator starting point
            else:
                priority = (6 if constant else 5) + boost
            self.add(f"{prefix}{clause}{where}", [stmt], topics, priority, subject=changed_names([stmt]))
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and not path:
            clause = self.clause(stmt, speaker)
            if clause:
                self.add(f"{prefix}{clause}{where}", [stmt], {"add", "collect", "list"}, priority=3 + boost)
        elif isinstance(stmt, ast.Raise) and not path:
            clause = self.clause(stmt, speaker)
            if clause:
                self.add(f"{prefix}{clause}{where}", [stmt], TOPIC_EDGE, priority=5 + boost)

    def if_chain(self, stmt: ast.If, speaker: Speaker, path, loop, boost, early: bool, where: str) -> None:
        branches: list[tuple[ast.AST, list]] = []
        node = stmt
        while True:
            branches.append((node.test, node.body))
            if len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
                node = node.orelse[0]
                continue
            orelse = node.orelse
            break
        conds = [speaker.cond(test) for test, _ in branches]
        clauses = []
        for cond, (_, body) in zip(conds, branches):
            outcome = self.outcome(body, speaker)
            if outcome:
                clauses.append(f"when {cond}, {outcome}")
        else_outcome = self.outcome(orelse, speaker) if orelse else ""
        if else_outcome and clauses:
            clauses.append(f"otherwise {else_outcome}")

        all_nodes = [t for t, _ in branches] + [s for _, b in branches for s in b] + list(orelse)
        exits = any(isinstance(s, (ast.Return, ast.Raise)) for _, b in branches for s in b)
        # A threshold is a comparison with a number other than zero (zero is an edge case).
        numeric = any(isinstance(n, ast.Compare) and (
            any(isinstance(c, ast.Constant) and isinstance(c.value, (int, float)) and not isinstance(c.value, bool)
                and c.value != 0 for c in [n.left, *n.comparators])
            or any(isinstance(op, (ast.Lt, ast.LtE, ast.Gt, ast.GtE)) for op in n.ops)
            and not any(isinstance(c, ast.Constant) and c.value == 0 for c in n.comparators))
            for t, _ in branches for n in ast.walk(t))
        topics = set(TOPIC_THRESHOLD) if numeric else {"condition", "rule", "when", "depend", "criteria"}
        if exits:
            topics |= TOPIC_RESULT | {"return"}
        if early and exits and not path and not loop:
            topics |= TOPIC_EDGE
        if any(isinstance(s, ast.Raise) for _, b in branches for s in b):
            topics |= {"error"}
        topics |= edge_topics([t for t, _ in branches])
        priority = (9 if early and exits and not path and not loop else 8 if numeric else 7) + boost

        lead = ""
        if loop:
            lead += f"for each {loop}, "
        if path:
            lead += f"when {' and '.join(path)}: "
        text = lead + "; ".join(clauses) + where
        # What the branches change is what the fact is about ("when is x passed?").
        subject = changed_names([s for _, b in branches for s in b] + list(orelse))
        if clauses and len(text) <= 330:
            self.add(text, all_nodes, topics, priority, subject=subject)
        else:
            # too long for one reply: one fact per branch
            for cond, (test, body) in zip(conds, branches):
                outcome = self.outcome(body, speaker)
                if outcome:
                    self.add(f"{lead}when {cond}, {outcome}{where}", [test, *body], topics, priority,
                             subject=changed_names(body))
            if else_outcome:
                negs = join_words([speaker.negate(t) for t, _ in branches[:3]])
                self.add(f"{lead}when {negs}, {else_outcome}{where}", [*(t for t, _ in branches), *orelse],
                         topics, priority, subject=changed_names(orelse))
        for cond, (_, body) in zip(conds, branches):
            self.block(body, speaker, path + [cond], loop, boost, where=where)
        if orelse:
            negs = [speaker.negate(t) for t, _ in branches]
            self.block(orelse, speaker, path + [" and ".join(negs)], loop, boost, where=where)

    def outcome(self, body: list, speaker: Speaker) -> str:
        """What a branch does, in words; nested ifs are left to their own facts."""
        clauses = []
        for stmt in body:
            clause = self.clause(stmt, speaker)
            if clause:
                clauses.append(clause)
            if len(clauses) == 3:
                break
        return join_words(clauses)

    def clause(self, stmt, speaker: Speaker) -> str:
        if isinstance(stmt, ast.Return):
            return (
                "the result is None"
                if stmt.value is None
                else f"the result is {self._short_result(stmt.value, speaker)}"
            )
        if isinstance(stmt, ast.Assign):
            targets = join_words([speaker.expr(t) for t in stmt.targets])
            return f"{targets} is set to {speaker.expr(stmt.value)}"
        if isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            return f"{speaker.expr(stmt.target)} is set to {speaker.expr(stmt.value)}"
        if isinstance(stmt, ast.AugAssign):
            t, v = speaker.expr(stmt.target), speaker.expr(stmt.value)
            if isinstance(stmt.op, ast.Add):
                return f"{v} is added to {t}"
            if isinstance(stmt.op, ast.Sub):
                return f"{v} is subtracted from {t}"
            if isinstance(stmt.op, ast.Mult):
                return f"{t} is multiplied by {v}"
            if isinstance(stmt.op, ast.Div):
                return f"{t} is divided by {v}"
            return f"{t} is updated with {v}"
        if isinstance(stmt, ast.Raise):
            if stmt.exc is None:
                return "the error is passed on"
            exc = stmt.exc
            name = exc.func if isinstance(exc, ast.Call) else exc
            name_text = (
                name.id if isinstance(name, ast.Name) else name.attr if isinstance(name, ast.Attribute) else "an error"
            )
            message = ""
            if isinstance(exc, ast.Call) and exc.args:
                arg = exc.args[0]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    message = f" with the message {speaker.literal(arg.value)}"
                elif isinstance(arg, ast.JoinedStr):
                    message = f" with the message {speaker.template(arg)}"
                if looks_like_code(message):
                    message = ""  # a message quoting code is left out, not the whole fact
            return f"it raises a {name_text}{message}"
        if isinstance(stmt, ast.Continue):
            return "that one is skipped"
        if isinstance(stmt, ast.Break):
            return "it stops going through the rest"
        if isinstance(stmt, ast.Pass):
            return "nothing happens"
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            call = stmt.value
            if isinstance(call.func, ast.Attribute) and call.args:
                owner, m = speaker.expr(call.func.value), call.func.attr
                arg = speaker.expr(call.args[0])
                if m in ("append", "add"):
                    return f"{arg} is added to {owner}"
                if m == "extend":
                    return f"the items of {arg} are added to {owner}"
                if m in ("remove", "discard"):
                    return f"{arg} is removed from {owner}"
                if m == "update":
                    return f"{owner} is updated with {arg}"
            if isinstance(call.func, ast.Name) and call.func.id == "print":
                return ""
            return ""
        if isinstance(stmt, (ast.For, ast.AsyncFor)):
            return f"it goes through each {speaker.bare(stmt.target)} in {speaker.expr(stmt.iter)}"
        return ""

    def _short_result(self, value, speaker: Speaker) -> str:
        if isinstance(value, ast.Dict) and value.keys and len(speaker.expr(value)) > 140:
            keys = [speaker.expr(k) for k in value.keys if k is not None]
            return f"a dictionary with the keys {join_words(keys)}"
        return speaker.expr(value)


def changed_names(stmts) -> list[str]:
    """Variables a block sets, adds to or updates (not descending into nested blocks)."""
    names = []
    for stmt in stmts:
        targets = []
        if isinstance(stmt, ast.Assign):
            targets = stmt.targets
        elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
            targets = [stmt.target]
        elif (
            isinstance(stmt, ast.Expr)
            and isinstance(stmt.value, ast.Call)
            and isinstance(stmt.value.func, ast.Attribute)
        ):
            targets = [stmt.value.func.value]
        for t in targets:
            while isinstance(t, (ast.Subscript, ast.Attribute)):
                t = t.value
            if isinstance(t, ast.Name) and t.id not in names:
                names.append(t.id)
    return names


def rounding_calls(node):
    return [n for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, (ast.Name, ast.Attribute))
            and (n.func.id if isinstance(n.func, ast.Name) else n.func.attr) in ("round", "floor", "ceil")]


def constant_text(speaker: Speaker, name: str, value: ast.AST) -> str:
    """A named constant; a dictionary of constants reads as a table."""
    if isinstance(value, ast.Dict) and value.keys and all(k is not None for k in value.keys):
        pairs = [f"{speaker.expr(k)} is {speaker.expr(v)}" for k, v in zip(value.keys, value.values)]
        text = f"{speaker.name(name)} table: {join_words(pairs)}"
        if len(text) <= 330:
            return text
    return f"{speaker.name(name)} is {speaker.expr(value)}"


def walk_function(fn):
    """ast.walk over a function without descending into nested functions or classes."""
    stack = list(fn.body)
    while stack:
        node = stack.pop(0)
        yield node
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                stack.append(child)


def edge_topics(tests) -> set[str]:
    topics = set()
    for test in tests:
        for n in ast.walk(test):
            if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not):
                topics |= {"empty", "missing", "none"}
            elif isinstance(n, ast.Compare):
                for op, right in zip(n.ops, n.comparators):
                    if isinstance(right, ast.Constant):
                        if right.value is None:
                            topics |= {"none", "missing"}
                        elif right.value == 0 and isinstance(op, (ast.Lt, ast.LtE)):
                            topics |= {"negative", "zero"}
                        elif right.value == 0:
                            topics |= {"zero", "empty"}
                        elif right.value == "":
                            topics |= {"empty"}
            elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "isinstance":
                topics |= {"type", "invalid"}
    return topics


def kind_word(kind: str) -> str:
    return {"a dictionary": "dict", "a list": "list", "text": "text", "a number": "number"}.get(kind, "input")


def most_common(items: list[str]) -> str:
    if not items:
        return ""
    counts: dict[str, int] = {}
    for item in items:
        counts[item] = counts.get(item, 0) + 1
    return max(counts, key=lambda k: (counts[k], -items.index(k)))


def add_unique(items: list[str], item: str) -> None:
    if item not in items:
        items.append(item)
