"""Sandbox backends for the grader: docker, bwrap, or none (a plain subprocess)."""
from __future__ import annotations

from .base import SandboxUnavailable
from .bwrap import BwrapBackend
from .docker import DockerBackend
from .plain import PlainBackend

CHOICES = ("auto", "bwrap", "docker", "none")


def resolve(sandbox: str):
    """A backend object for a --sandbox choice; "auto" prefers docker, then bwrap."""
    if sandbox not in CHOICES:
        raise ValueError(f"sandbox must be one of {', '.join(CHOICES)}, not {sandbox!r}")
    if sandbox == "none":
        return PlainBackend()
    if sandbox == "auto":
        if DockerBackend.check() is None:
            return DockerBackend()
        why = BwrapBackend.check()
        if why is None:
            return BwrapBackend()
        raise SandboxUnavailable(
            f"no sandbox for grading ({why}; no Docker engine either): "
            "install bubblewrap (apt-get install bubblewrap) or pass --sandbox none"
        )
    backend = DockerBackend if sandbox == "docker" else BwrapBackend
    why = backend.check()
    if why is not None:
        raise SandboxUnavailable(f"--sandbox {sandbox} is unavailable: {why}")
    return backend()
