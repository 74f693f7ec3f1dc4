"""Getting data in and out: `tasks import|ls`, `trajectories import`, `export`, `ls`."""
from __future__ import annotations

from enum import Enum
from pathlib import Path

import typer

from colbench.cli import views
from colbench.cli.common import console, count_lines, print_json, progress_bar, state


class Family(str, Enum):
    backend = "backend"
    frontend = "frontend"


class Split(str, Enum):
    train = "train"
    test = "test"


class Status(str, Enum):
    pending = "pending"
    running = "running"
    done = "done"
    failed = "failed"


tasks_app = typer.Typer(help="Tasks: import the official format, list what is stored.", no_args_is_help=True)
trajectories_app = typer.Typer(help="Trajectories: import the official offline format.", no_args_is_help=True)


@tasks_app.command("import")
def tasks_import(
    file: Path = typer.Argument(..., help="Official task JSONL: one task a line."),
    family: Family = typer.Option(..., "--family", help="Which task family the file holds."),
    split: Split = typer.Option(..., "--split", help="Which split the tasks belong to."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable summary."),
) -> None:
    """Import tasks. All or nothing: one bad line imports nothing from the file."""
    from colbench.official import import_tasks

    db = state.db()
    with progress_bar(f"importing {file.name}", count_lines(file), enabled=not as_json) as advance:
        summary = import_tasks(db, file, family=family.value, split=split.value, progress=advance)
    _report(summary, as_json, "tasks")


@tasks_app.command("ls")
def tasks_ls(
    family: Family = typer.Option(None, "--family"),
    split: Split = typer.Option(None, "--split"),
    limit: int = typer.Option(50, "--limit", help="At most this many rows (0: all)."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """List stored tasks."""
    from colbench.store import queries

    with state.db().read() as session:
        tasks = queries.tasks_in(session, family=family and family.value, split=split and split.value)
    total = len(tasks)
    shown = tasks[:limit] if limit else tasks
    if as_json:
        print_json([views.task_summary(t) for t in shown])
        return
    console.print(views.tasks_table(shown, total))


@trajectories_app.command("import")
def trajectories_import(
    file: Path = typer.Argument(..., help="Official offline trajectory JSONL."),
    policy: str = typer.Option(None, "--policy", help="Name the policy that produced them. Default: import:<file stem>."),
    family: Family = typer.Option(None, "--family", help="Task family. Default: backend if the task has test_cases."),
    split: Split = typer.Option(Split.train, "--split", help="Split for tasks not stored yet."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable summary."),
) -> None:
    """Import trajectories, with each assistant turn's input and output, the answer and the reward."""
    from colbench.official import import_trajectories

    db = state.db()
    with progress_bar(f"importing {file.name}", count_lines(file), enabled=not as_json) as advance:
        summary = import_trajectories(
            db, file, policy=policy, family=family and family.value, split=split.value, progress=advance
        )
    _report(summary, as_json, "trajectories")


def _report(summary, as_json: bool, what: str) -> None:
    if as_json:
        print_json(summary.__dict__)
        return
    line = f"{summary.path}: {summary.added} {what} added, {summary.skipped} already stored"
    if what == "trajectories":
        line += f", {summary.tasks_added} new tasks"
    console.print(line)


class ExportFormat(str, Enum):
    official = "official"


def export(
    out: Path = typer.Option(Path("export"), "--out", help="Folder to write into."),
    fmt: ExportFormat = typer.Option(ExportFormat.official, "--format", help="Output format."),
    family: Family = typer.Option(None, "--family"),
    split: Split = typer.Option(None, "--split"),
    policy: str = typer.Option(None, "--policy", help="Only this policy's trajectories."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable summary."),
) -> None:
    """Write tasks (<family>_<split>_tasks.jsonl) and trajectories (trajectories.jsonl) in the official format."""
    from colbench.official import export_official

    with progress_bar("exporting", None, enabled=not as_json) as advance:
        summary = export_official(
            state.db(), out, family=family and family.value, split=split and split.value, policy=policy, progress=advance
        )
    if as_json:
        print_json(summary.files)
        return
    for path, count in summary.files.items():
        console.print(f"{path}: {count} records")
    if not summary.files:
        console.print("nothing to export")


def ls(
    task: int = typer.Option(None, "--task", help="Only this task id."),
    policy: str = typer.Option(None, "--policy"),
    status: Status = typer.Option(None, "--status"),
    family: Family = typer.Option(None, "--family"),
    split: Split = typer.Option(None, "--split"),
    min_reward: float = typer.Option(None, "--min-reward"),
    max_reward: float = typer.Option(None, "--max-reward"),
    limit: int = typer.Option(50, "--limit", help="At most this many rows (0: all)."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """List trajectories, newest first."""
    from colbench.store import queries

    flt = queries.TrajectoryFilter(
        task_id=task,
        policy=policy,
        status=status and status.value,
        family=family and family.value,
        split=split and split.value,
        min_reward=min_reward,
        max_reward=max_reward,
        limit=limit or None,
    )
    with state.db().read() as session:
        rows = queries.find_trajectories(session, flt)
    if as_json:
        print_json([views.trajectory_summary(t, task_row, n) for t, task_row, n in rows])
        return
    console.print(views.trajectories_table(rows))


def register(app: typer.Typer) -> None:
    app.add_typer(tasks_app, name="tasks")
    app.add_typer(trajectories_app, name="trajectories")
    app.command("export")(export)
    app.command("ls")(ls)
