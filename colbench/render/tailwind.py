"""Only the Tailwind rules a page uses, cut from the full prebuilt stylesheet.

The full ``tailwind.min.css`` is 2.9 MB; Chromium parses it again on every navigation,
which is about a third of a render (~0.15 s of ~0.5 s here). Tailwind's own answer is
"purging": keep only the rules whose classes occur in the page. We do the same, in
Python, against the stylesheet parsed once per process:

- a rule is kept when, for at least one of its comma-separated selectors, every class the
  selector names occurs in the page's ``class`` attributes (so ``.group:hover
  .group-hover\\:text-white`` needs both ``group`` and ``group-hover:text-white``);
- rules naming no class (the preflight reset, ``*`` custom-property defaults) are kept;
- ``@media`` blocks are filtered the same way inside; other at-rules (``@keyframes``)
  are kept whole; original order is kept, so the cascade is unchanged.

Classes that only scripts add at run time are not seen; ``Renderer(purge=False)`` links
the full stylesheet instead. A test renders pages both ways and compares the pixels.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

_COMMENT = re.compile(r"/\*.*?\*/", re.DOTALL)
# A class in a selector: "." then an identifier with CSS escapes ("\:" "\/" "\." "\32 ").
_SELECTOR_CLASS = re.compile(r"\.((?:\\[0-9a-fA-F]{1,6}\s?|\\.|[\w-])+)")
_HEX_ESCAPE = re.compile(r"\\([0-9a-fA-F]{1,6})\s?")
_CHAR_ESCAPE = re.compile(r"\\(.)")
_CLASS_ATTR = re.compile(r"\bclass\s*=\s*(?:\"([^\"]*)\"|'([^']*)'|([^\s>]+))", re.IGNORECASE)


def _unescape(ident: str) -> str:
    ident = _HEX_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), ident)
    return _CHAR_ESCAPE.sub(lambda m: m.group(1), ident)


def _blocks(css: str) -> list[tuple[str, str]]:
    """Top-level ``prelude{body}`` pairs, braces matched, quotes respected."""
    out, depth, start, body_start, quote = [], 0, 0, 0, ""
    for i, ch in enumerate(css):
        if quote:
            if ch == quote and css[i - 1] != "\\":
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch == "{":
            if depth == 0:
                body_start = i
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                out.append((css[start:body_start].strip(), css[body_start + 1:i]))
                start = i + 1
    return out


@dataclass
class _Rule:
    text: str
    needs: list[frozenset[str]] | None  # per selector: the classes it needs; None = always keep
    children: list["_Rule"] | None = None  # rules inside an @media block
    prelude: str = ""

    def wanted(self, classes: set[str]) -> bool:
        return self.needs is None or any(need <= classes for need in self.needs)


def _rule(prelude: str, body: str) -> _Rule:
    if prelude.startswith("@media"):
        children = [_rule(p, b) for p, b in _blocks(body)]
        return _Rule(text="", needs=None, children=children, prelude=prelude)
    text = f"{prelude}{{{body}}}"
    if prelude.startswith("@"):
        return _Rule(text=text, needs=None)
    needs = [frozenset(_unescape(c) for c in _SELECTOR_CLASS.findall(part)) for part in prelude.split(",")]
    if any(not need for need in needs):
        return _Rule(text=text, needs=None)  # some selector needs no class: always applies
    return _Rule(text=text, needs=needs)


@lru_cache(maxsize=2)
def _parsed(path: str, mtime: float) -> list[_Rule]:
    css = _COMMENT.sub("", Path(path).read_text(encoding="utf-8"))
    return [_rule(prelude, body) for prelude, body in _blocks(css)]


def page_classes(html: str) -> set[str]:
    classes: set[str] = set()
    for match in _CLASS_ATTR.finditer(html):
        classes.update(next(g for g in match.groups() if g is not None).split())
    return classes


def purged_css(html: str, stylesheet: Path) -> str:
    """The stylesheet's rules that can apply to ``html``, in their original order."""
    rules = _parsed(str(stylesheet), stylesheet.stat().st_mtime)
    classes = page_classes(html)
    out: list[str] = []
    for rule in rules:
        if rule.children is not None:
            inner = "".join(child.text for child in rule.children if child.wanted(classes))
            if inner:
                out.append(f"{rule.prelude}{{{inner}}}")
        elif rule.wanted(classes):
            out.append(rule.text)
    return "".join(out)
