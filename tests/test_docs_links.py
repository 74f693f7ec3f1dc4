"""The documentation holds together: every relative link in README.md, docs/*.md and the studies'
READMEs reaches an existing file (and, for `#anchor` links into markdown, a heading of it, slugged
as GitHub slugs headings); the README is a front door of at most 300 lines that links every page;
each docs page opens with a one-line title and a sentence on what it covers."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README_MAX_LINES = 300

FENCE = re.compile(r"^(`{3,}|~{3,})")
INLINE_CODE = re.compile(r"(`+).+?\1")
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")
EXTERNAL = ("http://", "https://", "mailto:")


def markdown_pages() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted(REPO.glob("studies/*/README.md"))]


def prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks (whose brackets and hashes are code, not links or headings)."""
    lines, fence = [], None
    for line in text.splitlines():
        opened = FENCE.match(line.lstrip())
        if fence is None and opened:
            fence = opened.group(1)[0] * 3
        elif fence is not None and line.lstrip().startswith(fence):
            fence = None
        elif fence is None:
            lines.append(line)
    return lines


def links(text: str) -> list[str]:
    """Every link target of a markdown text, outside code blocks and code spans."""
    return [target for line in prose_lines(text) for target in LINK.findall(INLINE_CODE.sub("", line))]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup and punctuation dropped (but '-' and '_'), lowercase, spaces to '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading keeps its text
    text = re.sub(r"<[^>]+>", "", text).lower()
    text = "".join(ch for ch in text if ch.isalnum() or ch in " -_")
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors of a markdown file's headings; a repeated heading's are slug-1, slug-2, ... as on GitHub."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for line in prose_lines(path.read_text(encoding="utf-8")):
        heading = HEADING.match(line)
        if heading:
            base = slug(heading.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(page: Path) -> list[str]:
    """What is wrong with each relative link of ``page``: a missing file, or an anchor no heading has."""
    problems = []
    for target in links(page.read_text(encoding="utf-8")):
        if target.startswith(EXTERNAL):
            continue
        path_part, _, anchor = target.partition("#")
        linked = (page.parent / path_part).resolve() if path_part else page
        if not linked.exists():
            problems.append(f"{target}: no such file {linked}")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            problems.append(f"{target}: {linked.name} has no heading with anchor #{anchor}")
    return problems


def test_the_slugs_follow_githubs_rules():
    assert slug("Runs: name them, compare them, watch them, share them") == (
        "runs-name-them-compare-them-watch-them-share-them"
    )
    assert slug("`make demo`") == "make-demo"
    assert slug("The study on the embedded model, on a CPU") == "the-study-on-the-embedded-model-on-a-cpu"
    assert slug("What `--shard full` does") == "what---shard-full-does"
    assert slug("Memory per GPU, 8B, 8 GPUs") == "memory-per-gpu-8b-8-gpus"
    assert slug("snake_case and [a link](x.md)") == "snake_case-and-a-link"


def test_a_broken_link_or_anchor_is_found(tmp_path):
    """The check itself: a link to a missing file, or to a heading that is not there, is reported;
    external links, code and good links are not."""
    (tmp_path / "other.md").write_text("# Other page\n\n## A section: with punctuation\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n## Here\n\n"
        "[fine](other.md) [fine too](other.md#a-section-with-punctuation) [here](#here)\n"
        "[web](https://example.org/x) [mail](mailto:someone@example.org)\n"
        "[gone](missing.md) [no heading](other.md#nowhere) [not here](#elsewhere)\n"
        "`[in code](missing-too.md)`\n\n```\n[in a block](missing-three.md)\n```\n",
        encoding="utf-8",
    )
    problems = broken_links(page)
    assert len(problems) == 3, problems
    assert problems[0].startswith("missing.md: no such file")
    assert problems[1].startswith("other.md#nowhere:") and problems[2].startswith("#elsewhere:")


@pytest.mark.parametrize("page", markdown_pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page):
    assert broken_links(page) == []


def test_the_readme_is_a_front_door_that_links_every_page():
    readme = REPO / "README.md"
    lines = readme.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines, at most {README_MAX_LINES}"
    linked = {(REPO / target.partition("#")[0]).resolve() for target in links(readme.read_text(encoding="utf-8"))
              if not target.startswith(EXTERNAL) and not target.startswith("#")}
    pages = [*sorted((REPO / "docs").glob("*.md")), *sorted(REPO.glob("studies/*/README.md"))]
    assert [str(p.relative_to(REPO)) for p in pages if p.resolve() not in linked] == []


@pytest.mark.parametrize("page", sorted((REPO / "docs").glob("*.md")), ids=lambda p: p.name)
def test_each_docs_page_opens_with_a_title_and_what_it_covers(page):
    title, blank, sentence, *_ = page.read_text(encoding="utf-8").splitlines()
    assert title.startswith("# ") and len(title) > 2 and blank == "" and sentence and not sentence.startswith("#")
