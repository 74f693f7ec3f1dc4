"""A simulated human played by a model behind an OpenAI-compatible endpoint.

This is the paper's setup (Llama-3.1-70B-Instruct served by vLLM), at temperature 0.
A request that still fails after the client's retries becomes a reply with ``error``
set: that human turn becomes "No response." and the dialogue goes on.

Rollouts call ``areply`` (one request, on the SDK's AsyncOpenAI, at most ``concurrency``
in flight); ``reply`` keeps the batched, threaded form.
"""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from colbench.openai_client import DEFAULT_TIMEOUT_S, BoundedAsyncClient, OpenAIClient
from colbench.simulators.base import SimReply, SimRequest, Simulator, no_model_for
from colbench.simulators.prompts import clean_reply


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:300]


class EndpointSimulator(Simulator):
    kind = "endpoint"  # the spec prefix: endpoint:<base_url>#<model>
    medium = "text"  # what its model reads of the agent's work (SimRequest.medium)

    def __init__(
        self,
        model: str,
        base_url: str,
        api_key: str | None = None,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_retries: int = 3,
        concurrency: int = 64,
        max_tokens: int = 256,
    ):
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.ref = f"{self.kind}:{self.base_url}#{model}"
        self.concurrency = max(1, int(concurrency))
        self.max_tokens = max_tokens
        self._client_options = {"api_key": api_key, "timeout_s": timeout_s, "max_retries": max_retries}
        # The thread pool in reply() is what bounds requests in flight there.
        self.client = OpenAIClient(self.base_url, **self._client_options)
        self._async = BoundedAsyncClient(self.base_url, self.concurrency, **self._client_options)

    def reply(self, requests: list[SimRequest]) -> list[SimReply]:
        if not requests:
            return []
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(requests))) as pool:
            return list(pool.map(self._reply_one, requests))

    def unanswerable(self, request: SimRequest) -> str | None:
        """Why this simulator cannot answer the request, if it cannot."""
        return no_model_for(request, self.medium)

    def messages(self, request: SimRequest) -> list[dict]:
        return request.messages()

    def _reply_one(self, request: SimRequest) -> SimReply:
        start = time.monotonic()
        problem = self.unanswerable(request)
        if problem:
            return SimReply(text="", error=problem)
        try:
            completion = self.client.chat(self.model, self.messages(request), temperature=0.0,
                                          max_tokens=self.max_tokens)
        except Exception as exc:  # noqa: BLE001 - a simulator failure must never crash the run
            return SimReply(text="", error=_one_line(exc), latency_s=time.monotonic() - start)
        return self._reply_of(completion, start)

    async def areply(self, request: SimRequest) -> SimReply:
        problem = self.unanswerable(request)
        if problem:
            return SimReply(text="", error=problem)
        async with self._async.slot() as client:
            start = time.monotonic()
            try:
                completion = await client.chat(self.model, self.messages(request), temperature=0.0,
                                               max_tokens=self.max_tokens)
            except Exception as exc:  # noqa: BLE001 - a simulator failure must never crash the run
                return SimReply(text="", error=_one_line(exc), latency_s=time.monotonic() - start)
        return self._reply_of(completion, start)

    def _reply_of(self, completion, start: float) -> SimReply:
        text = clean_reply(completion.choices[0].text) if completion.choices else ""
        error = None if text else f"endpoint {self.base_url} sent an empty reply"
        return SimReply(text=text, error=error, latency_s=time.monotonic() - start)

    async def aclose(self) -> None:
        await self._async.close()

    def close(self) -> None:
        self.client.close()
