"""Sandbox backends for the grader, by the name --sandbox takes: SANDBOXES, in the order
``auto`` tries them, and ``none`` (a plain subprocess, not a sandbox).

A new sandbox is one module holding its backend class and its registration below. A backend
class has ``name``; ``check()`` (None when usable here, else why not, in one line);
``details()`` (what `colbench sandbox check` shows beside it); and ``start(slot, memory_mb,
hash_seed)``, which starts the grading server (runner.py) and returns its channel. The attack
suite (tests/test_sandbox_attacks.py) runs on every registered backend that ``confines``.
"""
from __future__ import annotations

from colbench.registry import Registry

from .base import SandboxUnavailable
from .bwrap import BwrapBackend
from .docker import DockerBackend
from .plain import PlainBackend

# confines: keeps graded code from this machine
SANDBOXES = Registry("sandbox", traits={"confines": True}, entry_points="colbench.sandboxes")
SANDBOXES.register("docker", "a container per worker; needs a Docker engine and the grading image")(DockerBackend)
SANDBOXES.register("bwrap", "bubblewrap namespaces, no daemon")(BwrapBackend)
SANDBOXES.register("none", "unsafe: a plain subprocess that can read this machine's files",
                   confines=False)(PlainBackend)

#: --sandbox auto: the first registered sandbox usable here.
AUTO = "auto"
CHOICES = (AUTO, *SANDBOXES.names())


def sandbox_help() -> str:
    """--sandbox's help, read from the registry."""
    return (
        f"Grading sandbox: {AUTO} (the first usable of {', '.join(c.name for c in SANDBOXES if c.confines)}),"
        f" {SANDBOXES.help()}."
    )


def resolve(sandbox: str):
    """A backend object for a --sandbox choice; "auto" takes the first confining one usable here."""
    if sandbox != AUTO and sandbox not in SANDBOXES:
        raise ValueError(f"sandbox must be one of {', '.join(CHOICES)}, not {sandbox!r}")
    if sandbox == AUTO:
        why_not = {}
        for choice in SANDBOXES:
            if choice.confines:
                why_not[choice.name] = choice.factory.check()
                if why_not[choice.name] is None:
                    return choice.factory()
        reasons = "; ".join(f"{name}: {why}" for name, why in why_not.items())
        raise SandboxUnavailable(
            (
                f"no sandbox for grading ({reasons}): install bubblewrap (apt-get install bubblewrap) or pass"
                " --sandbox none"
            )
        )
    backend = SANDBOXES.get(sandbox).factory
    why = backend.check()
    if why is not None:
        raise SandboxUnavailable(f"--sandbox {sandbox} is unavailable: {why}")
    return backend()
