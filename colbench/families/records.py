"""An official task record → a TaskSpec: the fields every family shares, then the family's own tests."""
from __future__ import annotations

from colbench.errors import FormatError
from colbench.families import UnknownFamily, family as family_named
from colbench.tasks.spec import TaskSpec


def task_from_record(record: dict, *, family: str, split: str, source: str, where: str) -> TaskSpec:
    def text_field(name: str, required: bool = True) -> str | None:
        value = record.get(name)
        if value is None and not required:
            return None
        if not isinstance(value, str) or (required and not value.strip()):
            raise FormatError(f"{where}: field '{name}' must be a non-empty string")
        return value

    try:
        owner = family_named(family)
    except UnknownFamily as exc:
        raise FormatError(f"{where}: {exc}") from None
    named = record.get("family")
    if named is not None and named != family:
        raise FormatError(f"{where}: the record is a task of the family {named!r}, not {family!r}")
    description = text_field("problem_description")
    reference = text_field("ground_truth")
    hidden = text_field("hidden_information", required=False)
    tests = owner.tests_from_record(record, where)
    naive = record.get("naive_solution")
    return TaskSpec(
        family=family,
        split=split,
        source=source,
        problem_description=description,
        ground_truth=reference,
        hidden_information=hidden,
        test_cases=tests,
        naive_solution=naive if isinstance(naive, str) else None,
    )
