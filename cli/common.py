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

console = Console()
err_console = Console(stderr=True)


@dataclass
class State:
    db_url: str | None = None
    _db: Any = None

    def db(self):
        if self._db is None:
            from colbench.store.db import Database

            self._db = Database(self.db_url)
        return self._db


state = State()


def fail(message: str, code: int = 1) -> NoReturn:
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
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
def progress_bar(description: str, total: int | None, *, enabled: bool = True) -> Iterator[Any]:
    """A Rich progress bar on stderr; yields `advance(n, total=None)`.

    Silent when disabled (e.g. --json) and when stderr is not a terminal, so logs and
    pipes get the one-line summary and errors, not bar frames.
    """
    if not enabled or not err_console.is_terminal:
        yield lambda n=1, total=None: None
        return
    columns = [
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    ]
    with Progress(*columns, console=err_console, transient=False) as progress:
        task = progress.add_task(description, total=total)

        def advance(n: int = 1, total: int | None = None) -> None:
            if total is not None:
                progress.update(task, total=total)
            progress.advance(task, n)

        yield advance


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
    """One line on an import (or its summary as JSON)."""
    if as_json:
        print_json(summary.__dict__)
        return
    line = f"{summary.path}: {summary.added} {what} added, {summary.skipped} already stored"
    if what == "trajectories":
        line += f", {summary.tasks_added} new tasks"
    console.print(line)
