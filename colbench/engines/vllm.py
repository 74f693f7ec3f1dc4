"""Generation with vLLM's offline engine, across every visible GPU (or on the CPU build's cores).

vLLM is an optional dependency (``pip install 'colbench[vllm]'`` on a GPU): it is imported only
when this engine is built. Its CPU build lives in an environment of its own (.venv-vllm), where
this engine runs too (tests/test_vllm_real.py); from colbench's own environment a CPU machine
serves it instead (`colbench serve`, --engine openai). It computes in float32 unless asked,
and a policy sampled in another type is stored under its own name (policy_name). A checkpoint's
LoRA adapter is served with a ``LoRARequest`` on top of the base weights, without merging.
"""
from __future__ import annotations

import dataclasses
import os
import time

from colbench.engines.base import Engine, EngineError, Generation, Message, Sample, SamplingParams
from colbench.engines.vllm_server import CPU_ENGINE_ARGS, DEFAULT_MAX_MODEL_LEN, cpu_environment
from colbench.model_refs import ModelSource, resolve_model

MISSING = "vLLM is not installed: pip install 'colbench[vllm]'"
# The CPU build cannot share colbench's environment (engines/vllm_server.py): it is served, not imported.
ELSEWHERE = ("vLLM is not in this environment; its CPU build is, in {python}, which cannot hold colbench's"
             " transformers: serve the policy with `colbench serve` and use --engine openai")


def import_vllm():
    try:
        import vllm
    except ImportError:
        from colbench.engines.vllm_server import repo_venv

        python = repo_venv() / "bin" / "python"
        raise EngineError(ELSEWHERE.format(python=python) if python.exists() else MISSING) from None
    return vllm


def policy_name(ref: str, dtype: str) -> str:
    """The stored policy name of ``ref`` sampled in ``dtype``: float32 is the policy itself; another type samples a
    slightly different model, stored apart (as ct2's int8: ``vllm-bfloat16:smollm2``)."""
    return ref if dtype == "float32" else f"vllm-{dtype}:{ref}"


class VLLMEngine(Engine):
    kind = "vllm"

    def __init__(
        self,
        source: ModelSource | str,
        *,
        tensor_parallel_size: int | None = None,
        gpu_memory_utilization: float = 0.85,
        max_model_len: int | None = None,
        max_lora_rank: int = 64,
        dtype: str = "float32",
        model_ref: str | None = None,
        checkpoint_lookup=None,
        **llm_options,
    ):
        vllm = import_vllm()  # before resolving: a missing vLLM should not wait for a conversion
        from vllm.lora.request import LoRARequest

        if not isinstance(source, ModelSource):
            source = resolve_model(source, checkpoint_lookup)
        self.source = source
        self.model_ref = model_ref or policy_name(source.ref, dtype)
        if tensor_parallel_size is None:
            import torch

            tensor_parallel_size = max(1, torch.cuda.device_count())
        options = dict(
            model=source.base,
            tensor_parallel_size=tensor_parallel_size,
            gpu_memory_utilization=gpu_memory_utilization,
            dtype=dtype,
            enable_lora=source.adapter is not None,
            **llm_options,
        )
        from vllm.platforms import current_platform

        if current_platform.is_cpu():  # the CPU build's seed-safe scheduling and its memory (vllm_server)
            max_model_len = max_model_len or DEFAULT_MAX_MODEL_LEN
            options = CPU_ENGINE_ARGS | {"max_num_batched_tokens": max_model_len} | options
            options.pop("gpu_memory_utilization")
            for name, value in cpu_environment().items():  # the engine's processes read them at start
                os.environ.setdefault(name, value)
        if max_model_len:
            options["max_model_len"] = max_model_len
        if source.adapter:
            options["max_lora_rank"] = max_lora_rank
        # vLLM >= 0.10 can say which log-probs to return; we want the raw distribution's
        # (temperature 1), as the HF engine records. (Older V0 engines returned processed ones.)
        if "logprobs_mode" in {f.name for f in dataclasses.fields(vllm.EngineArgs)}:
            options.setdefault("logprobs_mode", "raw_logprobs")
        try:
            self.llm = vllm.LLM(**options)
        except Exception as err:  # vLLM raises many kinds; the user needs the first line
            reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise EngineError(f"vLLM could not start {self.model_ref}: {reason}") from err
        self.tokenizer = self.llm.get_tokenizer()
        self.lora = LoRARequest("adapter", 1, str(source.adapter)) if source.adapter else None

    def render_prompt(self, conversation: list[Message]) -> str:
        return self.tokenizer.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True)

    def generate(self, conversations: list[list[Message]], params: SamplingParams) -> list[Generation]:
        return self.generate_from_prompts([self.render_prompt(c) for c in conversations], params)

    def generate_from_prompts(self, prompts: list[str], params: SamplingParams) -> list[Generation]:
        """Continue prompts that are already templated (a stored turn's exact prompt: SWEET's candidates)."""
        vllm = import_vllm()
        # Tokenize ourselves without special tokens: the template already wrote BOS.
        prompt_ids = [self.tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
        greedy = params.temperature <= 0
        sampling = vllm.SamplingParams(
            n=1 if greedy else params.n,  # some vLLM versions refuse n > 1 when greedy
            temperature=0.0 if greedy else params.temperature,
            top_p=1.0, top_k=-1, min_p=0.0, repetition_penalty=1.0,  # every filter off: the log-probs' distribution
            max_tokens=params.max_new_tokens,
            seed=params.seed,
            logprobs=0,  # 0 = only the sampled token's log-prob
        )
        t0 = time.perf_counter()
        outputs = self.llm.generate(
            [{"prompt_token_ids": ids} for ids in prompt_ids], sampling, lora_request=self.lora, use_tqdm=False
        )
        elapsed = time.perf_counter() - t0  # one call for the whole batch: each shares its time
        generations = []
        for prompt, ids, out in zip(prompts, prompt_ids, outputs):
            samples = []
            for completion in out.outputs:
                token_ids = list(completion.token_ids)
                logprobs = [step[tok].logprob for tok, step in zip(token_ids, completion.logprobs or [])]
                samples.append(
                    Sample(
                        text=completion.text,
                        token_ids=token_ids,
                        token_logprobs=logprobs,
                        finish_reason="length" if completion.finish_reason == "length" else "stop",
                    )
                )
            if greedy:  # n identical greedy continuations
                first = samples[0]
                samples = [
                    Sample(first.text, list(first.token_ids), list(first.token_logprobs), first.finish_reason)
                    for _ in range(params.n)
                ]
            generations.append(
                Generation(prompt_text=prompt, prompt_tokens=len(ids), samples=samples, latency_s=elapsed)
            )
        return generations

    def close(self) -> None:
        if self.llm is not None:  # its engine core and workers are processes of their own: stop them now
            self.llm.llm_engine.engine_core.shutdown()
        self.llm = None
        try:
            import torch

            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except ImportError:
            pass
