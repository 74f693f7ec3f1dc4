"""The house rules the code's shape depends on, checked on the source itself: the store is
the only place that speaks SQL, no module imports another that imports it back, no unit
(a top-level module or subpackage of colbench; store, cli, migrations) does either, and nothing
outside colbench/families compares a family's name (no exception: the rest asks the family)."""
from __future__ import annotations

import ast
from pathlib import Path

from colbench import families

REPO = Path(__file__).resolve().parent.parent
# Top-level folders and the package each is installed as (setup.py's package-dir).
PACKAGES = {"colbench": "colbench", "store": "colbench.store", "cli": "colbench.cli",
            "migrations": "colbench.migrations"}
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


def unit(module: str) -> str:
    """The unit a module belongs to: store, cli, migrations whole; else colbench's top-level module or subpackage."""
    for package in PACKAGES.values():
        if package != "colbench" and (module == package or module.startswith(package + ".")):
            return package
    return ".".join(module.split(".")[:2])


def unit_imports() -> dict[tuple[str, str], set[tuple[str, str]]]:
    """(unit, unit it imports) → the module imports that make the edge."""
    known = modules()
    edges: dict[tuple[str, str], set[tuple[str, str]]] = {}
    for name, path in known.items():
        for other in imported(path) & known.keys():
            if unit(name) != unit(other):
                edges.setdefault((unit(name), unit(other)), set()).add((name, other))
    return edges


def knots(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one node: the units caught in a cycle (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = set()
            while not component or node not in component:
                component.add(stack.pop())
            if len(component) > 1:
                found.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def cycle_in(knot: set[str], edges: dict[tuple[str, str], set[tuple[str, str]]]) -> str:
    """One cycle through a knot, each step with an import that makes it: what to break."""
    start = min(knot)
    trail, node = [start], start
    reach = {a: sorted(b for (x, b) in edges if x == a and b in knot) for a in knot}
    while True:  # walk to a unit already on the trail; in a strongly connected knot every unit has a way on
        node = reach[node][0]
        if node in trail:
            trail = trail[trail.index(node):] + [node]
            break
        trail.append(node)
    return (
        " -> ".join(f"{a} ({min(edges[a, b])[0]} imports {min(edges[a, b])[1]})" for a, b in zip(trail, trail[1:]))
        + f" -> {trail[-1]}"
    )


def test_no_import_cycles_between_units():
    """Units form layers: no unit imports (lazily or not) one that imports it back."""
    edges = unit_imports()
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
    assert [cycle_in(knot, edges) for knot in knots(graph)] == []


def test_the_unit_check_sees_what_it_looks_for():
    assert unit("colbench.store.queries.runs") == "colbench.store" and unit("colbench.cli") == "colbench.cli"
    assert unit("colbench.training.critic") == "colbench.training" and unit("colbench.official") == "colbench.official"
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert knots(graph) == [{"a", "b", "c"}]
    edges = {("a", "b"): {("a.x", "b.y")}, ("b", "c"): {("b.y", "c.z")}, ("c", "a"): {("c.z", "a.x")}}
    assert cycle_in({"a", "b", "c"}, edges) == "a (a.x imports b.y) -> b (b.y imports c.z) -> c (c.z imports a.x) -> a"


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

    probe = (
        "import sys, colbench.cli.app; print(sorted(m for m in ('torch', 'transformers', 'peft') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


# ---------------------------------------------------------------- family names


def _names_compared(path: Path, root: Path = REPO) -> list[str]:
    """`x == "backend"`, `x != "frontend"`, `x in ("backend", ...)` and `s.startswith("frontend")` in a file."""
    names = set(families.names())  # the shipped ones (the plugin tests' family is not loaded here)
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Compare):
            parts = [node.left, *node.comparators]
            constants = [c.value for p in parts for c in ast.walk(p) if isinstance(c, ast.Constant)]
            found += [f"{path.relative_to(root)}:{node.lineno}" for value in constants if value in names]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "startswith":
            if any(isinstance(a, ast.Constant) and str(a.value).split("-")[0] in names for a in node.args):
                found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_nothing_outside_the_families_compares_a_familys_name():
    found: dict[str, int] = {}
    for folder in ("colbench", "cli", "store"):
        for path in sorted((REPO / folder).rglob("*.py")):
            if path.is_relative_to(REPO / "colbench" / "families"):
                continue
            hits = _names_compared(path)
            if hits:
                found[str(path.relative_to(REPO))] = len(hits)
    assert found == {}  # no exception: machinery asks the request (medium, brief) or the task (its tests)


def test_the_name_check_sees_comparisons(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        'if task.family == "frontend" or f not in ("backend",) or s.startswith("backend-lite"):\n    pass\n'
    )
    assert len(_names_compared(sample, tmp_path)) == 3
