"""docs/plugins.md is run by the suite: each code block it marks with a file (`<!-- file: PATH -->`) is that file of
the test plugin packages, which tests/test_plugins.py runs end to end and tests/test_families.py holds to the family
contract; its pyproject.toml block declares the entry points the arith-chat package's dist-info carries; and every
module and tasks file of that package is in the guide."""
from __future__ import annotations

import configparser
import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GUIDE = REPO / "docs" / "plugins.md"
PACKAGE = REPO / "tests" / "plugin_package" / "colbench_arith_chat"
MARKED = re.compile(r"<!-- (file|entry points): (\S+) -->\n```\w*\n(.*?)```", re.DOTALL)


def marked_blocks() -> list[tuple[str, str, str]]:
    return MARKED.findall(GUIDE.read_text())


def test_every_marked_block_is_its_file():
    blocks = [(path, code) for kind, path, code in marked_blocks() if kind == "file"]
    assert len(blocks) >= 5
    for path, code in blocks:
        assert code == (REPO / path).read_text(), f"docs/plugins.md's block for {path} differs from the file"


def test_the_guide_shows_the_whole_family_package():
    shown = {path for kind, path, _ in marked_blocks() if kind == "file"}
    files = {str(p.relative_to(REPO)) for p in PACKAGE.iterdir() if p.suffix in (".py", ".jsonl")}
    assert files - {str((PACKAGE / "__init__.py").relative_to(REPO))} <= shown


def test_the_pyproject_block_declares_the_installed_entry_points():
    [(path, code)] = [(path, code) for kind, path, code in marked_blocks() if kind == "entry points"]
    declared = {group.removeprefix("colbench."): points for group, points in
                tomllib.loads(code)["project"]["entry-points"].items()}
    installed = configparser.ConfigParser()
    installed.optionxform = str  # entry-point names keep their case
    installed.read_string((REPO / path).read_text())
    assert declared == {group.removeprefix("colbench."): dict(installed[group]) for group in installed.sections()}
    assert set(declared) == {"families", "engines"}  # a family graded by tests, and its engine: two entry points
