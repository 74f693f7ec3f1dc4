"""The one way long work reports how far it is: ``on_progress(stage, done, total, figures)``.

``stage`` names the part under way ("rollout", "sample", "train", "score", "grade"); ``done``
counts what is finished of ``total`` (None while unknown); ``figures`` carries the numbers
worth showing beside the bar (loss, turns/s, success so far). Rollouts, trainers, scoring and
re-grading all call it the same way, so one adapter draws them all (colbench.cli.common).
"""
from __future__ import annotations

from typing import Callable

Progress = Callable[[str, int, "int | None", dict], None]


def silent(stage: str, done: int, total: int | None, figures: dict) -> None:
    """A Progress that shows nothing."""


class Tally:
    """For work that counts items as it goes: ``tally(n)`` adds n finished items and reports."""

    def __init__(self, progress: Progress | None, stage: str, total: int | None = None):
        self.progress, self.stage, self.total, self.done = progress or silent, stage, total, 0

    def __call__(self, n: int = 1) -> None:
        self.done += n
        self.progress(self.stage, self.done, self.total, {})
