"""Generation engines: the registry of them by name, and a factory to build one.

A new engine is one module: a subclass of engines.base.Engine and its ``@ENGINES.register(...)`` factory, in
colbench (imported below, beside the shipped ones) or in a separate package (one ``colbench.engines`` entry point;
docs/plugins.md).
"""
from __future__ import annotations

import json
from pathlib import Path

from colbench.engines.base import Engine, EngineError, Generation, Message, Sample, SamplingParams
from colbench.registry import Registry

# Architectures the ct2 engine is the default for: CTranslate2 converts more, but these are
# the ones whose converted log-probs were checked against transformers (tests/test_engine_ct2.py).
CT2_MODEL_TYPES = frozenset({"llama"})

#: Every engine, by the name --engine takes. A factory is called as ``factory(model, **options)``:
#: ``model`` is the model reference (a resolved ModelSource for the ``local`` engines, which load
#: weights here; a served model's name; a scripted policy), the options are the engine's own plus
#: those every builder may pass (device, max_batch_size, compute_type, checkpoint_lookup), which
#: each factory takes or drops. Engines import lazily: each pulls in packages a command may not need.
ENGINES = Registry("engine", error=EngineError, entry_points="colbench.engines", traits={
    "local": False,  # loads a model reference here (resolved once, by the builder, to a ModelSource)
    "served": False,  # the model runs behind a server at --base-url
})

#: --engine auto, beside the registered engines: the builder picks one (default_engine).
AUTO = "auto"
AUTO_HELP = (
    "ct2 on a CPU for the embedded model and Llama-family local models, hf otherwise; in process, as auto cannot"
    " assume vLLM: for many dialogues at once, vllm-serve (or `colbench serve` and --engine openai) is faster"
    " (docs/performance.md: 2-3x ct2 on a backend-lite rollout on 2 cores)"
)


def engine_help() -> str:
    """--engine's help, read from the registry."""
    return f"Generation engine: {AUTO} ({AUTO_HELP}), {ENGINES.help()}."


@ENGINES.register("hf", "transformers, also named so: exact, GPUs", aliases=("transformers",), local=True)
def _hf(model, *, compute_type=None, **options) -> Engine:
    from colbench.engines.hf import HFEngine

    return HFEngine(model, **options)  # compute_type is ct2's: transformers computes in the model's dtype


@ENGINES.register("ct2", "CTranslate2, the fast one on a CPU; the same policy as hf", local=True)
def _ct2(model, **options) -> Engine:
    from colbench.engines.ct2 import CT2Engine

    return CT2Engine(model, **options)


@ENGINES.register("vllm", "GPUs, many samples at once", local=True)
def _vllm(model, *, max_batch_size=None, compute_type=None, device=None, **options) -> Engine:
    from colbench.engines.vllm import VLLMEngine

    # vLLM schedules its own batches and picks its device from the build it is (CUDA, or the CPU build).
    return VLLMEngine(model, **options)


@ENGINES.register("vllm-serve", "vLLM's server (its CPU build from .venv-vllm here) started for this command and"
                  " stopped after: the fast one for many dialogues on a CPU, any model colbench loads", local=True)
def _vllm_serve(model, *, device=None, max_batch_size=None, **options) -> Engine:
    from colbench.engines.vllm_serve import ServedVLLMEngine

    return ServedVLLMEngine(model, **options)  # the server places and batches the model


@ENGINES.register("openai", "any OpenAI-compatible server; --model is the served model's name", served=True)
def _openai(model, *, checkpoint_lookup=None, device=None, max_batch_size=None, compute_type=None, **options) -> Engine:
    from colbench.engines.openai import OpenAIEngine

    return OpenAIEngine(model, **options)  # the server names, places and batches its model


@ENGINES.register("scripted", "rule-following agents for backend-lite tasks: expert, skip@P, irrelevant@P, early@K, "
                  "mixed@Q, extractor (an adversary of the simulated human, any backend task), or bare scripted"
                  " with the policy as --model; colbench/engines/scripted.py",
                  argument="<policy>")
def _scripted(policy, **options) -> Engine:
    from colbench.engines.scripted import ScriptedEngine

    return ScriptedEngine(policy, **options)


__all__ = [
    "Engine", "EngineError", "Generation", "Message", "Sample", "SamplingParams", "ENGINES", "AUTO", "make_engine",
    "default_engine",
]


def make_engine(kind: str, model_ref, **opts) -> Engine:
    """Build the engine ``kind`` names (one of ENGINES) for ``model_ref``.

    The local engines (registered local=True) take a ModelSource or a reference they resolve with
    ``colbench.model_refs.resolve_model`` (pass ``checkpoint_lookup=`` for ``ckpt:<id>``). For
    ``openai``, ``model_ref`` is the served model's name and ``base_url`` the server's address.
    A kind with an argument names the model itself (``make_engine("scripted:expert", ...)``),
    and then ``model_ref`` is not read.
    """
    choice, argument = ENGINES.parse(kind)
    return choice.factory(argument or model_ref, **opts)


def default_engine(model, device: str = "auto", checkpoint_lookup=None) -> str:
    """The engine kind to run ``model`` with when none is asked for: ``ct2`` on a CPU (device
    "cpu", or "auto" on a machine without CUDA) for the embedded model and local models of
    an architecture in CT2_MODEL_TYPES (``model``: a resolved ModelSource, or a reference; pass
    ``checkpoint_lookup`` to look into ``ckpt:<id>``),
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
    if isinstance(model, model_refs.ModelSource):
        source = model
    elif (
        str(model).strip().lower() in model_refs.EMBEDDED_ALIASES
    ):  # SmolLM2: a Llama (and resolving it may convert for ~40 s)
        return "ct2"
    else:
        try:
            source = model_refs.resolve_model(model, checkpoint_lookup)
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
