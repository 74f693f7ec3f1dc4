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
from rich.text import Text

from colbench.families import DEFAULT_FAMILY, help_text as family_help, names as family_names

INTERRUPTED = "interrupted; everything finished before the interrupt is stored, rerun to go on"
ERROR = "error: "  # how every failure's one line on stderr starts (`colbench launch` looks for it)

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

    err_console.print(
        f"[bold red]{ERROR.strip()}[/] {escape(message)}", highlight=False, soft_wrap=True
    )  # user text is never markup
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


# Where stderr is not a terminal (a pipe, a file, a CI log), long work prints one plain line
# every this many seconds instead of a bar: how far it is, its rate, the time left.
# $COLBENCH_PROGRESS_INTERVAL (seconds) overrides it, e.g. for tests.
PLAIN_PROGRESS_INTERVAL_S = 30.0


def plain_progress_interval() -> float:
    import os

    value = os.environ.get("COLBENCH_PROGRESS_INTERVAL")
    try:
        return float(value) if value else PLAIN_PROGRESS_INTERVAL_S
    except ValueError:
        return PLAIN_PROGRESS_INTERVAL_S


@contextmanager
def reporting(description: str, total: int | None = None, *, enabled: bool = True,
              interval_s: float | None = None) -> Iterator[Any]:
    """The one progress display, fed by colbench.progress's protocol.

    Yields ``on_progress(stage, done, total, figures)``. On a terminal: a Rich bar on stderr
    that restarts when the stage changes (a SWEET run samples, then trains) and shows the
    figures that matter beside it (loss, turns/s, success so far), with elapsed time and ETA.
    ``total`` is a first guess (e.g. the lines of a file) until the work reports its own.
    Elsewhere (a pipe, a log file): a plain line on stderr every ``interval_s`` seconds
    (PLAIN_PROGRESS_INTERVAL_S, or $COLBENCH_PROGRESS_INTERVAL), and one at the end if any
    was printed, so a command shorter than the interval adds nothing to its summary.
    Silent when disabled (e.g. --json).
    """
    if not enabled:
        yield lambda stage, done, total=None, figures=None: None
        return
    if not err_console.is_terminal:
        plain = PlainProgress(description, total, interval_s if interval_s is not None else plain_progress_interval())
        try:
            yield plain
        finally:
            plain.close()
        return
    columns = [
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[figures]}"),
        TimeElapsedColumn(),
        TimeLeftColumn(),
    ]
    with Progress(*columns, console=err_console, transient=False) as progress:
        guess = total
        bar = progress.add_task(description, total=guess, figures="", eta_s=None)
        current = [None]

        def on_progress(stage: str, done: int, total: int | None = None, figures: dict | None = None) -> None:
            if stage != current[0]:
                progress.reset(bar, total=total if total is not None else guess, description=f"{description}: {stage}")
                current[0] = stage
            shown = {"total": total} if total is not None else {}
            figures = figures or {}
            progress.update(bar, completed=done, figures=_figures(figures), eta_s=figures.get("eta_s"), **shown)

        yield on_progress


class TimeLeftColumn(TimeRemainingColumn):
    """Rich's time remaining, or the work's own estimate where it reports one (``eta_s``: a
    rollout's, from its turn rate; its dialogues run side by side and end together, so the
    rate at which they end says little until the last ones)."""

    def render(self, task) -> Text:
        left = task.fields.get("eta_s")
        if left is None or task.finished:
            return super().render(task)
        minutes, seconds = divmod(int(left), 60)
        return Text(f"{minutes // 60:d}:{minutes % 60:02d}:{seconds:02d}", style="progress.remaining")


class PlainProgress:
    """The progress protocol as plain lines for pipes and logs: the latest report, printed by a
    timer thread at a steady interval once the work has reported (whether or not anything moved
    since, so a silent stretch still shows the work is alive), e.g.

        rollouts: rollout 3/4 (75%) after 2 min 10 s, 1.4/min, about 43 s left · 52 turns  0.41 turns/s  31.0 tok/s
    """

    def __init__(self, description: str, total: int | None, interval_s: float):
        import threading
        import time

        self.description, self.guess, self.interval_s = description, total, max(float(interval_s), 0.01)
        self._clock = time.monotonic
        self._lock = threading.Lock()
        self.started = self._clock()
        self.stage: str | None = None
        self.stage_started, self.stage_done0 = self.started, 0
        self.done, self.total, self.figures = 0, total, {}
        self.printed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tick, name="colbench-progress", daemon=True)
        self._thread.start()

    def __call__(self, stage: str, done: int, total: int | None = None, figures: dict | None = None) -> None:
        with self._lock:
            if stage != self.stage:  # a new stage: its rate counts from here
                self.stage, self.stage_started, self.stage_done0 = stage, self._clock(), done
                self.total = self.guess
            self.done, self.figures = done, dict(figures or {})
            if total is not None:
                self.total = total

    def line(self, final: bool = False) -> str:
        with self._lock:
            now = self._clock()
            if self.stage is None:
                return f"{self.description}: nothing reported yet, after {duration(now - self.started)}"
            done, total, figures = self.done, self.total, self.figures
            rate_s = (done - self.stage_done0) / max(now - self.stage_started, 1e-9)
            elapsed = now - self.stage_started
        parts = [f"{self.description}: {self.stage} {done}" + (f"/{total} ({done / total:.0%})" if total else "")
                 + (" in " if final else " after ") + duration(elapsed)]
        if rate_s > 0:
            parts.append(f"{rate_s:.2f}/s" if rate_s >= 1 else f"{rate_s * 60:.1f}/min")
        left = figures.get("eta_s")  # the work's own estimate, where it has one
        if left is None:
            left = (total - done) / rate_s if rate_s > 0 and total and done < total else 0
        if left >= 1 and not final:
            parts.append(f"about {duration(left)} left")
        shown = _figures(figures)
        return ", ".join(parts) + (f" · {shown}" if shown else "")

    def _print(self, text: str) -> None:
        err_console.print(text, markup=False, highlight=False, soft_wrap=True)

    def _tick(self) -> None:
        while not self._stop.wait(self.interval_s):
            if self.stage is None:  # nothing reported yet (loading a model, opening the store): a failure
                continue            # there stays the one line of its error
            self._print(self.line())
            self.printed += 1

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        if self.printed and self.stage is not None:
            self._print(self.line(final=True))


def duration(seconds: float) -> str:
    """12 s, 2 min 10 s, 1 h 05 min."""
    seconds = max(int(round(seconds)), 0)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def _figures(figures: dict) -> str:
    """The figures worth a glance, short: loss 0.693, 2.41 turns/s, success 20% of 5."""
    parts = []
    if figures.get("loss") is not None:
        parts.append(f"loss {figures['loss']:.4f}")
    if figures.get("turns"):  # none yet: nothing to show
        parts.append(f"{figures['turns']} turns")
    if figures.get("turns_per_s"):  # none yet: nothing to show
        parts.append(f"{figures['turns_per_s']:.2f} turns/s")
    if figures.get("tokens_per_s"):  # none yet: nothing to show
        parts.append(f"{figures['tokens_per_s']:.1f} tok/s")
    if figures.get("eta_at_most_s") is not None:
        minutes = figures["eta_at_most_s"] / 60
        # A bound on the turns left, not on the time: later turns read longer dialogues and take longer.
        parts.append((f"≤ {minutes:.0f} min" if minutes >= 1 else "< 1 min") + " left at this turn rate")
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


# Choices several commands take. The task families are the registry's (colbench.families): one list, not two.
Family = Enum("Family", {name: name for name in family_names()}, type=str)
DEFAULT_FAMILY_CHOICE = Family(DEFAULT_FAMILY)
FAMILY_HELP = family_help()


class Split(str, Enum):
    train = "train"
    test = "test"


def _stored_splits() -> dict[str, str]:
    from colbench.tasks.spec import LITE_SPLITS, SPLITS

    return {s: s for s in (*SPLITS, *LITE_SPLITS.values())}


# A split as the store names it: the official two and the backend-lite tier's (lite-train, lite-val, ...).
StoredSplit = Enum("StoredSplit", _stored_splits(), type=str)


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

        err_console.print(f"[bold yellow]warning:[/] {escape(str(summary.path))} holds no records: nothing to import",
                          highlight=False, soft_wrap=True)
    if as_json:
        print_json(summary.__dict__)
        return
    line = f"{summary.path}: {summary.added} {what} added, {summary.skipped} already stored"
    if what == "trajectories":
        line += f", {summary.tasks_added} new tasks"
    console.print(line)
