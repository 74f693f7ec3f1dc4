"""Trajectories in and out: `trajectories import`, `ls`, `export`."""
from __future__ import annotations

from enum import Enum
from pathlib import Path

import typer

from colbench.cli.views.trajectories import trajectories_table, trajectory_summary
from colbench.cli.common import (
    FAMILY_HELP,
    Family,
    Split,
    Status,
    StoredSplit,
    console,
    count_lines,
    print_import,
    print_json,
    reporting,
    state
)

app = typer.Typer(help="Trajectories: import the official offline format.", no_args_is_help=True)


@app.command("import")
def trajectories_import(
    file: Path = typer.Argument(..., help="Official offline trajectory JSONL."),
    policy: str = typer.Option(
        None, "--policy", help="Name the policy that produced them. Default: import:<file stem>."
    ),
    family: Family = typer.Option(
        None,
        "--family",
        help=f"Task family ({FAMILY_HELP}). Default: the one each task record names in 'family' (colbench's exports"
             " do), else the one family that claims it (backend: a record with test_cases)."
    ),
    split: StoredSplit = typer.Option(Split.train.value, "--split", help="Split for tasks not stored yet (a lite"
                                      " split stores the backend-lite tier first, as a rollout does)."),
    keep_ids: bool = typer.Option(False, "--keep-ids", help="Restore what `colbench export --ids` wrote: every"
                                  " dialogue and turn takes the id its record carries (a study's files that name them"
                                  " stay valid), and its stored fields (policy, rollout slot, grade, graded order, the"
                                  " sampled tokens), so a rerun of its rollout finds it done and a trainer reads the"
                                  " same data in the same order. --policy names records without them. An id the store"
                                  " holds already is an error."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable summary."),
) -> None:
    """Import trajectories, with each assistant turn's input and output, the answer and the reward."""
    from colbench.official import import_trajectories

    db = state.db()
    with reporting(f"importing {file.name}", count_lines(file), enabled=not as_json) as on_progress:
        summary = import_trajectories(
            db, file, policy=policy, family=family and family.value, split=split.value, keep_ids=keep_ids,
            progress=on_progress
        )
    print_import(summary, as_json, "trajectories")


class ExportFormat(str, Enum):
    official = "official"


def export(
    out: Path = typer.Option(Path("export"), "--out", help="Folder to write into."),
    fmt: ExportFormat = typer.Option(ExportFormat.official, "--format", help="Output format."),
    family: Family = typer.Option(None, "--family", help=f"Only this task family ({FAMILY_HELP})."),
    split: StoredSplit = typer.Option(None, "--split", help="Only this split (lite-val: backend-lite's val tasks)."),
    policy: str = typer.Option(None, "--policy", help="Only this policy's trajectories."),
    ids: bool = typer.Option(False, "--ids", help="Also write each trajectory's id and each message's turn id, and"
                             " under 'stored' what else the store holds of them (the rollout slot, the grade and its"
                             " order, the sampled tokens and log-probs); not official fields: for `trajectories import"
                             " --keep-ids`, which restores them."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable summary."),
) -> None:
    """Write tasks (<family>_<split>_tasks.jsonl) and trajectories (trajectories.jsonl) in the official format."""
    from colbench.official import export_official

    with reporting("exporting", enabled=not as_json) as on_progress:
        summary = export_official(
            state.db(), out, family=family and family.value, split=split and split.value, policy=policy, ids=ids,
            progress=on_progress
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
    run: str = typer.Option(None, "--run",
                            help="Only this rollout run's: rollout:<id> or its name (`colbench runs ls`)."),
    status: Status = typer.Option(None, "--status"),
    family: Family = typer.Option(None, "--family", help=f"Only this task family ({FAMILY_HELP})."),
    split: Split = typer.Option(None, "--split"),
    min_reward: float = typer.Option(None, "--min-reward"),
    max_reward: float = typer.Option(None, "--max-reward"),
    limit: int = typer.Option(50, "--limit", min=1, help="At most this many rows."),
    show_all: bool = typer.Option(False, "--all", help="Every row (no --limit)."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """List trajectories, newest first."""
    from colbench.runs import rollout_id_of
    from colbench.store import queries

    flt = queries.TrajectoryFilter(
        task_id=task,
        policy=policy,
        rollout_id=run and rollout_id_of(state.db(), run),
        status=status and status.value,
        family=family and family.value,
        split=split and split.value,
        min_reward=min_reward,
        max_reward=max_reward,
        limit=None if show_all else limit,
    )
    with state.db().read() as session:
        rows = queries.find_trajectories(session, flt)
    if as_json:
        print_json([trajectory_summary(t, task_row, n) for t, task_row, n in rows])
        return
    console.print(trajectories_table(rows))


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="trajectories")
    root.command("export")(export)
    root.command("ls")(ls)
