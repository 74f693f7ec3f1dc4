"""Task families: everything that differs between backend and frontend tasks, behind one interface.

A family is one object (a ``TaskFamily`` subclass in its own module) registered in FAMILIES, the
same kind of registry as the engines' and simulators', which also loads the ``colbench.families``
entry points: a separate package adds a family with one module (``@FAMILIES.register(...)`` on its
class) and one entry point. Code elsewhere asks the family (``family(name).env(...)``,
``family(name).reply_limit``) and never compares a family's name; ``tests/test_families.py`` runs the
common contract over every registered family, plugins included. A family graded by hidden tests
subclasses ``tested.TestedFamily`` (the sandboxed grader; docs/plugins.md walks through one).
"""
from __future__ import annotations

import functools

from colbench.families.backend import BackendFamily
from colbench.families.base import TaskFamily, UnknownFamily
from colbench.families.frontend import FrontendFamily
from colbench.registry import Registry
from colbench.tasks.spec import SPLITS

#: Every family, by the name stored in Task.family. A choice's factory is the family's class.
FAMILIES = Registry("family", error=UnknownFamily, entry_points="colbench.families")
FAMILIES.register(BackendFamily.name, BackendFamily.summary)(BackendFamily)
FAMILIES.register(FrontendFamily.name, FrontendFamily.summary)(FrontendFamily)

DEFAULT_FAMILY = BackendFamily.name  # the paper's main setting: what --family and --tasks mean when not given


@functools.cache
def _instance(cls: type[TaskFamily]) -> TaskFamily:
    return cls()


def registry() -> dict[str, TaskFamily]:
    """Every registered family by name, in registration order (plugins' after the shipped ones)."""
    return {choice.name: _instance(choice.factory) for choice in FAMILIES}


def names() -> tuple[str, ...]:
    return FAMILIES.names()


def family(name: str) -> TaskFamily:
    found = registry().get(name)
    if found is None:
        raise UnknownFamily(f"family must be one of {', '.join(names())}, not {name!r}")
    return found


def selectors_help() -> str:
    """The task selectors --tasks takes, e.g. ``FAMILY:SPLIT (backend:train|test, ...) or backend-lite:...``."""
    plain = ", ".join(f"{name}:{'|'.join(SPLITS)}" for name in names())
    tiers = [f"{prefix}:{'|'.join(splits)}" for f in registry().values() for prefix, splits in f.tiers.items()]
    return f"FAMILY:SPLIT ({plain})" + "".join(f" or {tier}" for tier in tiers)


def parse_selector(selector: str) -> tuple[str, str]:
    """``FAMILY:SPLIT`` -> (family, stored split). A tier's ``PREFIX:SPLIT`` (``backend-lite:train``) is
    its family's tasks under the tier's stored split, whose name is accepted too (``backend:lite-train``)."""
    prefix, _, split = selector.partition(":")
    for found in registry().values():
        tier = found.tiers.get(prefix, {})
        if split in tier:
            return found.name, tier[split]
        stored = {s for splits in found.tiers.values() for s in splits.values()}
        if prefix == found.name and (split in SPLITS or split in stored):
            return found.name, split
    raise ValueError(f"--tasks takes {selectors_help()}; got {selector!r}")


def family_of_selector(selector: str) -> TaskFamily:
    """The family a task selector reads from (its tier's family for a tier's selector)."""
    return family(parse_selector(selector)[0])


def family_of_record(record: dict) -> TaskFamily:
    """The family a task record names (``family``: colbench's exports name it), else the one family that claims it
    (TaskFamily.claims). None or several claiming it is an error naming them (give --family): no family wins by its
    place in the registry."""
    if record.get("family") is not None:
        return family(record["family"])
    claimants = [f for f in registry().values() if f.claims(record)]
    if len(claimants) != 1:
        which = ", ".join(f.name for f in claimants) or "no family"
        raise UnknownFamily(f"{which} claim{'s' if len(claimants) == 1 else ''} this task record: name its family"
                            " (--family)")
    return claimants[0]


def help_text() -> str:
    """What --family options say about their choices."""
    return "; ".join(f"{f.name}: {f.summary}" for f in registry().values())


__all__ = ["DEFAULT_FAMILY", "FAMILIES", "TaskFamily", "UnknownFamily", "family", "family_of_record",
           "family_of_selector", "help_text", "names", "parse_selector", "registry", "selectors_help"]
