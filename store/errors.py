"""The store's one error type, apart from the engine so that migrations can raise it too."""
from __future__ import annotations

from colbench.errors import ColbenchError


class StoreError(ColbenchError, RuntimeError):
    """A problem with the database worth one line to the user."""


def one_line(exc: BaseException) -> str:
    message = str(exc).strip().splitlines()
    return message[0] if message else type(exc).__name__
