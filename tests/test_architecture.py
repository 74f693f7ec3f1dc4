"""The house rules the code's shape depends on, checked on the source itself: the store is
the only place that speaks SQL, and no module imports another that imports it back."""
from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# Top-level folders and the package each is installed as (setup.py's package-dir).
PACKAGES = {"colbench": "colbench", "store": "colbench.store", "cli": "colbench.cli", "migrations": "colbench.migrations"}
SQL_LIBRARIES = ("sqlmodel", "sqlalchemy")


def modules() -> dict[str, Path]:
    found = {}
    for folder, package in PACKAGES.items():
        for path in (REPO / folder).rglob("*.py"):
            parts = [p for p in path.relative_to(REPO / folder).with_suffix("").parts if p != "__init__"]
            found[".".join([package, *parts])] = path
    return found


def imported(path: Path) -> set[str]:
    """Every module a file imports, at its top or inside a function (not under TYPE_CHECKING)."""
    names: set[str] = set()

    def visit(node):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return  # never runs
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text()))
    return names


def test_only_the_store_and_its_migrations_speak_sql():
    offenders = {
        name: sorted(n for n in imported(path) if n.split(".")[0] in SQL_LIBRARIES)
        for name, path in modules().items()
        if not name.startswith(("colbench.store", "colbench.migrations"))
    }
    assert {name: found for name, found in offenders.items() if found} == {}


def test_no_import_cycles():
    """Lazy imports inside functions count: a cycle broken only by import order is still a cycle."""
    known = modules()
    graph = {name: (imported(path) & known.keys()) - {name} for name, path in known.items()}
    cycles, done = [], set()

    def walk(name, trail):
        if name in trail:
            cycles.append(trail[trail.index(name):] + [name])
            return
        if name in done:
            return
        for other in sorted(graph[name]):
            walk(other, trail + [name])
        done.add(name)

    for name in sorted(graph):
        walk(name, [])
    assert cycles == []


def test_the_checks_see_what_they_look_for(tmp_path):
    """The walker finds imports at the top, inside functions, and ignores TYPE_CHECKING blocks."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from typing import TYPE_CHECKING\nimport sqlalchemy\n"
        "def f():\n    from colbench.store import queries\n"
        "if TYPE_CHECKING:\n    from colbench.store.db import Database\n"
    )
    assert imported(sample) >= {"sqlalchemy", "colbench.store", "colbench.store.queries"}
    assert "colbench.store.db" not in imported(sample)


def test_the_command_line_starts_without_torch():
    """`colbench --help` and every flag list load without the training stack: recipes import torch when they run."""
    import subprocess
    import sys

    probe = "import sys, colbench.cli.app; print(sorted(m for m in ('torch', 'transformers', 'peft') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"
