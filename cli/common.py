"""What every command shares: the open store, one-line errors, progress bars, JSON output."""
from __future__ import annotations

from enum import Enum

import json
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, NoReturn

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

INTERRUPTED = "interrupted; everything finished before the interrupt is stored, rerun to go on"

def _console(stderr: bool = False) -> Console:
    """A terminal's own width; piped or redirected output (80 columns to Rich) gets $COLUMNS or 200,
    so that tables written to a file or a pager are not folded into narrow columns."""
    import os

    probe = Console(stderr=stderr)
    if probe.is_terminal or os.environ.get("COLUMNS"):
        return probe
    return Console(stderr=stderr, width=200)


console = _console()
err_console = _console(stderr=True)


@dataclass
class State:
    db_url: str | None = None
    artifacts: str | None = None
    _db: Any = None

    def db(self):
        if self._db is None:
            from colbench.store.db import Database

            self._db = Database(self.db_url, artifacts=self.artifacts)
        return self._db


state = State()


def main_process() -> bool:
    """False in the processes of an ``accelerate launch`` other than rank 0: they train
    their share and stay silent, so that one result (one --json document) is printed."""
    import os

    return os.environ.get("RANK", "0") == "0"


def fail(message: str, code: int = 1) -> NoReturn:
    from rich.markup import escape

    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)  # user text is never markup
    sys.exit(code)


def describe(exc: BaseException) -> str:
    """One line for any exception: ours carry a message made for users already."""
    lines = str(exc).strip().splitlines()
    text = lines[0] if lines else ""
    if isinstance(exc, (OSError,)) and getattr(exc, "strerror", None):
        target = getattr(exc, "filename", None)
        return f"{exc.strerror}: {target}" if target else exc.strerror
    from colbench.errors import ColbenchError

    if isinstance(exc, (ColbenchError, ValueError)):
        return text or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def print_json(payload: Any) -> None:
    sys.stdout.write(json.dumps(payload, indent=2, default=str, ensure_ascii=False) + "\n")


@contextmanager
def reporting(description: str, total: int | None = None, *, enabled: bool = True) -> Iterator[Any]:
    """The one progress display: a Rich bar on stderr, fed by colbench.progress's protocol.

    Yields ``on_progress(stage, done, total, figures)``. The bar restarts when the stage
    changes (a SWEET run samples, then trains) and shows the figures that matter beside it
    (loss, turns/s, success so far), with elapsed time and ETA. ``total`` is a first guess
    (e.g. the lines of a file) until the work reports its own. Silent when disabled (e.g.
    --json) and when stderr is not a terminal, so logs get the summary, not bar frames.
    """
    if not enabled or not err_console.is_terminal:
        yield lambda stage, done, total=None, figures=None: None
        return
    columns = [
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[figures]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    ]
    with Progress(*columns, console=err_console, transient=False) as progress:
        guess = total
        bar = progress.add_task(description, total=guess, figures="")
        current = [None]

        def on_progress(stage: str, done: int, total: int | None = None, figures: dict | None = None) -> None:
            if stage != current[0]:
                progress.reset(bar, total=total if total is not None else guess, description=f"{description}: {stage}")
                current[0] = stage
            shown = {"total": total} if total is not None else {}
            progress.update(bar, completed=done, figures=_figures(figures or {}), **shown)

        yield on_progress


def _figures(figures: dict) -> str:
    """The figures worth a glance, short: loss 0.693, 2.41 turns/s, success 20% of 5."""
    parts = []
    if figures.get("loss") is not None:
        parts.append(f"loss {figures['loss']:.4f}")
    if figures.get("turns") is not None:
        parts.append(f"{figures['turns']} turns")
    if figures.get("turns_per_s") is not None:
        parts.append(f"{figures['turns_per_s']:.2f} turns/s")
    if figures.get("tokens_per_s") is not None:
        parts.append(f"{figures['tokens_per_s']:.1f} tok/s")
    if figures.get("eta_at_most_s") is not None:
        minutes = figures["eta_at_most_s"] / 60
        parts.append(f"done in ≤ {minutes:.0f} min" if minutes >= 1 else "done in < 1 min")
    if figures.get("accepted") is not None:
        parts.append(f"{figures['accepted']} accepted")
    if figures.get("graded"):
        success, similarity = figures.get("success"), figures.get("similarity")
        if similarity is not None:
            parts.append(f"similarity {similarity:.3f} of {figures['graded']}")
        elif success is not None:
            parts.append(f"success {success:.0%} of {figures['graded']}")
        else:
            parts.append(f"{figures['graded']} graded")
    return "  ".join(parts)


def count_lines(path) -> int | None:
    try:
        with open(path, "rb") as handle:
            return sum(1 for line in handle if line.strip())
    except OSError:
        return None


# Choices several commands take.
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


def print_import(summary, as_json: bool, what: str) -> None:
    """One line on an import (or its summary as JSON); a warning on stderr when the file held
    no records at all (a wrong or truncated file, most likely)."""
    if summary.records == 0:
        from rich.markup import escape

        err_console.print(f"[bold yellow]warning:[/] {escape(str(summary.path))} holds no records: nothing to import", highlight=False, soft_wrap=True)
    if as_json:
        print_json(summary.__dict__)
        return
    line = f"{summary.path}: {summary.added} {what} added, {summary.skipped} already stored"
    if what == "trajectories":
        line += f", {summary.tasks_added} new tasks"
    console.print(line)
