"""`colbench study report`: a study's tables, recomputed from its committed files alone."""
from __future__ import annotations

import sys
from pathlib import Path

import typer

from colbench.cli.common import console, fail, print_json

app = typer.Typer(help="Studies kept as files (studies/<name>/): their tables, recomputed from the files alone.",
                  no_args_is_help=True)


@app.command("report")
def report(
    folder: Path = typer.Argument(
        ..., help="The study's folder: trajectories.jsonl and validation.jsonl (colbench/study.py), or a credit"
                  " study's values.jsonl (colbench/training/credit/report.py)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Every figure as JSON."),
    curves: Path = typer.Option(None, "--curves", help="Also draw every online run's curves (steps.jsonl: reward,"
                                " validation, entropy, mismatch, zero spread, turns, leaks) into this PNG."),
) -> None:
    """Per split and label, each arm's success and tests passed with 95% intervals and its paired
    difference from zero-shot; SWEET-RL against zero-shot, rft and mtdpo (Holm-corrected) and
    against SWEET-RL without c; every configuration tried on validation, with its cost; SWEET-RL's
    training pairs against ground truth; each online run's diagnostics over its steps. A credit study: every
    credit's figures against ground truth, and the signal its plan carries online. Reads no store and no model:
    anyone can recompute the README's tables."""
    from colbench.study import TRAJECTORIES, markdown, report as study_report
    from colbench.training.credit import report as credits

    if (folder / credits.VALUES).exists() and not (folder / TRAJECTORIES).exists():
        found = credits.credit_report(folder)
        if as_json:
            print_json(credits.as_json(found))
            return
        console.print(credits.markdown(found), highlight=False, markup=False, soft_wrap=True)
        return
    found = study_report(folder)
    if curves is not None:
        from colbench import study_online
        from colbench.jsonl import read_jsonl

        steps = read_jsonl(folder / study_online.STEPS)
        if not steps:
            fail(f"{folder / study_online.STEPS} holds no online steps to draw")
        print(f"curves: {study_online.plot(steps, curves)}", file=sys.stderr)
    if as_json:
        print_json(found)
        return
    console.print(markdown(found), highlight=False, markup=False, soft_wrap=True)  # markdown: never wrapped
