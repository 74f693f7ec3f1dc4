"""Make a page renderable offline: local Tailwind, local placeholder images, a full document.

Frontend pages (WebSight's and the agents') load Tailwind from a CDN and pictures from
the web. Neither is reachable here or on most clusters, and an unstyled page looks
nothing like the reference, so before rendering we:

- replace every Tailwind CDN ``<link>``/``<script>`` with the prebuilt stylesheet that
  ``scripts/setup.sh`` installs (npm ``tailwindcss@2.2.19``, the full
  ``dist/tailwind.min.css``; WebSight pages link exactly this release): by default only
  the rules the page's classes use, inlined (``tailwind.py``; same pixels, less parsing),
  or with ``purge=False`` a ``file:`` link to the whole file;
- add that link when a page uses Tailwind-looking classes but loads no Tailwind at all
  (agents often forget the tag; the reference pages never do, so a missing tag would
  otherwise cost a reward for something a person never sees);
- point every picture (``img``/``source``/``video poster``/``input type=image`` sources,
  ``srcset`` candidates, ``url(...)`` in styles) that is not a ``data:`` URL at ONE local
  placeholder, as the paper's data does with its fixed placeholder picture;
- wrap ``<body>``-only snippets and bare fragments into a document, with a UTF-8 charset
  (the page is loaded from a file, where Chromium would otherwise guess the encoding).

This is text rewriting with regular expressions, not an HTML parser: it must accept any
garbage an agent writes, and the browser does the real parsing afterwards.
"""
from __future__ import annotations

from colbench.errors import ColbenchError

import os
import re
from functools import lru_cache
from pathlib import Path

ASSETS = Path(__file__).resolve().parent / "assets"
TAILWIND_VERSION = "2.2.19"  # keep in step with assets/package.json
TAILWIND_ENV = "COLBENCH_TAILWIND_CSS"  # an explicit stylesheet path wins over the installed one


class TailwindMissing(ColbenchError, RuntimeError):
    pass


def tailwind_css_path() -> Path:
    """The local Tailwind stylesheet, or a clear error saying how to install it."""
    explicit = os.environ.get(TAILWIND_ENV)
    candidates = [Path(explicit)] if explicit else []
    candidates.append(ASSETS / "tailwind.min.css")
    for path in candidates:
        if path.is_file():
            return path
    raise TailwindMissing(
        f"no local Tailwind stylesheet at {candidates[-1]}: run scripts/setup.sh "
        f"(it installs npm tailwindcss@{TAILWIND_VERSION}) or set {TAILWIND_ENV}"
    )


def placeholder_path() -> Path:
    """The one picture every external image becomes (a grey box, shipped as package data)."""
    return ASSETS / "placeholder.png"


@lru_cache(maxsize=None)
def _file_url(path: str) -> str:
    return Path(path).resolve().as_uri()


def tailwind_url() -> str:
    return _file_url(str(tailwind_css_path()))


def placeholder_url() -> str:
    return _file_url(str(placeholder_path()))


# -- Tailwind tags ------------------------------------------------------------------------

# Any <link> or <script> whose URL names tailwind (cdn.tailwindcss.com, jsdelivr/unpkg/cdnjs
# "tailwindcss@x/dist/tailwind.min.css", "tailwind.min.css" under any host). A script
# element's closing tag goes too, so the play-CDN script leaves nothing behind.
_TAILWIND_SCRIPT = re.compile(
    r"<script\b[^>]*\bsrc\s*=\s*[\"']?[^\"'>\s]*tailwind[^\"'>\s]*[\"']?[^>]*>\s*(?:</script\s*>)?",
    re.IGNORECASE,
)
_TAILWIND_LINK = re.compile(
    r"<link\b[^>]*\bhref\s*=\s*[\"']?[^\"'>\s]*tailwind[^\"'>\s]*[\"']?[^>]*>", re.IGNORECASE
)
_CLASS_ATTR = re.compile(r"\bclass\s*=\s*(?:\"([^\"]*)\"|'([^']*)'|([^\s>]+))", re.IGNORECASE)
# Utility classes common enough that a page using any of them is a Tailwind page.
_TAILWIND_CLASS = re.compile(
    r"^(?:[a-z]+:)*-?(?:"
    r"(?:bg|text|border|from|to|via|ring|divide|placeholder)-(?:[a-z]+-\d{2,3}|white|black|transparent)"
    r"|[mp][trblxy]?-\d+(?:\.5)?|[mp][trblxy]?-auto|space-[xy]-\d+|gap(?:-[xy])?-\d+"
    r"|[wh]-(?:\d+|full|screen|auto|\d/\d+)|max-w-\w+|min-h-\w+"
    r"|flex|inline-flex|grid|grid-cols-\d+|col-span-\d+|items-\w+|justify-\w+|container"
    r"|rounded(?:-\w+)?|shadow(?:-\w+)?|font-(?:bold|semibold|medium|light|sans|serif|mono)"
    r"|text-(?:xs|sm|base|lg|[2-9]?xl|center|left|right)|uppercase|tracking-\w+|leading-\w+"
    r")$"
)


def uses_tailwind_classes(html: str, threshold: int = 2) -> bool:
    """True when at least ``threshold`` class tokens look like Tailwind utilities."""
    hits = 0
    for match in _CLASS_ATTR.finditer(html):
        value = next(g for g in match.groups() if g is not None)
        for token in value.split():
            if _TAILWIND_CLASS.match(token):
                hits += 1
                if hits >= threshold:
                    return True
    return False


# -- pictures -----------------------------------------------------------------------------

_PICTURE_TAGS = r"img|source|image|input|video|picture|track"
# src / poster / href (svg <image href>) attributes of picture-ish tags.
_PICTURE_ATTR = re.compile(
    r"(<(?:" + _PICTURE_TAGS + r")\b[^>]*?\b(?:src|poster|href|xlink:href|data-src)\s*=\s*)"
    r"(\"[^\"]*\"|'[^']*'|[^\s>]+)",
    re.IGNORECASE,
)
_SRCSET_ATTR = re.compile(r"(\bsrcset\s*=\s*)(\"[^\"]*\"|'[^']*'|[^\s>]+)", re.IGNORECASE)
_CSS_URL = re.compile(r"url\(\s*([\"']?)([^\"')]*)\1\s*\)", re.IGNORECASE)
# HTML-escaped quotes inside style attributes: url(&quot;https://...&quot;)
_CSS_URL_ESCAPED = re.compile(r"url\(\s*&quot;(.*?)&quot;\s*\)", re.IGNORECASE)


def _is_local(url: str) -> bool:
    url = url.strip().lower()
    return url.startswith("data:") or url == "" or url.startswith("#")


def _is_external(url: str) -> bool:
    url = url.strip().lower()
    return url.startswith(("http://", "https://", "//"))


def _rewrite_picture_attr(match: re.Match) -> str:
    prefix, raw = match.group(1), match.group(2)
    value = raw.strip("\"'")
    # A <source>/<track> inside <video>/<audio> is not a picture, but pointing it at a PNG
    # is harmless: it simply fails to play, as it would offline anyway.
    if _is_local(value):
        return match.group(0)
    return f'{prefix}"{placeholder_url()}"'


def _rewrite_srcset(match: re.Match) -> str:
    prefix, raw = match.group(1), match.group(2)
    parts = []
    for candidate in raw.strip("\"'").split(","):
        bits = candidate.strip().split()
        if not bits:
            continue
        if not _is_local(bits[0]):
            bits[0] = placeholder_url()
        parts.append(" ".join(bits))
    return f'{prefix}"{", ".join(parts)}"'


def _rewrite_css_url(match: re.Match) -> str:
    quote, url = match.group(1), match.group(2)
    if not _is_external(url):
        return match.group(0)
    return f"url({quote}{placeholder_url()}{quote})"


def _rewrite_css_url_escaped(match: re.Match) -> str:
    if not _is_external(match.group(1)):
        return match.group(0)
    return f"url(&quot;{placeholder_url()}&quot;)"


# -- document shape -----------------------------------------------------------------------

_HAS_HTML = re.compile(r"<html\b", re.IGNORECASE)
_HAS_BODY = re.compile(r"<body\b", re.IGNORECASE)
_HEAD_OPEN = re.compile(r"<head\b[^>]*>", re.IGNORECASE)
_HTML_OPEN = re.compile(r"<html\b[^>]*>", re.IGNORECASE)
_HAS_CHARSET = re.compile(r"<meta\b[^>]*charset", re.IGNORECASE)
_ANY_TAG = re.compile(r"<[a-zA-Z!/]")


def looks_like_html(html: str) -> bool:
    """At least one tag: plain prose or an empty string is not a page."""
    return bool(html and html.strip() and _ANY_TAG.search(html))


def _as_document(html: str) -> str:
    if _HAS_HTML.search(html):
        return html
    if _HAS_BODY.search(html):
        return f"<!DOCTYPE html>\n<html><head></head>\n{html}\n</html>"
    return f"<!DOCTYPE html>\n<html><head></head><body>\n{html}\n</body></html>"


def _insert_in_head(html: str, tags: str) -> str:
    head = _HEAD_OPEN.search(html)
    if head:
        return html[: head.end()] + tags + html[head.end():]
    opening = _HTML_OPEN.search(html)
    if opening:
        return html[: opening.end()] + f"<head>{tags}</head>" + html[opening.end():]
    return f"<head>{tags}</head>" + html


def tailwind_tag(page: str, purge: bool = True) -> str:
    """The page's Tailwind: its rules inlined (``purge``, see ``tailwind.py``) or a link to all."""
    if not purge:
        return f'<link rel="stylesheet" href="{tailwind_url()}">'
    from colbench.render.tailwind import purged_css

    return f'<style data-colbench="tailwind {TAILWIND_VERSION}">{purged_css(page, tailwind_css_path())}</style>'


def prepare_html(html: str, *, purge: bool = True) -> str:
    """The page as we render it: offline Tailwind, placeholder pictures, a whole document.

    ``purge``: inline only the Tailwind rules the page's classes use (fast, the default)
    rather than link the whole 2.9 MB stylesheet."""
    page = _as_document(html)
    had_tailwind = bool(_TAILWIND_SCRIPT.search(page) or _TAILWIND_LINK.search(page))
    page = _TAILWIND_SCRIPT.sub("", page)
    page = _TAILWIND_LINK.sub("", page)
    page = _PICTURE_ATTR.sub(_rewrite_picture_attr, page)
    page = _SRCSET_ATTR.sub(_rewrite_srcset, page)
    page = _CSS_URL.sub(_rewrite_css_url, page)
    page = _CSS_URL_ESCAPED.sub(_rewrite_css_url_escaped, page)
    head_tags = "" if _HAS_CHARSET.search(page) else '<meta charset="utf-8">'
    if had_tailwind or uses_tailwind_classes(page):
        # First in <head>, where the CDN tag normally sits, so page styles still override it.
        head_tags += tailwind_tag(page, purge)
    return _insert_in_head(page, head_tags) if head_tags else page
