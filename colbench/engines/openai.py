"""An engine backed by an OpenAI-compatible server (OpenAI, ``vllm serve``, ...).

Without the policy's tokenizer (a model we only know by its served name) the engine talks
to ``/v1/chat/completions``: the server applies its own chat template, which we cannot
see, so ``prompt_text`` is the message list itself as JSON (``templated_prompts`` is
False: a rollout stores no prompt) and no token ids come back. Trainers reading such
turns render the policy's own template and re-encode the text, as for imported
dialogues: fine for evaluation, approximate for training.

Given the policy's tokenizer (``rollout --engine openai --served-model NAME --model
<the served weights>``, and SWEET's ``--sampler openai``), every turn is exact instead:
the engine applies the policy's chat template itself, sends the prompt as token ids to
``/v1/completions`` and gets back the sampled ids with their log-probs (vLLM's
``return_token_ids`` / ``return_tokens_as_token_ids``), so it records the templated
prompt and the sampled ids exactly as the hf, ct2 and vllm engines do.

Rollouts call ``agenerate`` (one conversation, on the SDK's AsyncOpenAI, at most
``concurrency`` requests in flight); ``generate`` keeps the batched, threaded form for
callers without an event loop.
"""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from colbench.engines.base import EngineError, Generation, Message, Sample, SamplingParams, TokenizerEngine
from colbench.openai_client import (
    BoundedAsyncClient,
    ChatCompletion,
    DEFAULT_TIMEOUT_S,
    EndpointError,
    OpenAIClient,
    UNFILTERED_TOP_P,
    TokenCompletion,
    dumps_messages
)

DEFAULT_CONCURRENCY = 64  # requests in flight; a vLLM server batches hundreds


class OpenAIEngine(TokenizerEngine):
    kind = "openai"

    def __init__(
        self,
        model: str,
        base_url: str,
        api_key: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_retries: int = 3,
        concurrency: int = DEFAULT_CONCURRENCY,
        *,
        logprobs: bool = True,
        tokenizer=None,
        model_ref: str | None = None,
    ):
        """``logprobs=False`` for servers that reject the ``logprobs`` field. ``tokenizer``: the served
        model's (a transformers tokenizer): every turn goes as token ids (module docstring).
        ``model_ref``: the stored name of the served weights (e.g. ckpt:<id>), given with their tokenizer."""
        self.model = model
        self.tokenizer = tokenizer
        self.model_ref = model_ref or f"openai:{model}@{base_url.rstrip('/')}"
        self.concurrency = max(1, int(concurrency))
        self.logprobs = logprobs
        self._client_options = {"api_key": api_key, "timeout_s": timeout_s, "max_retries": max_retries}
        self._connect(base_url)

    def _connect(self, base_url: str) -> None:
        """The clients of the server at ``base_url`` (the asynchronous one is made at its first request)."""
        self.base_url = base_url.rstrip("/")
        self.client = OpenAIClient(self.base_url, **self._client_options)
        self._async = BoundedAsyncClient(self.base_url, self.concurrency, **self._client_options)

    @property
    def templated_prompts(self) -> bool:
        return self.tokenizer is not None

    def render_prompt(self, conversation: list[Message]) -> str:
        if self.tokenizer is not None:
            return super().render_prompt(conversation)
        return dumps_messages(conversation)

    def generate(self, conversations: list[list[Message]], params: SamplingParams) -> list[Generation]:
        if self.tokenizer is not None:
            return self.generate_from_prompts([self.render_prompt(c) for c in conversations], params)
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
        prompt = self.render_prompt(conversation) if self.tokenizer is not None else None
        async with self._async.slot() as client:
            start = time.monotonic()
            try:
                if prompt is None:
                    completion = await client.chat(self.model, conversation, **self._sampling(params))
                else:
                    prompt_ids = self.encode(prompt)
                    continued = await client.complete_ids(self.model, prompt_ids, **self._token_sampling(params))
            except EndpointError as exc:
                raise EngineError(str(exc)) from None
        if prompt is None:
            return self._generation(conversation, params, completion, start)
        return self._token_generation(prompt, prompt_ids, params, continued, start)

    def _one(self, conversation: list[Message], params: SamplingParams) -> Generation:
        start = time.monotonic()
        completion = self.client.chat(self.model, conversation, **self._sampling(params))
        return self._generation(conversation, params, completion, start)

    def _sampling(self, params: SamplingParams) -> dict:
        # top_p 1: a vLLM server would otherwise take the model's generation config's (the chat path cannot send
        # vLLM's own fields, top_k and min_p: another server may refuse them; serve with --generation-config vllm).
        return {"temperature": params.temperature, "max_tokens": params.max_new_tokens, "n": params.n,
                "seed": params.seed, "logprobs": self.logprobs, "top_p": UNFILTERED_TOP_P}

    def _generation(self, conversation: list[Message], params: SamplingParams, completion: ChatCompletion,
                    start: float) -> Generation:
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
        ids = [self.encode(p) for p in prompts]
        workers = min(self.concurrency, len(prompts))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="openai-engine") as pool:
            futures = [
                pool.submit(self._continue, prompt, prompt_ids, params) for prompt, prompt_ids in zip(prompts, ids)
            ]
            try:
                return [future.result() for future in futures]
            except EndpointError as exc:
                for other in futures:
                    other.cancel()
                raise EngineError(str(exc)) from None

    def _continue(self, prompt: str, prompt_ids: list[int], params: SamplingParams) -> Generation:
        start = time.monotonic()
        completion = self.client.complete_ids(self.model, prompt_ids, **self._token_sampling(params))
        return self._token_generation(prompt, prompt_ids, params, completion, start)

    @staticmethod
    def _token_sampling(params: SamplingParams) -> dict:
        return {"temperature": params.temperature, "max_tokens": params.max_new_tokens, "n": params.n,
                "seed": params.seed}

    def _token_generation(self, prompt: str, prompt_ids: list[int], params: SamplingParams, completion: TokenCompletion,
                          start: float) -> Generation:
        if len(completion.choices) != params.n:
            raise EngineError(f"endpoint {self.base_url} sent {len(completion.choices)} choices, asked for {params.n}")
        vocabulary = len(self.tokenizer)
        samples = []
        for choice in completion.choices:
            if any(not 0 <= i < vocabulary for i in choice.token_ids):
                raise EngineError(
                    f"endpoint {self.base_url} sampled token ids outside the policy's vocabulary of {vocabulary}: "
                    f"is {self.model!r} the policy being trained?"
                )
            samples.append(Sample(text=self.tokenizer.decode(choice.token_ids, skip_special_tokens=True),
                                  token_ids=choice.token_ids,
                                  token_logprobs=choice.token_logprobs,
                                  finish_reason="length" if choice.finish_reason == "length" else "stop"))
        return Generation(prompt_text=prompt, prompt_tokens=len(prompt_ids), samples=samples,
                          latency_s=time.monotonic() - start)

    def sampling_fields(self) -> dict:
        from colbench.openai_client import UNFILTERED_SAMPLING

        if self.tokenizer is None:  # the chat path: a server that may not be vLLM gets the standard fields only
            return {"top_p": UNFILTERED_TOP_P}
        return {"top_p": UNFILTERED_TOP_P, **UNFILTERED_SAMPLING}

    async def aclose(self) -> None:
        await self._async.close()

    def close(self) -> None:
        self.client.close()


def served_model(base_url: str, api_key: str | None = None) -> str:
    """The model a server serves, when it lists exactly one base model (``GET /v1/models``; the LoRA
    adapters loaded on it are not counted)."""
    with OpenAIClient(base_url.rstrip("/"), api_key) as client:
        models = client.list_models(adapters=False)
    if len(models) != 1:
        raise EngineError(
            f"endpoint {base_url} serves {len(models)} models ({', '.join(models[:5]) or 'none'}): name one with"
            " --served-model"
        )
    return models[0]
