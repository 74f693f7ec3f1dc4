"""Generation engines, and a factory to build one by name.

Engines are imported lazily: each pulls in heavy or optional packages (torch and
transformers, vLLM, an HTTP client) that a given command may not need.
"""
from __future__ import annotations

from colbench.engines.base import Engine, EngineError, Generation, Message, Sample, SamplingParams

KINDS = ("hf", "transformers", "vllm", "openai")

__all__ = ["Engine", "EngineError", "Generation", "Message", "Sample", "SamplingParams", "KINDS", "make_engine"]


def make_engine(kind: str, model_ref: str, **opts) -> Engine:
    """Build an engine: ``hf`` (alias ``transformers``), ``vllm`` or ``openai``.

    For ``hf`` and ``vllm``, ``model_ref`` goes through ``colbench.model_refs.resolve_model``
    (pass ``checkpoint_lookup=`` to resolve ``ckpt:<id>``); other options go to the
    engine. For ``openai``, ``model_ref`` is the served model's name and ``base_url``
    the server's address.
    """
    kind = (kind or "").strip().lower()
    if kind in ("hf", "transformers"):
        from colbench.engines.hf import HFEngine

        return HFEngine(model_ref, **opts)
    if kind == "vllm":
        from colbench.engines.vllm import VLLMEngine

        return VLLMEngine(model_ref, **opts)
    if kind == "openai":
        from colbench.engines.openai import OpenAIEngine

        opts.pop("checkpoint_lookup", None)  # a served model is named by the server
        return OpenAIEngine(model_ref, **opts)
    raise EngineError(f"unknown engine {kind!r}: choose one of hf, transformers, vllm, openai")
