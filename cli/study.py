"""`colbench study report`: a study's tables, recomputed from its committed files alone."""
from __future__ import annotations

from pathlib import Path

import typer

from colbench.cli.common import console, print_json

app = typer.Typer(help="Studies kept as files (studies/<name>/): their tables, recomputed from the files alone.",
                  no_args_is_help=True)


@app.command("report")
def report(
    folder: Path = typer.Argument(
        ..., help="The study's folder: trajectories.jsonl and validation.jsonl (colbench/study.py)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Every figure as JSON."),
) -> None:
    """Per split and label, each arm's success and tests passed with 95% intervals and its paired
    difference from zero-shot; SWEET-RL against zero-shot, rft and mtdpo (Holm-corrected) and
    against SWEET-RL without c; every configuration tried on validation, with its cost; SWEET-RL's
    training pairs against ground truth. Reads no store and no model: anyone can recompute the
    README's tables."""
    from colbench.study import markdown, report as study_report

    found = study_report(folder)
    if as_json:
        print_json(found)
        return
    console.print(markdown(found), highlight=False, markup=False)
