"""A task's store row ↔ its TaskSpec: the one mapping between the table and the domain."""
from __future__ import annotations

from typing import Any

from colbench.store.models import Task, utcnow
from colbench.tasks.spec import TaskSpec


def task_row(spec: TaskSpec, extra: dict | None = None) -> dict[str, Any]:
    """Column values of the task table for a spec (plain values: imports insert thousands)."""
    return {
        "family": spec.family,
        "split": spec.split,
        "source": spec.source,
        "problem_description": spec.problem_description,
        "ground_truth": spec.ground_truth,
        "hidden_information": spec.hidden_information,
        "test_cases": spec.test_cases,
        "naive_solution": spec.naive_solution,
        "extra": extra,
        "content_hash": spec.content_hash,
        "created_at": utcnow(),
    }


def spec_of(task: Task) -> TaskSpec:
    return TaskSpec(
        family=task.family,
        split=task.split,
        source=task.source,
        problem_description=task.problem_description,
        ground_truth=task.ground_truth,
        hidden_information=task.hidden_information,
        test_cases=dict(task.test_cases or {}),
        naive_solution=task.naive_solution,
    )
