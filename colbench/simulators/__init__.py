"""Simulated humans: the registry of them by kind, and ``make_simulator``, which builds one
from a short spec string (``builtin``, ``endpoint:<base_url>#<model>``, ...; SIMULATORS lists
them with their help).

A new simulator is one module (a subclass of simulators.base.Simulator) and its registration,
below or in a separate package under the ``colbench.simulators`` entry points (docs/plugins.md).
A factory is called as ``factory(argument, builtin=..., engine_factory=..., **served)``:
``argument`` is what follows the kind in the spec, ``builtin`` the tasks' family's own simulator
(a family knows its simulator, so the family passes it in: this package sits below the
families), ``served`` (timeout_s, max_retries, concurrency) what a simulator behind a server
takes; each factory takes what it uses.
"""
from __future__ import annotations

from typing import Callable

from colbench.engines.base import Engine
from colbench.registry import Registry
from colbench.simulators.base import SimReply, SimRequest, Simulator

SIMULATORS = Registry("simulator", entry_points="colbench.simulators")


def simulator_help() -> str:
    """--simulator's help, read from the registry."""
    return f"Simulated human: {SIMULATORS.help()}."


@SIMULATORS.register("builtin", "the family's rule-based one: deterministic, for CPUs and CI, not for paper numbers")
def _builtin(argument: str, *, builtin: Callable[[], Simulator] | None = None, **unused) -> Simulator:
    if builtin is None:
        raise ValueError("simulator 'builtin' is the task family's own: build it with the family's builtin_simulator")
    return builtin()


@SIMULATORS.register("builtin-frontend", "the frontend one's stored name", hidden=True)  # still accepted
def _builtin_frontend(argument: str, **ignored) -> Simulator:
    from colbench.simulators.rulebased.frontend import FrontendBuiltinSimulator

    return FrontendBuiltinSimulator()


def _server(spec: str, argument: str) -> tuple[str, str]:
    """``<base_url>#<model>`` → (base_url, model)."""
    base_url, _, model = argument.partition("#")
    if not base_url.startswith(("http://", "https://")) or not model:
        raise ValueError(f"bad simulator {spec!r}: write it {SIMULATORS.get(spec).spelling}")
    return base_url, model


@SIMULATORS.register("endpoint", "a model behind an OpenAI-compatible server, e.g. the paper's Llama-3.1-70B-Instruct",
                     argument="<base_url>#<model>", argument_required=True)
def _endpoint(argument: str, *, builtin=None, engine_factory=None, **served) -> Simulator:
    from colbench.simulators.endpoint import EndpointSimulator

    base_url, model = _server(f"endpoint:{argument}", argument)
    return EndpointSimulator(model, base_url, **served)


@SIMULATORS.register("local", "a model in this process, on the policy's local engine", argument="<model>",
                     argument_required=True)
def _local(argument: str, *, builtin=None, engine_factory=None, **served) -> Simulator:
    if engine_factory is None:
        raise ValueError(f"simulator spec 'local:{argument}' needs an engine factory to load {argument!r}")
    from colbench.simulators.local import LocalModelSimulator

    return LocalModelSimulator(engine_factory(argument), owns_engine=True)


@SIMULATORS.register("vision",
                     "frontend: a vision-language model behind an OpenAI-compatible server, comparing screenshots",
                     argument="<base_url>#<model>", argument_required=True)
def _vision(argument: str, *, builtin=None, engine_factory=None, **served) -> Simulator:
    from colbench.simulators.vision import VisionEndpointSimulator

    base_url, model = _server(f"vision:{argument}", argument)
    return VisionEndpointSimulator(model, base_url, **served)


def make_simulator(spec: str, engine_factory: Callable[[str], Engine] | None = None,
                   builtin: Callable[[], Simulator] | None = None, **served) -> Simulator:
    """The simulator a spec names; ``builtin`` makes the tasks' family's rule-based one (colbench.wiring
    passes the family's). ``served`` (timeout_s, max_retries, concurrency) goes to a simulator behind a server."""
    choice, argument = SIMULATORS.parse(spec)
    return choice.factory(argument, builtin=builtin, engine_factory=engine_factory, **served)


__all__ = ["SIMULATORS", "SimReply", "SimRequest", "Simulator", "make_simulator", "simulator_help"]
