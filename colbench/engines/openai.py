"""An engine backed by an OpenAI-compatible server (OpenAI, ``vllm serve``, ...).

The server applies its own chat template, which we cannot see, so the recorded
prompt is the message list itself as JSON: faithful, if not the exact token stream.
Token log-probs are stored when the server returns them (vLLM does; token ids it
does not, so ``Sample.token_ids`` stays empty).

Given the policy's tokenizer, the engine also continues prompts that are already
templated (:meth:`OpenAIEngine.generate_from_prompts`, SWEET's candidates): each goes
as token ids to ``/v1/completions`` and comes back as the sampled ids with their
log-probs (vLLM's ``return_token_ids`` / ``return_tokens_as_token_ids``), exactly what
the hf and ct2 engines record.

Rollouts call ``agenerate`` (one conversation, on the SDK's AsyncOpenAI, at most
``concurrency`` requests in flight); ``generate`` keeps the batched, threaded form for
callers without an event loop.
"""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from colbench.engines.base import Engine, EngineError, Generation, Message, Sample, SamplingParams
from colbench.openai_client import BoundedAsyncClient, ChatCompletion, EndpointError, OpenAIClient, dumps_messages

DEFAULT_CONCURRENCY = 64  # requests in flight; a vLLM server batches hundreds


class OpenAIEngine(Engine):
    kind = "openai"

    def __init__(
        self,
        model: str,
        base_url: str,
        api_key: str | None = None,
        timeout_s: float = 60,
        max_retries: int = 3,
        concurrency: int = DEFAULT_CONCURRENCY,
        *,
        logprobs: bool = True,
        tokenizer=None,
    ):
        """``logprobs=False`` for servers that reject the ``logprobs`` field. ``tokenizer``: the served
        model's (a transformers tokenizer), for :meth:`generate_from_prompts`."""
        self.model = model
        self.tokenizer = tokenizer
        self.base_url = base_url.rstrip("/")
        self.model_ref = f"openai:{model}@{self.base_url}"
        self.concurrency = max(1, int(concurrency))
        self.logprobs = logprobs
        self._client_options = {"api_key": api_key, "timeout_s": timeout_s, "max_retries": max_retries}
        self.client = OpenAIClient(self.base_url, **self._client_options)
        self._async = BoundedAsyncClient(self.base_url, self.concurrency, **self._client_options)

    def render_prompt(self, conversation: list[Message]) -> str:
        return dumps_messages(conversation)

    def generate(self, conversations: list[list[Message]], params: SamplingParams) -> list[Generation]:
        if not conversations:
            return []
        workers = min(self.concurrency, len(conversations))
        # The thread pool is what bounds requests in flight here.
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="openai-engine") as pool:
            futures = [pool.submit(self._one, conv, params) for conv in conversations]
            results = []
            for future in futures:
                try:
                    results.append(future.result())
                except EndpointError as exc:
                    for other in futures:
                        other.cancel()
                    raise EngineError(str(exc)) from None
        return results

    async def agenerate(self, conversation: list[Message], params: SamplingParams) -> Generation:
        """One conversation's samples, as soon as its own request returns."""
        async with self._async.slot() as client:
            start = time.monotonic()
            try:
                completion = await client.chat(self.model, conversation, **self._sampling(params))
            except EndpointError as exc:
                raise EngineError(str(exc)) from None
        return self._generation(conversation, params, completion, start)

    def _one(self, conversation: list[Message], params: SamplingParams) -> Generation:
        start = time.monotonic()
        completion = self.client.chat(self.model, conversation, **self._sampling(params))
        return self._generation(conversation, params, completion, start)

    def _sampling(self, params: SamplingParams) -> dict:
        return {"temperature": params.temperature, "max_tokens": params.max_new_tokens, "n": params.n,
                "seed": params.seed, "logprobs": self.logprobs}

    def _generation(self, conversation: list[Message], params: SamplingParams, completion: ChatCompletion, start: float) -> Generation:
        if len(completion.choices) != params.n:
            raise EngineError(f"endpoint {self.base_url} sent {len(completion.choices)} choices, asked for {params.n}")
        samples = [
            Sample(text=choice.text, token_logprobs=choice.token_logprobs,
                   finish_reason="length" if choice.finish_reason == "length" else "stop")
            for choice in completion.choices
        ]
        return Generation(
            prompt_text=self.render_prompt(conversation),
            prompt_tokens=completion.usage.get("prompt_tokens", 0),
            samples=samples,
            latency_s=time.monotonic() - start,
        )

    def generate_from_prompts(self, prompts: list[str], params: SamplingParams) -> list[Generation]:
        """Continue prompts that are already templated (a stored turn's exact prompt): each is encoded
        with the policy's tokenizer as training reads it (no special tokens added) and sent as ids, so
        the server continues exactly those tokens; the samples carry the sampled ids and log-probs."""
        if self.tokenizer is None:
            raise EngineError("the openai engine continues templated prompts only with the policy's tokenizer")
        if not prompts:
            return []
        ids = [self.tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
        workers = min(self.concurrency, len(prompts))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="openai-engine") as pool:
            futures = [pool.submit(self._continue, prompt, prompt_ids, params) for prompt, prompt_ids in zip(prompts, ids)]
            try:
                return [future.result() for future in futures]
            except EndpointError as exc:
                for other in futures:
                    other.cancel()
                raise EngineError(str(exc)) from None

    def _continue(self, prompt: str, prompt_ids: list[int], params: SamplingParams) -> Generation:
        start = time.monotonic()
        completion = self.client.complete_ids(self.model, prompt_ids, temperature=params.temperature, max_tokens=params.max_new_tokens,
                                              n=params.n, seed=params.seed)
        if len(completion.choices) != params.n:
            raise EngineError(f"endpoint {self.base_url} sent {len(completion.choices)} choices, asked for {params.n}")
        vocabulary = len(self.tokenizer)
        samples = []
        for choice in completion.choices:
            if any(not 0 <= i < vocabulary for i in choice.token_ids):
                raise EngineError(f"endpoint {self.base_url} sampled token ids outside the policy's vocabulary of {vocabulary}: "
                                  f"is {self.model!r} the policy being trained?")
            samples.append(Sample(text=self.tokenizer.decode(choice.token_ids, skip_special_tokens=True), token_ids=choice.token_ids,
                                  token_logprobs=choice.token_logprobs, finish_reason="length" if choice.finish_reason == "length" else "stop"))
        return Generation(prompt_text=prompt, prompt_tokens=len(prompt_ids), samples=samples, latency_s=time.monotonic() - start)

    async def aclose(self) -> None:
        await self._async.close()

    def close(self) -> None:
        self.client.close()


def served_model(base_url: str, api_key: str | None = None) -> str:
    """The model a server serves, when it lists exactly one (``GET /v1/models``)."""
    with OpenAIClient(base_url.rstrip("/"), api_key) as client:
        models = client.list_models()
    if len(models) != 1:
        raise EngineError(f"endpoint {base_url} serves {len(models)} models ({', '.join(models[:5]) or 'none'}): name one with --served-model")
    return models[0]
