"""`colbench serve`: a vLLM server of a policy on this machine (colbench.engines.vllm_server says how and why).

The embedded model, a folder or a hub id is served as itself; a checkpoint by its merged weights where it has them,
else as its LoRA adapter on top of its base, under the checkpoint's name (``ckpt-7``), so that
``--served-model ckpt-7 --model ckpt:7`` samples from exactly the trained policy.
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from colbench.engines.vllm_server import DEFAULT_MAX_MODEL_LEN, ServerSpec, spec_for_source
from colbench.model_refs import DEFAULT_MODEL, EMBEDDED_REF, checkpoint_part, resolve_model
from colbench.options import check, option


@dataclass
class ServeConfig:
    """How `colbench serve` starts vLLM (each field's help is its documentation)."""

    model: str = option(DEFAULT_MODEL, (
        f"What to serve: '{DEFAULT_MODEL}' (embedded), a local folder, a hub id, or ckpt:<id> (its merged weights, or"
        " its LoRA adapter on its base, served as ckpt-<id>)."
    ))
    served_name: str | None = option(None, (
        "The name requests ask for (--served-model of rollout and policy fit). Default: the model's own "
        f"('{EMBEDDED_REF}', the folder's name, ckpt-<id>)."
    ))
    host: str = option("127.0.0.1", "Address to listen on (loopback: only this machine's processes reach it).")
    port: int = option(8000, "Port to listen on.", min=1, max=65535)
    max_model_len: int = option(DEFAULT_MAX_MODEL_LEN, (
        "Longest prompt plus completion, in tokens; on the CPU build also the scheduler's batch (no chunked prefill)."
    ), min=16)
    max_lora_rank: int = option(16, "Largest LoRA rank the server accepts (online RL's --lora-rank must fit).", min=1)
    lora: bool = option(True, (
        "Serve LoRA adapters, loadable at run time (online RL loads each step's): --enable-lora and"
        " VLLM_ALLOW_RUNTIME_LORA_UPDATING=True."
    ))
    dtype: str = option("float32", (
        "Weights' and arithmetic's type. float32 is the policy the trainers score; bfloat16 samples a slightly"
        " different one (its log-probs 0.02-0.2 nats off), which a served run's sampler_ratio and mismatch show."
    ), choices=("float32", "bfloat16", "float16", "auto"))
    kv_cache_gib: float = option(1.0, "CPU build: memory for the KV cache, GiB (VLLM_CPU_KVCACHE_SPACE).", min=0.1)
    threads: str | None = option(None, (
        "CPU build: the cores its threads bind to (VLLM_CPU_OMP_THREADS_BIND, e.g. 0-1). Default: every core this"
        " process may use."
    ))
    log_requests: bool = option(False, "Log each request's sampling parameters as vLLM applied them.")
    vllm_args: str = option("", (
        "Further vLLM server flags, passed as written after colbench's, e.g. '--tensor-parallel-size 4"
        " --gpu-memory-utilization 0.25' on a GPU node."
    ))
    log: str | None = option(None, "The server's log file. Default: colbench-vllm-<port>.log in the temp folder.")
    vllm_python: str | None = option(None, (
        "The Python whose environment holds vLLM. Default: $COLBENCH_VLLM_PYTHON, else the checkout's .venv-vllm"
        " (the CPU build, made by `make test`), else this one (upstream vLLM on a GPU)."
    ))
    startup_timeout_s: float = option(600.0, "Seconds to wait for the server to answer /health.", min=1.0)
    detach: bool = option(False, "Return once the server is ready, leaving it running (stop it with the printed kill).")

    def __post_init__(self):
        check(self)
        try:
            shlex.split(self.vllm_args)
        except ValueError as error:
            raise ValueError(f"vllm_args cannot be read as flags ({error}): {self.vllm_args!r}") from None


def served_name_of(ref: str) -> str:
    """The name a served model goes by when none is given: ckpt:7 → ckpt-7, a folder → its name."""
    checkpoint = checkpoint_part(ref)
    if checkpoint is not None:
        return f"ckpt-{checkpoint}"
    source = resolve_model(ref)
    return source.ref if source.ref == EMBEDDED_REF else Path(source.base).name or source.base


def server_spec(config: ServeConfig, checkpoint_lookup=None) -> ServerSpec:
    """The server to start for ``config`` (raises ModelNotFound for a model it cannot find)."""
    return spec_for_source(resolve_model(config.model, checkpoint_lookup),
                           config.served_name or served_name_of(config.model), host=config.host, port=config.port,
                           lora=config.lora, max_lora_rank=config.max_lora_rank, max_model_len=config.max_model_len,
                           dtype=config.dtype, kv_cache_gib=config.kv_cache_gib, threads=config.threads,
                           log_requests=config.log_requests, extra_args=tuple(shlex.split(config.vllm_args)))
