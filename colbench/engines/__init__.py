"""Generation engines, and a factory to build one by name.

Engines are imported lazily: each pulls in heavy or optional packages (torch and
transformers, vLLM, an HTTP client) that a given command may not need.
"""
from __future__ import annotations

import json
from pathlib import Path

from colbench.engines.base import Engine, EngineError, Generation, Message, Sample, SamplingParams

KINDS = ("hf", "transformers", "ct2", "vllm", "openai", "scripted")

# Architectures the ct2 engine is the default for: CTranslate2 converts more, but these are
# the ones whose converted log-probs were checked against transformers (tests/test_engine_ct2.py).
CT2_MODEL_TYPES = frozenset({"llama"})

__all__ = [
    "Engine", "EngineError", "Generation", "Message", "Sample", "SamplingParams", "KINDS", "make_engine", "default_engine",
]


def make_engine(kind: str, model_ref: str, **opts) -> Engine:
    """Build an engine: ``hf`` (alias ``transformers``), ``ct2``, ``vllm``, ``openai`` or ``scripted``.

    For ``hf``, ``ct2`` and ``vllm``, ``model_ref`` goes through ``colbench.model_refs.resolve_model``
    (pass ``checkpoint_lookup=`` to resolve ``ckpt:<id>``); other options go to the
    engine. For ``openai``, ``model_ref`` is the served model's name and ``base_url``
    the server's address. For ``scripted`` (a rule-following agent on backend-lite tasks),
    ``model_ref`` is the policy (``expert``, ``skip@0.5``, ...), or the kind carries it:
    ``make_engine("scripted:expert", ...)``.
    """
    kind = (kind or "").strip().lower()
    if kind in ("hf", "transformers"):
        from colbench.engines.hf import HFEngine

        return HFEngine(model_ref, **opts)
    if kind == "ct2":
        from colbench.engines.ct2 import CT2Engine

        return CT2Engine(model_ref, **opts)
    if kind == "vllm":
        from colbench.engines.vllm import VLLMEngine

        return VLLMEngine(model_ref, **opts)
    if kind == "openai":
        from colbench.engines.openai import OpenAIEngine

        opts.pop("checkpoint_lookup", None)  # a served model is named by the server
        return OpenAIEngine(model_ref, **opts)
    if kind == "scripted" or kind.startswith("scripted:"):
        # Scripted agents (engines/scripted.py): the policy is named by the kind ("scripted:skip@0.5",
        # and then model_ref is not read) or, for the bare kind, by model_ref ("skip@0.5").
        from colbench.engines.scripted import ScriptedEngine

        return ScriptedEngine(kind.partition(":")[2] or model_ref, **opts)
    raise EngineError(f"unknown engine {kind!r}: choose one of hf, transformers, ct2, vllm, openai, scripted[:<policy>]")


def default_engine(model: str, device: str = "auto", checkpoint_lookup=None) -> str:
    """The engine kind to run ``model`` with when none is asked for: ``ct2`` on a CPU (device
    "cpu", or "auto" on a machine without CUDA) for the embedded model and local models of
    an architecture in CT2_MODEL_TYPES (pass ``checkpoint_lookup`` to look into ``ckpt:<id>``),
    where it is 5-6x faster than transformers in float32; ``hf`` otherwise.
    """
    import importlib.util

    from colbench import model_refs

    if importlib.util.find_spec("ctranslate2") is None:
        return "hf"
    if device not in ("cpu", "auto", None):
        return "hf"
    if device != "cpu" and model_refs.resolve_device(device) != "cpu":  # imports torch, as the engine would
        return "hf"
    ref = str(model).strip()
    if ref.lower() in model_refs.EMBEDDED_ALIASES:  # SmolLM2: a Llama (and resolving it may convert for ~40 s)
        return "ct2"
    try:
        source = model_refs.resolve_model(ref, checkpoint_lookup)
    except model_refs.ModelNotFound:
        return "hf"  # let the transformers engine report it
    config = Path(source.base) / "config.json"
    if not config.is_file():  # a hub id: its architecture is not known without fetching it
        return "hf"
    try:
        model_type = json.loads(config.read_text()).get("model_type")
    except (OSError, ValueError):
        return "hf"
    return "ct2" if model_type in CT2_MODEL_TYPES else "hf"
