"""A task as the domain code sees it, independent of the store.

Fields follow the official ColBench JSONL. `naive_solution` is ours: a generic answer
written from the description alone, used by `tasks validate` to show that a task
needs clarification.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

SPLITS = ("train", "test")
# The backend-lite tier (colbench/tasks/lite) lives beside the built-in tasks under splits of
# its own, so `backend:train` never reads a lite task and a trainer's --split picks the tier.
LITE_SPLITS = {
    "train": "lite-train", "val": "lite-val", "test": "lite-test", "novel": "lite-novel", "fresh": "lite-fresh",
    "fresh2": "lite-fresh2",
}


def is_held_out(split: str) -> bool:
    """A split that training must never read (the critic sees its references)."""
    return split not in ("train", LITE_SPLITS["train"])


@dataclass
class TaskSpec:
    family: str
    problem_description: str
    ground_truth: str
    test_cases: dict[str, str] = field(default_factory=dict)
    hidden_information: str | None = None
    naive_solution: str | None = None
    split: str = "train"
    source: str = "builtin"

    @property
    def hidden(self) -> str:
        """What the simulated human may draw on: the hidden information, else the reference."""
        return self.hidden_information or self.ground_truth

    @property
    def content_hash(self) -> str:
        """Identity of a task: family, description, reference and tests, nothing else."""
        payload = json.dumps(
            [self.family, self.problem_description, self.ground_truth, self.test_cases],
            sort_keys=True,
            ensure_ascii=False,
        )
        return hashlib.sha256(payload.encode()).hexdigest()

    def to_official(self) -> dict[str, Any]:
        """The official task record, naming its family (not an official field: the official files hold one family
        each), so that a family's own export reads back as its own whichever other family would claim it."""
        record: dict[str, Any] = {
            "family": self.family,
            "problem_description": self.problem_description,
            "ground_truth": self.ground_truth,
        }
        if self.test_cases:  # a family graded by tests always has some (colbench.families); the others carry none
            record["test_cases"] = self.test_cases
        if self.hidden_information is not None:
            record["hidden_information"] = self.hidden_information
        return record
