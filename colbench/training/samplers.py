"""What samples SWEET-RL's candidate turns from the policy as training starts, by name (PolicyConfig.sampler).

Each sampler is a factory ``(db, recipe, start) -> Engine``: ``start`` is the policy's model reference as training
starts (the base model, or the checkpoint it continues), ``recipe`` the policy trainer (its config, tokenizer and
the model being trained). Every sampler draws from the same distribution; the store keeps their candidates apart
(their sampling key names the sampler). The registry also loads the ``colbench.samplers`` entry points.

Traits:
- ``one_process``: it cannot sample from several training processes at once (`colbench launch`).
- ``served``: it asks a server (--base-url) that serves the policy.
- ``trained_model``: it runs the model being trained itself, which stays loaded after sampling.
"""
from __future__ import annotations

from colbench.registry import Registry

AUTO = "auto"  # the engine `rollout --engine auto` would pick for the policy: ct2 on a CPU, else hf

SAMPLERS = Registry("candidate sampler", entry_points="colbench.samplers",
                    traits={"one_process": False, "served": False, "trained_model": False})


@SAMPLERS.register("hf", "the loaded model itself (under --shard full, an unsharded copy of the starting weights on "
                   "each process)", trained_model=True)
def _hf(db, recipe, start: str):
    from colbench.engines.hf import HFEngine

    cfg = recipe.config
    return HFEngine(model=recipe.starting_policy(), tokenizer=recipe.tokenizer, max_batch_size=cfg.sample_batch_size,
                    model_ref="training")


@SAMPLERS.register("ct2", "CTranslate2 on the same weights: its log-probs within 1e-3 nats, 2-4x faster on a CPU")
def _ct2(db, recipe, start: str):
    from colbench.wiring import build_engine

    return build_engine(db, "ct2", start, max_batch_size=recipe.config.sample_batch_size)


@SAMPLERS.register("vllm", "vLLM's offline engine on the same weights, one process only; needs the vllm package",
                   one_process=True)
def _vllm(db, recipe, start: str):
    from colbench.wiring import build_engine

    return build_engine(db, "vllm", start, max_batch_size=recipe.config.sample_batch_size)


@SAMPLERS.register("openai", "a served OpenAI-compatible server, e.g. `vllm serve` of the same weights, at --base-url:"
                   " prompts go as the stored token ids to /v1/completions and the sampled ids and their log-probs"
                   " come back (vLLM's return_token_ids or return_tokens_as_token_ids)", served=True)
def _openai(db, recipe, start: str):
    from colbench.engines.openai import OpenAIEngine

    cfg = recipe.config
    return OpenAIEngine(served_name(cfg), cfg.base_url, tokenizer=recipe.tokenizer)


def is_served(name: str) -> bool:
    """Whether the sampler ``name`` (``auto`` included: never served) asks a server."""
    return name != AUTO and SAMPLERS.get(name).served


def served_name(config) -> str:
    """The name a served sampler's server knows the policy by: --served-model, else the only model it lists."""
    from colbench.engines.openai import served_model

    return config.served_model or served_model(config.base_url)


def sampler_help() -> str:
    return (f"sweet: what samples the candidates from the policy as training starts: {SAMPLERS.help()}; or {AUTO}:"
            " the engine `rollout --engine auto` would pick for that policy (ct2 on a CPU, else hf).")
