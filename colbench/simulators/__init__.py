"""Simulated humans. ``make_simulator`` builds one from a short spec string:

- ``builtin``: the deterministic rule-based stand-in of the task family (CPU, CI; not for
  paper numbers; see ``rulebased/``);
- ``endpoint:<base_url>#<model>``: a model behind an OpenAI-compatible server,
  e.g. ``endpoint:http://127.0.0.1:8000/v1#meta-llama/Llama-3.1-70B-Instruct``;
- ``local:<model_ref>``: a model in this process, built by ``engine_factory(model_ref)``.

Frontend tasks (the simulated human compares screenshots, see ``SimRequest.images``/``dom``):

- ``vision:<base_url>#<model>``: a vision-language model behind an OpenAI-compatible server.
"""
from __future__ import annotations

from typing import Callable

from colbench.engines.base import Engine
from colbench.families import DEFAULT_FAMILY, family as family_named
from colbench.simulators.base import SimReply, SimRequest, Simulator

SPEC_HELP = (
    "expected 'builtin', 'endpoint:<base_url>#<model>' or 'local:<model_ref>' "
    "(frontend: 'builtin' or 'vision:<base_url>#<model>')"
)


def make_simulator(spec: str, engine_factory: Callable[[str], Engine] | None = None, family: str = DEFAULT_FAMILY, **served) -> Simulator:
    """The simulator a spec names, for tasks of ``family`` (``builtin`` is the family's rule-based one).
    ``served`` (timeout_s, max_retries, concurrency) goes to a simulator behind a server."""
    kind, _, rest = spec.strip().partition(":")
    if kind == "builtin" and not rest:
        return family_named(family).builtin_simulator()
    if kind == "endpoint":
        base_url, _, model = rest.partition("#")
        if not base_url.startswith(("http://", "https://")) or not model:
            raise ValueError(f"bad simulator spec {spec!r}: {SPEC_HELP}")
        from colbench.simulators.endpoint import EndpointSimulator

        return EndpointSimulator(model, base_url, **served)
    if kind == "builtin-frontend" and not rest:  # the frontend builtin's stored name, still accepted
        from colbench.simulators.rulebased.frontend import FrontendBuiltinSimulator

        return FrontendBuiltinSimulator()
    if kind == "vision":
        base_url, _, model = rest.partition("#")
        if not base_url.startswith(("http://", "https://")) or not model:
            raise ValueError(f"bad simulator spec {spec!r}: {SPEC_HELP}")
        from colbench.simulators.vision import VisionEndpointSimulator

        return VisionEndpointSimulator(model, base_url, **served)
    if kind == "local" and rest:
        if engine_factory is None:
            raise ValueError(f"simulator spec {spec!r} needs an engine factory to load {rest!r}")
        from colbench.simulators.local import LocalModelSimulator

        return LocalModelSimulator(engine_factory(rest), owns_engine=True)
    raise ValueError(f"bad simulator spec {spec!r}: {SPEC_HELP}")


__all__ = ["SimReply", "SimRequest", "Simulator", "make_simulator"]
