"""The built-in task sets: each family's tasks, shipped as package data in its builtin_package (the shipped
families': `colbench/tasks/builtin/`),
loaded and stored here (a family's tasks are read through the family, so this sits beside them).

Files are named `<family>_<anything>.jsonl` (official task format plus our
`naive_solution`), e.g. `backend_a.jsonl`. They are read through importlib.resources,
so they load the same from a checkout and from an installed wheel.

The split is the family's (TaskFamily.builtin_split), fixed and deterministic. The files
of a family are read in file-name order and their tasks numbered 0, 1, 2, ... across all
of them (blank lines do not count); by default task k is a test task iff
k % test_every == test_every - 1 (test_every = 6: 300 → 250 train / 50 test; a family may
set its own test_every, or override builtin_split). The rule depends only on position,
never on content, so:

- fixing a task in place (same line, new text) never moves it between splits;
- a new file whose name sorts after the existing ones (backend_d.jsonl), or new lines
  at the end of the last file, leave every existing task's split unchanged.

Deleting or inserting a line in the middle shifts every later task: replace a bad
task in place rather than removing it.
"""
from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

from colbench.families import DEFAULT_FAMILY, family as family_named
from colbench.families.records import task_from_record
from colbench.jsonl import records
from colbench.tasks.rows import task_row
from colbench.tasks.spec import TaskSpec

SOURCE = "builtin"


@dataclass
class BuiltinTask:
    spec: TaskSpec
    file: str  # e.g. "backend_a.jsonl"
    line: int  # 1-based line number in that file

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


def builtin_files(family: str = DEFAULT_FAMILY) -> list:
    """The family's data files (importlib Traversables), in file-name order."""
    folder = resources.files(family_named(family).builtin_package)  # an unregistered family: one line
    found = [
        entry
        for entry in folder.iterdir()
        if entry.is_file() and entry.name.startswith(f"{family}_") and entry.name.endswith(".jsonl")
    ]
    return sorted(found, key=lambda entry: entry.name)


def load_builtin(family: str = DEFAULT_FAMILY) -> list[BuiltinTask]:
    """Every built-in task of the family with its file and line. FormatError names the line."""
    tasks: list[BuiltinTask] = []
    owner = family_named(family)
    for entry in builtin_files(family):
        with entry.open("rb") as handle:
            for number, record in records(handle, entry.name):
                where, split = f"{entry.name}:{number}", owner.builtin_split(len(tasks))
                spec = task_from_record(record, family=family, split=split, source=SOURCE, where=where)
                tasks.append(BuiltinTask(spec, entry.name, number))
    return tasks


def builtin_tasks(family: str = DEFAULT_FAMILY, split: str | None = None) -> list[TaskSpec]:
    """The built-in tasks of a family (all, or one split), naive solutions included."""
    specs = [task.spec for task in load_builtin(family)]
    return [spec for spec in specs if split is None or spec.split == split]


def ensure_builtin_tasks(db, family: str | None = DEFAULT_FAMILY) -> int:
    """Store the family's built-in tasks that are missing (every registered family's for None); returns how many
    were added.

    Idempotent (tasks are keyed by content hash) and all in one transaction.
    """
    from colbench.families import names
    from colbench.store import queries

    rows = [task_row(task.spec, {"builtin": task.where})
            for name in ([family] if family else names()) for task in load_builtin(name)]
    if not rows:
        return 0
    with db.write() as session:
        _, added = queries.add_tasks(session, rows)
    return added


def ensure_lite_tasks(db) -> int:
    """Store the backend-lite tier's missing tasks (colbench/tasks/lite), under the splits
    lite-train, lite-val, lite-test and lite-novel; returns how many were added. Idempotent.

    They are stored instance by instance across the templates (every template's first
    instance, then every template's second, ...), so the first N tasks of a split by id, which
    `--limit N` and the experiment's `--train-tasks N` take, are spread over its templates."""
    from dataclasses import replace

    from colbench.store import queries
    from colbench.tasks.lite import lite_instances
    from colbench.tasks.spec import LITE_SPLITS

    order = sorted(lite_instances(), key=lambda item: item.index)  # stable: templates keep their order
    rows = [task_row(replace(item.spec, split=LITE_SPLITS[item.spec.split])) for item in order]
    with db.write() as session:
        _, added = queries.add_tasks(session, rows)
        # Stores made before lite-val existed hold its tasks as lite-train: move them, so no
        # trainer reads a validation task. A split never moves the other way.
        queries.move_tasks(session, [r["content_hash"] for r in rows if r["split"] == LITE_SPLITS["val"]],
                           LITE_SPLITS["val"])
    return added
