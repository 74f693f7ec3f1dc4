"""ColBench inside other training frameworks: TRL's GRPOTrainer (``colbench.integrations.trl``) and verifiers
(``colbench.integrations.verifiers``).

An integration is a thin adapter over one core (``core.py``): colbench's own task selection, family
environment (the sandboxed grader under the official metric, or the browser and similarity),
simulated human and store writer drive every dialogue, so a framework's episode is scored exactly
as ``colbench rollout`` scores the same dialogue. docs/integrations.md says what each keeps of the
protocol and what it does not.

The frameworks are optional: ``pip install 'colbench[integrations]'`` pins the versions the
adapters were written and tested against. Importing an adapter without its library raises
``MissingIntegration``, one line naming that extra.
"""
from __future__ import annotations

from colbench.errors import ColbenchError

EXTRA = "pip install 'colbench[integrations]'"


class MissingIntegration(ColbenchError, ImportError):
    """A framework integration imported without its framework installed; one line naming the extra."""


def require(library: str, framework: str) -> None:
    """Import ``library`` or refuse, in one line, naming the extra that installs it."""
    import importlib

    try:
        importlib.import_module(library)
    except ImportError:
        raise MissingIntegration(f"colbench's {framework} integration needs {framework}, which is not installed:"
                                 f" {EXTRA}") from None


__all__ = ["EXTRA", "MissingIntegration", "require"]
