"""Python expressions put into plain English, for the built-in simulated human.

``Speaker`` renders comparisons, arithmetic, calls, subscripts and literals as phrases
("when amount is above 1000", "the 'price' entry of the item"), never as code;
``looks_like_code`` is the last guard on every sentence the simulator says.
"""
from __future__ import annotations

import ast
import re

def split_identifier(name: str) -> list[str]:
    """``maxSpeed_kmh`` → ["max", "speed", "kmh"]."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name.strip("_"))
    return [w.lower() for w in re.split(r"[_\s]+", spaced) if w]


_CODE = re.compile(
    r"\bdef\s|\breturn\s|\blambda\b|```|>>>"  # keywords and fences
    r"|[=!<>+\-*/%]="  # comparison and augmented operators
    r"|\b\w+\s*=\s*\S"  # assignment
    r"|[A-Za-z_]\(|\w\[",  # calls and subscripts
    re.IGNORECASE,
)


def looks_like_code(text: str) -> bool:
    """Guard for every sentence we emit: the simulator never writes code. A fact that
    trips it (say, an error message quoting a call) is dropped rather than said."""
    return _CODE.search(text) is not None


# --------------------------------------------------------------------------------------
# Expressions into English
# --------------------------------------------------------------------------------------

ORDINALS = ["first", "second", "third", "fourth", "fifth"]
BINOPS = {
    ast.Add: ("plus", 1), ast.Sub: ("minus", 1), ast.Mult: ("times", 2), ast.Div: ("divided by", 2),
    ast.FloorDiv: ("divided by (whole part only)", 2), ast.Mod: ("modulo", 2), ast.Pow: ("to the power of", 3),
}
COMPARE = {
    ast.Gt: "is above", ast.GtE: "is at least", ast.Lt: "is below", ast.LtE: "is at most",
    ast.Eq: "is", ast.NotEq: "is not", ast.In: "is in", ast.NotIn: "is not in",
    ast.Is: "is", ast.IsNot: "is not",
}
NEGATED = {ast.Gt: ast.LtE, ast.GtE: ast.Lt, ast.Lt: ast.GtE, ast.LtE: ast.Gt, ast.Eq: ast.NotEq,
           ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is}
TYPE_WORDS = {"int": "a whole number", "float": "a number", "str": "text", "list": "a list", "dict": "a dictionary",
              "tuple": "a tuple", "bool": "True or False", "set": "a set", "complex": "a complex number"}
SIMPLE_CALLS = {
    "len": "the length of {0}", "sum": "the sum of {0}", "abs": "the absolute value of {0}",
    "sorted": "{0} sorted", "reversed": "{0} reversed", "set": "the distinct items of {0}",
    "list": "{0} as a list", "str": "{0} as text", "float": "{0} as a decimal number",
    "int": "{0} as a whole number (cut down)", "bool": "whether {0} is truthy", "tuple": "{0} as a tuple",
    "any": "whether any of {0} holds", "all": "whether all of {0} hold", "enumerate": "{0} with positions",
    "sqrt": "the square root of {0}", "exp": "e to the power of {0}", "log": "the natural log of {0}",
    "log10": "the base-10 log of {0}", "floor": "{0} rounded down", "ceil": "{0} rounded up",
    "dict": "{0} as a dictionary", "type": "the type of {0}", "ord": "the character code of {0}",
    "chr": "the character with code {0}", "sin": "the sine of {0}", "cos": "the cosine of {0}",
    "fabs": "the absolute value of {0}", "mean": "the average of {0}", "median": "the median of {0}",
    "fsum": "the sum of {0}", "isqrt": "the whole square root of {0}", "factorial": "the factorial of {0}",
}
METHODS = {
    "lower": "{o} in lowercase", "upper": "{o} in uppercase", "strip": "{o} without surrounding spaces",
    "title": "{o} in title case", "capitalize": "{o} capitalised", "keys": "the keys of {o}",
    "values": "the values of {o}", "items": "the entries of {o}", "copy": "a copy of {o}",
    "isdigit": "{o} is all digits", "isalpha": "{o} is all letters", "isalnum": "{o} is letters and digits only",
    "isupper": "{o} is in uppercase", "islower": "{o} is in lowercase", "isspace": "{o} is blank",
    "lstrip": "{o} without leading spaces", "rstrip": "{o} without trailing spaces",
}
STR_METHODS = {"lower", "upper", "strip", "split", "startswith", "endswith", "replace", "isdigit", "isalpha",
               "isalnum", "isupper", "islower", "isspace", "title", "find", "format", "encode", "capitalize"}
BOOL_PREFIXES = ("is_", "has_", "can_", "should_", "use_", "allow_", "include_", "enable")


class Speaker:
    """Puts expressions of one function into words. ``params`` keep their names as is
    (they are in the signature the agent sees); other names become plain words."""

    def __init__(self, params: set[str] = frozenset(), flags: set[str] = frozenset()):
        self.params = set(params)
        self.flags = set(flags)  # names known to hold True/False (a boolean default)

    def is_flag(self, ident: str) -> bool:
        return ident in self.flags or ident.startswith(BOOL_PREFIXES)

    # -- names and literals --

    def name(self, ident: str) -> str:
        if ident in self.params or len(ident) <= 2:
            return ident
        return "the " + " ".join(split_identifier(ident))

    def literal(self, value) -> str:
        if isinstance(value, str):
            if value == "":
                return "an empty text"
            shown = value if len(value) <= 60 else value[:57] + "..."
            return "'" + shown.replace("\n", "\\n") + "'"
        if isinstance(value, float):
            return repr(value) if not value.is_integer() or abs(value) >= 1e16 else f"{value:.1f}"
        return repr(value)

    # -- expressions --

    def expr(self, node: ast.AST, depth: int = 0) -> str:
        if depth > 6:
            return self.vague(node)
        try:
            text = self._expr(node, depth)
        except Exception:  # noqa: BLE001 - unusual syntax falls back to a vaguer phrase
            text = None
        if text is None or len(text) > 200:
            return self.vague(node)
        return text

    def vague(self, node: ast.AST) -> str:
        names = []
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and sub.id not in names and sub.id not in ("True", "False", "None"):
                names.append(sub.id)
        if not names:
            return "a computed value"
        shown = [self.name(n) for n in names[:3]]
        return "a value computed from " + join_words(shown)

    def _expr(self, node: ast.AST, depth: int) -> str | None:
        e = lambda n: self.expr(n, depth + 1)  # noqa: E731
        if isinstance(node, ast.Constant):
            return self.literal(node.value)
        if isinstance(node, ast.Name):
            return self.name(node.id)
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id == "math":
                return {"pi": "pi", "e": "e", "inf": "infinity", "tau": "tau"}.get(node.attr, node.attr)
            if isinstance(node.value, ast.Name) and node.value.id == "self":
                return self.name(node.attr)
            return f"the {' '.join(split_identifier(node.attr))} of {e(node.value)}"
        if isinstance(node, ast.BinOp):
            return self._binop(node, depth)
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.USub):
                if isinstance(node.operand, ast.Constant):
                    return "-" + self.literal(node.operand.value)
                return "minus " + e(node.operand)
            if isinstance(node.op, ast.Not):
                return self.negate(node.operand, depth + 1)
            return e(node.operand)
        if isinstance(node, (ast.BoolOp, ast.Compare)):
            return self.cond(node, depth)
        if isinstance(node, ast.Call):
            return self._call(node, depth)
        if isinstance(node, ast.Subscript):
            return self._subscript(node, depth)
        if isinstance(node, ast.IfExp):
            return f"{e(node.body)} when {self.cond(node.test, depth + 1)}, otherwise {e(node.orelse)}"
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            return self._sequence(node, depth)
        if isinstance(node, ast.Dict):
            return self._dict(node, depth)
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
            head = {ast.ListComp: "a list of ", ast.SetComp: "the set of ", ast.GeneratorExp: ""}[type(node)]
            return head + e(node.elt) + self._generators(node.generators, depth)
        if isinstance(node, ast.DictComp):
            return f"a dictionary mapping {e(node.key)} to {e(node.value)}" + self._generators(node.generators, depth)
        if isinstance(node, ast.JoinedStr):
            return "the text " + self.template(node)
        if isinstance(node, ast.Lambda):
            return e(node.body)
        if isinstance(node, ast.Starred):
            return e(node.value)
        return None

    def _binop(self, node: ast.BinOp, depth: int) -> str:
        if isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant) and isinstance(node.left.value, str):
            return f"the text {self.literal(node.left.value)} filled in with {self.expr(node.right, depth + 1)}"
        if isinstance(node.op, ast.Pow) and isinstance(node.right, ast.Constant) and node.right.value == 0.5:
            return f"the square root of {self.expr(node.left, depth + 1)}"
        if isinstance(node.op, ast.Pow) and isinstance(node.right, ast.Constant) and node.right.value == 2:
            return f"{self._operand(node.left, 3, depth)} squared"
        word, level = BINOPS.get(type(node.op), ("combined with", 1))
        return f"{self._operand(node.left, level, depth)} {word} {self._operand(node.right, level + 0.5, depth)}"

    def _operand(self, node: ast.AST, level: float, depth: int) -> str:
        text = self.expr(node, depth + 1)
        if isinstance(node, ast.BinOp) and BINOPS.get(type(node.op), ("", 1))[1] < level:
            return f"({text})"
        return text

    def _call(self, node: ast.Call, depth: int) -> str | None:
        e = lambda n: self.expr(n, depth + 1)  # noqa: E731
        args = node.args
        func = node.func
        fname = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        kwargs = {k.arg: k.value for k in node.keywords if k.arg}
        if fname == "round" and args:
            digits = args[1] if len(args) > 1 else kwargs.get("ndigits")
            value = e(args[0])
            if isinstance(args[0], (ast.BinOp, ast.IfExp)):
                value = f"({value})"
            if digits is None or (isinstance(digits, ast.Constant) and digits.value == 0):
                return f"{value} rounded to a whole number"
            if isinstance(digits, ast.Constant):
                places = digits.value
                return f"{value} rounded to {places} decimal place{'s' if places != 1 else ''}"
            return f"{value} rounded to {e(digits)} decimal places"
        if fname in ("max", "min") and len(args) >= 2:
            word = "larger" if fname == "max" else "smaller"
            return f"the {word} of {join_words([e(a) for a in args])}"
        if fname in ("max", "min") and len(args) == 1:
            word = "largest" if fname == "max" else "smallest"
            key = kwargs.get("key")
            by = f" by {e(key)}" if key is not None else ""
            return f"the {word} of {e(args[0])}{by}"
        if fname == "sorted" and args:
            text = f"{e(args[0])} sorted"
            if "key" in kwargs:
                text += f" by {e(kwargs['key'])}"
            if isinstance(kwargs.get("reverse"), ast.Constant) and kwargs["reverse"].value:
                text += " from largest to smallest"
            return text
        if fname in ("any", "all") and len(args) == 1 and isinstance(args[0], ast.GeneratorExp) \
                and len(args[0].generators) == 1 and not args[0].generators[0].ifs:
            gen = args[0].generators[0]
            which = "some" if fname == "any" else "every"
            return f"whether {self.cond(args[0].elt, depth + 1)} for {which} {self.bare(gen.target)} in {e(gen.iter)}"
        if fname == "isinstance" and len(args) == 2:
            return f"{e(args[0])} is {self._type_name(args[1])}"
        if fname == "range" and args:
            if len(args) == 1:
                return f"the numbers from 0 up to {e(args[0])} (not included)"
            return f"the numbers from {e(args[0])} up to {e(args[1])} (not included)"
        if fname == "zip" and args:
            return join_words([e(a) for a in args]) + " taken in pairs"
        if fname == "pow" and len(args) >= 2:
            return f"{e(args[0])} to the power of {e(args[1])}"
        if isinstance(func, ast.Attribute):
            owner = func.value
            if isinstance(owner, ast.Name) and owner.id in ("math", "statistics", "np", "numpy"):
                template = SIMPLE_CALLS.get(fname)
                if template and args:
                    return template.format(join_words([e(a) for a in args]))
            if fname == "get" and args:
                default = f" ({e(args[1])} when missing)" if len(args) > 1 else ""
                key = e(args[0])
                return f"{key if key.startswith('the ') else 'the ' + key} entry of {e(owner)}{default}"
            if fname == "join" and args:
                return f"{e(args[0])} joined with {e(owner)}"
            if fname == "format" and isinstance(owner, ast.Constant):
                return f"the text {self.literal(owner.value)} filled in with {join_words([e(a) for a in args])}"
            if fname == "split":
                sep = f" on {e(args[0])}" if args else " into words"
                return f"{e(owner)} split{sep}"
            if fname == "replace" and len(args) >= 2:
                return f"{e(owner)} with {e(args[0])} replaced by {e(args[1])}"
            if fname in ("startswith", "endswith") and args:
                return f"{e(owner)} {'starts' if fname == 'startswith' else 'ends'} with {e(args[0])}"
            if fname == "count" and args:
                return f"the number of times {e(args[0])} appears in {e(owner)}"
            if fname in METHODS:
                return METHODS[fname].format(o=e(owner))
            return f"the {' '.join(split_identifier(fname))} of {e(owner)}" + (
                f" for {join_words([e(a) for a in args])}" if args else ""
            )
        if fname in SIMPLE_CALLS and SIMPLE_CALLS[fname] and args:
            return SIMPLE_CALLS[fname].format(e(args[0]))
        if fname:
            words = " ".join(split_identifier(fname))
            if fname[:1].isupper():  # a class: building an object
                return f"a new {words}" + (f" from {join_words([e(a) for a in args])}" if args else "")
            return f"the result of {words}" + (f" for {join_words([e(a) for a in args])}" if args else "")
        return None

    def _type_name(self, node: ast.AST) -> str:
        if isinstance(node, ast.Name):
            return TYPE_WORDS.get(node.id, "a " + " ".join(split_identifier(node.id)))
        if isinstance(node, ast.Tuple):
            return " or ".join(self._type_name(elt) for elt in node.elts)
        return "of the right type"

    def _subscript(self, node: ast.Subscript, depth: int) -> str:
        owner = self.expr(node.value, depth + 1)
        index = node.slice
        if isinstance(index, ast.Constant):
            if isinstance(index.value, str):
                return f"the {self.literal(index.value)} entry of {owner}"
            if isinstance(index.value, int) and 0 <= index.value < len(ORDINALS):
                return f"the {ORDINALS[index.value]} item of {owner}"
        if (
            isinstance(index, ast.UnaryOp)
            and isinstance(index.op, ast.USub)
            and isinstance(index.operand, ast.Constant)
        ):
            return (
                "the last item of " + owner
                if index.operand.value == 1
                else f"item {-index.operand.value} from the end of {owner}"
            )
        if isinstance(index, ast.Slice):
            lo, hi, step = index.lower, index.upper, index.step
            if lo is None and hi is None and isinstance(step, ast.UnaryOp):
                return f"{owner} reversed"
            if lo is None and hi is not None:
                if isinstance(hi, ast.UnaryOp):
                    return f"{owner} without its last {self.expr(hi.operand, depth + 1)} items"
                return f"the first {self.expr(hi, depth + 1)} items of {owner}"
            if hi is None and lo is not None:
                if isinstance(lo, ast.UnaryOp):
                    return f"the last {self.expr(lo.operand, depth + 1)} items of {owner}"
                return f"{owner} from item {self.expr(lo, depth + 1)} on"
            return f"a slice of {owner}"
        key = self.expr(index, depth + 1)
        return f"{key if key.startswith('the ') else 'the ' + key} entry of {owner}"

    def _sequence(self, node, depth: int) -> str:
        items = [self.expr(elt, depth + 1) for elt in node.elts]
        if not items:
            return {ast.List: "an empty list", ast.Tuple: "an empty tuple", ast.Set: "an empty set"}[type(node)]
        if isinstance(node, ast.Tuple):
            return ("a pair of " if len(items) == 2 else f"{len(items)} values: ") + join_words(items)
        kind = "a list of " if isinstance(node, ast.List) else "the set of "
        return kind + join_words(items)

    def _dict(self, node: ast.Dict, depth: int) -> str:
        if not node.keys:
            return "an empty dictionary"
        pairs = []
        for k, v in zip(node.keys, node.values):
            if k is None:
                pairs.append(f"everything in {self.expr(v, depth + 1)}")
            else:
                pairs.append(f"{self.expr(k, depth + 1)} to {self.expr(v, depth + 1)}")
        text = "a dictionary mapping " + join_words(pairs)
        if len(text) > 200:
            keys = [self.expr(k, depth + 1) for k in node.keys if k is not None]
            text = "a dictionary with the keys " + join_words(keys)
        return text

    def bare(self, node: ast.AST) -> str:
        """A loop variable as a plain noun: "each item", not "each the item"."""
        if isinstance(node, ast.Name):
            return node.id if node.id in self.params or len(node.id) <= 2 else " ".join(split_identifier(node.id))
        if isinstance(node, ast.Tuple):
            return "pair of " + join_words([self.bare(e) for e in node.elts]) if len(node.elts) == 2 else \
                join_words([self.bare(e) for e in node.elts])
        return self.expr(node)

    def _generators(self, generators, depth: int) -> str:
        parts = []
        for gen in generators:
            parts.append(f" for each {self.bare(gen.target)} in {self.expr(gen.iter, depth + 1)}")
            for cond in gen.ifs:
                parts.append(f" where {self.cond(cond, depth + 1)}")
        return "".join(parts)

    def template(self, node: ast.JoinedStr) -> str:
        """An f-string as a text with its blanks described: 'Total: <the total, 2 decimals>'."""
        out = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                out.append(str(part.value))
            elif isinstance(part, ast.FormattedValue):
                inner = self.expr(part.value, 2)
                spec = format_spec_words(part.format_spec)
                out.append(f"<{inner}{', ' + spec if spec else ''}>")
        return "'" + "".join(out) + "'"

    # -- conditions --

    def cond(self, node: ast.AST, depth: int = 0) -> str:
        try:
            text = self._cond(node, depth)
        except Exception:  # noqa: BLE001
            text = None
        if text is None or len(text) > 200:
            return "a condition on " + self.vague(node).replace("a value computed from ", "")
        return text

    def _cond(self, node: ast.AST, depth: int) -> str | None:
        if isinstance(node, ast.BoolOp):
            word = " and " if isinstance(node.op, ast.And) else " or "
            return word.join(self.cond(v, depth + 1) for v in node.values)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return self.negate(node.operand, depth + 1)
        if isinstance(node, ast.Compare):
            return self._compare(node.left, node.ops, node.comparators, depth)
        if isinstance(node, ast.Name):
            return (
                f"{self.name(node.id)} is True" if self.is_flag(node.id) else f"{self.name(node.id)} is set (not empty)"
            )
        if isinstance(node, ast.Call):
            return self.expr(node, depth + 1)
        return f"{self.expr(node, depth + 1)} is not empty or zero"

    def _compare(self, left, ops, comparators, depth: int) -> str:
        e = lambda n: self.expr(n, depth + 1)  # noqa: E731
        # 0 < x < 10 reads better as a range.
        if len(ops) == 2 and all(isinstance(o, (ast.Lt, ast.LtE)) for o in ops):
            lo, mid, hi = left, comparators[0], comparators[1]
            bounds = "inclusive" if all(isinstance(o, ast.LtE) for o in ops) else (
                "exclusive" if all(isinstance(o, ast.Lt) for o in ops) else "")
            tail = f" ({bounds})" if bounds else (
                f" ({e(lo)} {'included' if isinstance(ops[0], ast.LtE) else 'excluded'}, {e(hi)}"
                f" {'included' if isinstance(ops[1], ast.LtE) else 'excluded'})"
            )
            return f"{e(mid)} is between {e(lo)} and {e(hi)}{tail}"
        parts = []
        current = left
        for op, right in zip(ops, comparators):
            parts.append(self._compare_one(current, op, right, depth))
            current = right
        return " and ".join(parts)

    def _compare_one(self, left, op, right, depth: int) -> str:
        e = lambda n: self.expr(n, depth + 1)  # noqa: E731
        # len(x) == 0 / len(x) > 0 → empty / not empty
        if isinstance(left, ast.Call) and isinstance(left.func, ast.Name) and left.func.id == "len" \
                and left.args and isinstance(right, ast.Constant) and right.value == 0:
            if isinstance(op, (ast.Eq, ast.LtE)):
                return f"{e(left.args[0])} is empty"
            if isinstance(op, (ast.Gt, ast.NotEq)):
                return f"{e(left.args[0])} is not empty"
        if isinstance(op, (ast.In, ast.NotIn)) and isinstance(right, (ast.List, ast.Tuple, ast.Set)):
            options = [e(x) for x in right.elts]
            word = "is one of" if isinstance(op, ast.In) else "is none of"
            return f"{e(left)} {word} {join_words(options, 'or' if isinstance(op, ast.In) else 'and')}"
        if (
            isinstance(op, (ast.Eq, ast.NotEq))
            and isinstance(right, ast.BinOp)
            and isinstance(right.op, ast.Mod)
            or isinstance(left, ast.BinOp)
            and isinstance(left.op, ast.Mod)
            and isinstance(right, ast.Constant)
            and right.value == 0
        ):
            if isinstance(left, ast.BinOp) and isinstance(left.op, ast.Mod):
                neg = "" if isinstance(op, ast.Eq) else " not"
                return f"{e(left.left)} is{neg} divisible by {e(left.right)}"
        return f"{e(left)} {COMPARE.get(type(op), 'compares to')} {e(right)}"

    def negate(self, node: ast.AST, depth: int = 0) -> str:
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in NEGATED:
            return self._compare_one(node.left, NEGATED[type(node.ops[0])](), node.comparators[0], depth)
        if isinstance(node, ast.Name):
            if self.is_flag(node.id):
                return f"{self.name(node.id)} is False"
            return f"{self.name(node.id)} is empty or missing"
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return self.cond(node.operand, depth)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance":
            return self.expr(node, depth).replace(" is ", " is not ", 1)
        if isinstance(node, (ast.Attribute, ast.Subscript)):
            return f"{self.expr(node, depth)} is empty or missing"
        return f"it is not the case that {self.cond(node, depth)}"


def format_spec_words(spec: ast.AST | None) -> str:
    if not isinstance(spec, ast.JoinedStr):
        return ""
    text = "".join(str(v.value) for v in spec.values if isinstance(v, ast.Constant))
    match = re.search(r"(,)?\.(\d+)([f%e])", text)
    if match:
        digits = match.group(2)
        pieces = [f"{digits} decimal{'s' if digits != '1' else ''}"]
        if match.group(3) == "%":
            pieces.append("as a percentage")
        if match.group(1):
            pieces.append("with thousands separators")
        return ", ".join(pieces)
    match = re.fullmatch(r"0(\d+)d", text)
    if match:
        return f"zero-padded to {match.group(1)} digits"
    if "," in text:
        return "with thousands separators"
    return f"formatted as {text!r}" if text else ""


def join_words(items: list[str], last: str = "and") -> str:
    items = [i for i in items if i]
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + f" {last} " + items[-1]
