"""``--engine vllm-serve``: the policy behind a vLLM server that this command starts and stops itself.

On a CPU the fastest way to roll out many dialogues is vLLM's CPU build behind its server (docs/performance.md: 3x
ct2 on a backend-lite rollout on 2 cores: it batches continuously and caches the prefixes every turn repeats), but
that build lives in its own environment (.venv-vllm), so colbench cannot import it: `colbench serve` and
``--engine openai`` reach it over HTTP. This engine does both for one command: given any model colbench can load
(the embedded one, a folder, ``ckpt:<id>`` with full weights or an adapter) it starts `colbench serve`'s server on
a free loopback port at its first generation (a rollout with nothing left to do starts none), talks to it as
``--engine openai --served-model`` does (token ids in, sampled ids and log-probs out, unfiltered sampling: the
policy's own distribution, which tests/test_vllm_real.py checks against the trainer's log-probs), and stops it on
close. Dialogues are stored under the model's own name (``ckpt:7``), as the local engines store them.

The server goes when the process that started it goes, kill -9 included (engines/watchdog.py), so it never outlives
its command.
"""
from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path

from colbench.engines.base import EngineError, Generation, Message, SamplingParams
from colbench.engines.openai import OpenAIEngine
from colbench.engines.vllm_server import (DEFAULT_MAX_MODEL_LEN, VLLMServer, find_vllm, free_port, request_name,
                                          spec_for_source)
from colbench.model_refs import ModelSource, load_tokenizer, resolve_model

def kv_cache_gib() -> int:
    """The server's KV cache: a sixth of the machine's memory in whole GiB (the CPU build takes no fraction), from 1
    to 4. 4 GiB holds about 90,000 tokens of SmolLM2 (46 KB a token in float32), 40 backend dialogues of 2,000 tokens
    at once; the server queues the rest."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return max(1, min(4, int(total / 6)))


SERVED_NAME = "policy"
#: A request's wait, in seconds: it queues behind the others and decodes at the server's shared rate, so on 2 cores
#: 60 requests of 256 tokens in flight take minutes each (a 60-s timeout failed a read here). The server is this
#: command's own: if it dies, requests fail at once (connection refused), not by this timeout.
REQUEST_TIMEOUT_S = 3600.0


def context_length(source: ModelSource) -> int:
    """The model's own context (config.json's max_position_embeddings), so that the server accepts every prompt a
    local engine would run."""
    try:
        config = json.loads((Path(source.base) / "config.json").read_text())
    except (OSError, ValueError):
        return DEFAULT_MAX_MODEL_LEN
    return int(config.get("max_position_embeddings") or DEFAULT_MAX_MODEL_LEN)


class ServedVLLMEngine(OpenAIEngine):
    kind = "vllm-serve"

    def __init__(self, source: ModelSource | str, *, compute_type: str = "float32", concurrency: int | None = None,
                 vllm_python: str | None = None, startup_timeout_s: float = 600.0, checkpoint_lookup=None):
        if not isinstance(source, ModelSource):
            source = resolve_model(source, checkpoint_lookup)
        if compute_type != "float32":  # another type samples another policy (vllm.policy_name); not offered here
            raise EngineError(f"--engine vllm-serve computes in float32, not {compute_type}")
        self.install = find_vllm(vllm_python)
        self.startup_timeout_s = startup_timeout_s
        # Port 0 until the first generation picks one (_start).
        self.spec = spec_for_source(source, SERVED_NAME, port=0, lora=False,
                                    max_model_len=context_length(source), kv_cache_gib=kv_cache_gib())
        self.server = VLLMServer(self.spec, self.install)
        super().__init__(request_name(self.spec), self.server.base_url, tokenizer=load_tokenizer(source),
                         model_ref=source.ref, timeout_s=REQUEST_TIMEOUT_S,
                         **({"concurrency": concurrency} if concurrency else {}))
        self.started = False

    def _start(self) -> None:
        """The server, at the first generation: a rollout that finds its dialogues done never waits for one."""
        if self.started:
            return
        self.started = True
        # The port is picked here, not at build: an online step trains for minutes before it samples, and a port
        # picked that long before the server binds it may be another process's by then.
        self.spec = dataclasses.replace(self.spec, port=free_port())
        self.server = VLLMServer(self.spec, self.install)
        self.client.close()  # the placeholder's; its asynchronous twin was never made (no request went out)
        self._connect(self.server.base_url)
        self.server.start()
        seconds = self.server.wait_ready(self.startup_timeout_s)
        # Said: a read's first minute goes to it (benchmarks/vllm_serve_rollout.py reads the line).
        print(f"vllm-serve: {self.model_ref} served by {self.install.describe()} at {self.server.base_url}, ready in"
              f" {seconds:.0f} s (log: {self.server.log})", file=sys.stderr, flush=True)

    def generate(self, conversations: list[list[Message]], params: SamplingParams) -> list[Generation]:
        self._start()
        return super().generate(conversations, params)

    def generate_from_prompts(self, prompts: list[str], params: SamplingParams) -> list[Generation]:
        self._start()
        return super().generate_from_prompts(prompts, params)

    async def agenerate(self, conversation: list[Message], params: SamplingParams) -> Generation:
        # The first call blocks the event loop while the server starts: every other dialogue is waiting for it too.
        self._start()
        return await super().agenerate(conversation, params)

    def arithmetic(self) -> dict:
        return {"vllm": self.install.describe()}

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.server.stop()
