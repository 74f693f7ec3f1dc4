"""How a value reads in the cells of several views: a status's colour, a reward's digits."""
from __future__ import annotations

STATUS_STYLE = {"done": "green", "failed": "red", "running": "yellow", "pending": "dim", "unfinished": "dim"}


def reward_text(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"
