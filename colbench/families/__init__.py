"""Task families: everything that differs between backend and frontend tasks, behind one interface.

A family is one object (a ``TaskFamily`` subclass in its own module, registered below).
Code elsewhere asks it (``family(name).env(...)``, ``family(name).reply_limit``) and never
compares a family's name, so a new family is its module, one line in ``_FAMILIES`` and
its tasks; ``tests/test_families.py`` runs the common contract over every registered family.
"""
from __future__ import annotations

from colbench.families.backend import BackendFamily
from colbench.families.base import TaskFamily, UnknownFamily
from colbench.families.frontend import FrontendFamily
from colbench.tasks.spec import SPLITS

_FAMILIES: dict[str, TaskFamily] = {f.name: f for f in (BackendFamily(), FrontendFamily())}
DEFAULT_FAMILY = BackendFamily.name  # the paper's main setting: what --family and --tasks mean when not given


def registry() -> dict[str, TaskFamily]:
    """Every registered family by name, in registration order."""
    return dict(_FAMILIES)


def names() -> tuple[str, ...]:
    return tuple(registry())


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
    """The family an official task record belongs to when its file does not say."""
    return next(f for f in registry().values() if f.claims(record))


def help_text() -> str:
    """What --family options say about their choices."""
    return "; ".join(f"{f.name}: {f.summary}" for f in registry().values())


__all__ = ["DEFAULT_FAMILY", "TaskFamily", "UnknownFamily", "family", "family_of_record", "family_of_selector",
           "help_text", "names", "parse_selector", "registry",
           "selectors_help"]
