"""The one base of every error a user can cause and fix.

A ``ColbenchError``'s message is one line written for the person at the command line
(what went wrong and, where it helps, what to do); the CLI prints it and exits 1 without
a traceback. Each kind subclasses it where it is raised (StoreError, FormatError,
ModelNotFound, EngineError, EndpointError, SandboxUnavailable, NothingToTrain, ...), so a
caller can catch one kind or all of them, and nothing is recognised by its name.
"""
from __future__ import annotations


class ColbenchError(Exception):
    """An error with a one-line message for the user."""


class FormatError(ColbenchError, ValueError):
    """A record that does not follow the official format. The message names file and line.

    Here rather than in colbench.official, so the task families can raise it without importing the formats.
    """


class ModelNotFound(ColbenchError, LookupError):
    """A model reference that cannot be resolved or loaded; the message is one line.

    Here rather than in colbench.model_refs (where callers import it from), so colbench.model_cache
    can raise it without importing the resolver that imports the cache.
    """

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))  # keep it on one line
