"""A thin adapter over the official ``openai`` SDK for OpenAI-compatible chat endpoints
(OpenAI, vLLM's ``vllm serve``, and the many servers that copy them).

The SDK does the HTTP work: the timeout, and retries of what is worth retrying (connection
errors, timeouts, 408, 409, 429, 5xx) with exponential backoff, jitter and Retry-After.
This module adds what a run needs on top: every failure becomes an ``EndpointError`` whose
message is one line naming the endpoint and the cause, so a failed run says what went wrong
in a log line, and replies come back as plain objects carrying the token log-probs.
One client is safe to share between threads (the SDK's is).
"""
from __future__ import annotations

import asyncio
import json
import os
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import openai

from colbench.errors import ColbenchError

#: Environment variables searched, in order, for an API key when none is passed.
API_KEY_ENV = ("COLBENCH_API_KEY", "OPENAI_API_KEY")


class EndpointError(ColbenchError, RuntimeError):
    """A chat request failed; ``str(err)`` is one line naming the endpoint and the cause."""

    def __init__(self, message: str, *, status: int | None = None):
        super().__init__(message)
        self.status = status


@dataclass
class TokenLogprob:
    token: str
    logprob: float
    top: list[tuple[str, float]] = field(default_factory=list)  # (token, logprob), best first


@dataclass
class ChatChoice:
    index: int
    text: str
    finish_reason: str
    logprobs: list[TokenLogprob] | None = None  # None when the server sent none

    @property
    def token_logprobs(self) -> list[float]:
        return [t.logprob for t in self.logprobs] if self.logprobs else []


@dataclass
class ChatCompletion:
    choices: list[ChatChoice]
    usage: dict[str, int]
    model: str
    id: str = ""
    latency_s: float = 0.0


@dataclass
class TokenChoice:
    index: int
    text: str
    token_ids: list[int]
    token_logprobs: list[float]
    finish_reason: str


@dataclass
class TokenCompletion:
    choices: list[TokenChoice]
    usage: dict[str, int]
    latency_s: float = 0.0


def _token_id(token: str, where: str) -> int:
    if not token.startswith("token_id:"):
        raise EndpointError(
            f"{where} sent tokens as text ({token!r}), not ids: serve with vLLM (return_tokens_as_token_ids)"
        )
    return int(token[len("token_id:"):])


def _token_choice(raw: Any, where: str) -> TokenChoice:
    extra = getattr(raw, "model_extra", None) or {}
    logprobs = raw.logprobs
    values = list(getattr(logprobs, "token_logprobs", None) or []) if logprobs is not None else []
    ids = extra.get("token_ids")
    if ids is None:
        ids = [_token_id(t, where) for t in (getattr(logprobs, "tokens", None) or [])] if logprobs is not None else []
    ids = [int(i) for i in ids]
    if not values and ids:
        raise EndpointError(f"{where} sent no log-probs for the sampled tokens")
    if len(values) != len(ids) or any(v is None for v in values):
        raise EndpointError(f"{where} sent {len(ids)} token ids but {len(values)} log-probs")
    if not ids and (raw.text or ""):
        raise EndpointError(f"{where} sent text without the token ids it sampled (serve with vLLM, which returns them)")
    return TokenChoice(int(raw.index or 0), raw.text or "", ids, [float(v) for v in values],
                       raw.finish_reason or "stop")


def _token_completion(raw: Any, where: str, started: float) -> TokenCompletion:
    if isinstance(raw, str):
        raise EndpointError(f"{where} sent a response that is not JSON: {_one_line(raw, 80)!r}")
    try:
        choices = sorted((_token_choice(c, where) for c in raw.choices), key=lambda c: c.index)
        usage = {k: int(v) for k, v in dict(raw.usage or {}).items() if isinstance(v, (int, float))}
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise EndpointError(f"{where} sent a malformed completion: {_one_line(repr(exc), 120)}") from None
    return TokenCompletion(choices, usage, time.monotonic() - started)


def resolve_api_key(api_key: str | None) -> str | None:
    return api_key or next((os.environ[name] for name in API_KEY_ENV if os.environ.get(name)), None)


def _one_line(text: str, limit: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _tries(err: openai.APIError) -> int:
    # The SDK numbers each attempt in a request header, so the last request tells how many were sent.
    return int(err.request.headers.get("x-stainless-retry-count") or 0) + 1


def _no_response(exc: BaseException) -> str:
    """Why no response came, from the transport error the SDK keeps as the cause."""
    name, text = type(exc).__name__, str(exc).lower()  # by name: httpx or httpx2, by SDK version
    if "refused" in text:
        return "connection refused"
    if name == "RemoteProtocolError" or "disconnected" in text or "reset" in text:
        return "connection closed without a response"
    if "name or service not known" in text or "nodename nor servname" in text or "getaddrinfo" in text:
        return "host name not found"
    return _one_line(f"{name}: {exc}" if str(exc) else name, 120)


def _status_detail(err: openai.APIStatusError) -> str:
    """The server's own error message (the SDK has unwrapped ``{"error": ...}``), else the body."""
    message = err.body.get("message") if isinstance(err.body, dict) else err.body
    if isinstance(message, str) and message.strip():
        return _one_line(message, 160)
    return _one_line(err.response.text, 160) or err.response.reason_phrase


def _choice(raw: Any) -> ChatChoice:
    content = raw.message.content
    if isinstance(content, list):  # some servers answer with content parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    lp = raw.logprobs.content if raw.logprobs is not None else None
    return ChatChoice(
        index=int(raw.index or 0), text=content or "", finish_reason=raw.finish_reason or "stop",
        logprobs=None if lp is None else [
            TokenLogprob(t.token, float(t.logprob), [(x.token, float(x.logprob)) for x in t.top_logprobs or []])
            for t in lp
        ],
    )


def _request(messages: list[dict[str, Any]], model: str, *, temperature, max_tokens, n, seed, logprobs,
             top_logprobs, top_p=None) -> dict:
    # Only what was asked for is sent: some servers reject fields they do not know (logprobs).
    asked = {"temperature": temperature, "top_p": top_p, "max_tokens": max_tokens, "seed": seed,
             "logprobs": True if logprobs or top_logprobs else None, "top_logprobs": top_logprobs or None}
    return {"model": model, "messages": messages, "n": n, **{k: v for k, v in asked.items() if v is not None}}


def _completion(raw: Any, model: str, where: str, started: float) -> ChatCompletion:
    if isinstance(raw, str):  # the SDK hands back the text of a body that is not JSON
        raise EndpointError(f"{where} sent a response that is not JSON: {_one_line(raw, 80)!r}")
    try:
        completion = ChatCompletion(
            choices=sorted((_choice(c) for c in raw.choices), key=lambda c: c.index),
            usage={k: int(v) for k, v in dict(raw.usage or {}).items() if isinstance(v, (int, float))},
            model=getattr(raw, "model", None) or model,
            id=getattr(raw, "id", None) or "",
        )
    except (AttributeError, KeyError, TypeError, ValueError) as exc:  # the SDK does not validate replies
        raise EndpointError(f"{where} sent a malformed chat completion: {_one_line(repr(exc), 120)}") from None
    completion.latency_s = time.monotonic() - started
    return completion


def _endpoint_error(err: Exception, where: str, timeout_s: float) -> EndpointError:
    """One line for any failure of an SDK call, its retries included."""
    if isinstance(err, json.JSONDecodeError):  # the body said it was JSON
        return EndpointError(f"{where} sent a response that is not JSON: {_one_line(err.doc, 80)!r}")
    tries = _tries(err)
    count = f"{tries} {'try' if tries == 1 else 'tries'}"
    if isinstance(err, openai.APITimeoutError):  # before APIConnectionError: it is one
        return EndpointError(f"{where} timed out after {count}: no response within {timeout_s:g}s")
    if isinstance(err, openai.APIConnectionError):
        what = "unreachable" if type(err.__cause__).__name__ == "ConnectError" else "failed"
        return EndpointError(f"{where} {what} after {count}: {_no_response(err.__cause__ or err)}")
    if not isinstance(err, openai.APIStatusError):  # e.g. the SDK's response validation
        return EndpointError(f"{where} failed: {_one_line(f'{type(err).__name__}: {err}', 160)}")
    status, detail = err.status_code, _status_detail(err)
    if tries == 1 and status != 429 and status < 500:
        # A client error will not fix itself: the SDK reported it at once.
        return EndpointError(f"{where} rejected the request: HTTP {status}: {detail}", status=status)
    return EndpointError(f"{where} failed after {count}: HTTP {status}: {detail}", status=status)


_FAILURES = (json.JSONDecodeError, openai.APIError)

#: Seconds a request may take, queueing included: the OpenAI SDK's own default. A server queues what it cannot run
#: at once, and a busy one (a CPU vLLM at a few hundred requests in flight) answers a 256-token turn in minutes; a
#: shorter wait fails those requests, and each retry goes to the back of the queue. A dead server is found at once
#: (connection refused), not by this wait.
DEFAULT_TIMEOUT_S = 600.0


#: Every sampling filter off, sent with each token-id request (vLLM's fields): a field left out is filled from the
#: model's generation config (Llama-3.1-Instruct's top_p 0.9), while the log-probs that come back are the unfiltered
#: distribution's, which trainers compare the policy's own with. ``top_p`` is standard and goes in the body.
UNFILTERED_SAMPLING = {"top_k": -1, "min_p": 0.0, "repetition_penalty": 1.0}
UNFILTERED_TOP_P = 1.0


class OpenAIClient:
    """Chat completions against one OpenAI-compatible endpoint. A request is sent at most
    ``max_retries + 1`` times; the SDK picks the waits (Retry-After when the server sends one).
    ``asynchronous=True`` gives the same client over the SDK's AsyncOpenAI: ``await chat(...)``."""

    def __init__(self, base_url: str, api_key: str | None = None, *, timeout_s: float = DEFAULT_TIMEOUT_S,
                 max_retries: int = 3, asynchronous: bool = False):
        self.base_url = base_url.rstrip("/")
        self.where = f"endpoint {self.base_url}"
        self.timeout_s = float(timeout_s)
        self.asynchronous = asynchronous
        key = resolve_api_key(api_key)
        # A local server may want no key, but the SDK insists on one: it gets a placeholder
        # and every request leaves the Authorization header out.
        self._headers: dict[str, Any] = {} if key else {"Authorization": openai.Omit()}
        sdk = openai.AsyncOpenAI if asynchronous else openai.OpenAI
        self._sdk = sdk(base_url=self.base_url, api_key=key or "unused", timeout=self.timeout_s,
                        max_retries=max(0, int(max_retries)))

    def chat(self, model: str, messages: list[dict[str, Any]], *, temperature: float | None = None,
             max_tokens: int | None = None, n: int = 1, seed: int | None = None, logprobs: bool = False,
             top_logprobs: int | None = None, top_p: float | None = None):
        """One chat completion with ``n`` choices (a coroutine on an asynchronous client).
        Messages may carry image parts (``{"type": "image_url", ...}``); they are sent as given."""
        request = _request(messages, model, temperature=temperature, max_tokens=max_tokens, n=n, seed=seed,
                           logprobs=logprobs, top_logprobs=top_logprobs, top_p=top_p)
        if self.asynchronous:
            return self._chat_async(request)
        started = time.monotonic()
        try:
            raw = self._sdk.chat.completions.create(**request, extra_headers=self._headers)
        except _FAILURES as err:
            raise _endpoint_error(err, self.where, self.timeout_s) from None
        return _completion(raw, model, self.where, started)

    async def _chat_async(self, request: dict) -> ChatCompletion:
        started = time.monotonic()
        try:
            raw = await self._sdk.chat.completions.create(**request, extra_headers=self._headers)
        except _FAILURES as err:
            raise _endpoint_error(err, self.where, self.timeout_s) from None
        return _completion(raw, request["model"], self.where, started)

    def complete_ids(self, model: str, prompt_ids: list[int], *, temperature: float | None = None,
                     max_tokens: int | None = None,
                     n: int = 1, seed: int | None = None):
        """``n`` continuations of a prompt given as token ids (``/v1/completions``), each with its sampled
        token ids and their log-probs. vLLM's conventions: the ids come as ``choices[i].token_ids``
        (``return_token_ids``, vLLM >= 0.10.2) or, from older servers, as ``"token_id:<id>"`` strings in
        ``logprobs.tokens`` (``return_tokens_as_token_ids``); ``logprobs.token_logprobs`` are the sampled
        tokens' log-probs. A reply with neither is refused (a server that cannot say what it sampled).
        Every sampling filter is sent switched off (UNFILTERED_SAMPLING), so the server samples from the
        distribution whose log-probs it returns.
        A coroutine on an asynchronous client."""
        request = {
            "model": model,
            "prompt": list(prompt_ids),
            "n": n,
            "logprobs": 1,
            "top_p": UNFILTERED_TOP_P,
            **{
                k: v
                for k, v in {"temperature": temperature, "max_tokens": max_tokens, "seed": seed}.items()
                if v is not None
            },
            "extra_body": {"return_token_ids": True, "return_tokens_as_token_ids": True, "skip_special_tokens": True,
                           **UNFILTERED_SAMPLING},
            "extra_headers": self._headers
        }
        if self.asynchronous:
            return self._complete_ids_async(request)
        started = time.monotonic()
        try:
            raw = self._sdk.completions.create(**request)
        except _FAILURES as err:
            raise _endpoint_error(err, self.where, self.timeout_s) from None
        return _token_completion(raw, self.where, started)

    async def _complete_ids_async(self, request: dict) -> TokenCompletion:
        started = time.monotonic()
        try:
            raw = await self._sdk.completions.create(**request)
        except _FAILURES as err:
            raise _endpoint_error(err, self.where, self.timeout_s) from None
        return _token_completion(raw, self.where, started)

    def load_lora_adapter(self, name: str, path: str) -> None:
        """Serve the LoRA adapter in folder ``path`` (as the server's machine reads it) under ``name``: vLLM's
        ``POST /v1/load_lora_adapter``, offered by a server started with --enable-lora and
        VLLM_ALLOW_RUNTIME_LORA_UPDATING=True. A name already loaded counts as done: callers derive it from
        the adapter's checksum, so the same name is the same weights."""
        try:
            self._sdk.post("/load_lora_adapter", body={"lora_name": name, "lora_path": path}, cast_to=str,
                           options={"headers": self._headers})
        except _FAILURES as err:
            failure = _endpoint_error(err, self.where, self.timeout_s)
            if failure.status == 400 and "already been loaded" in str(failure):
                return
            if isinstance(err, openai.NotFoundError) and isinstance(err.body, dict) and "detail" in err.body:
                # The web framework's own 404, not vLLM's: no such route, so no run-time adapters.
                raise EndpointError(
                    f"{self.where} cannot load LoRA adapters at run time: start vllm serve with --enable-lora "
                    "and the environment variable VLLM_ALLOW_RUNTIME_LORA_UPDATING=True",
                    status=404
                ) from None
            raise EndpointError(f"{failure} (loading LoRA adapter {name} from {path})", status=failure.status) from None

    def unload_lora_adapter(self, name: str) -> None:
        """Stop serving the adapter loaded under ``name`` (``POST /v1/unload_lora_adapter``), freeing the server's
        memory of it. A name the server does not hold (a restarted server) counts as done."""
        try:
            self._sdk.post("/unload_lora_adapter", body={"lora_name": name}, cast_to=str,
                           options={"headers": self._headers})
        except _FAILURES as err:
            failure = _endpoint_error(err, self.where, self.timeout_s)
            if failure.status == 404:
                return
            raise EndpointError(f"{failure} (unloading LoRA adapter {name})", status=failure.status) from None

    def list_models(self, *, adapters: bool = True) -> list[str]:
        """The models the server serves; ``adapters=False`` leaves out LoRA adapters (vLLM lists them
        with the base model they apply to as ``parent``)."""
        try:
            listed = self._sdk.models.list(extra_headers=self._headers).data
        except _FAILURES as err:
            raise _endpoint_error(err, self.where, self.timeout_s) from None
        return [m.id for m in listed if adapters or not (m.model_extra or {}).get("parent")]

    def close(self):
        """Closes the connections (a coroutine on an asynchronous client)."""
        return self._sdk.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class BoundedAsyncClient:
    """An asynchronous OpenAIClient with at most ``concurrency`` requests in flight. Both are made
    on first use, inside the event loop that awaits them (a semaphore belongs to one loop)."""

    def __init__(self, base_url: str, concurrency: int, **options):
        self.base_url, self.concurrency, self.options = base_url, max(1, int(concurrency)), options
        self._made: tuple[OpenAIClient, asyncio.Semaphore] | None = None

    @asynccontextmanager
    async def slot(self):
        """Waits for a free slot, then yields the client for one request."""
        if self._made is None:
            self._made = (OpenAIClient(self.base_url, **self.options, asynchronous=True),
                          asyncio.Semaphore(self.concurrency))
        client, slots = self._made
        async with slots:
            yield client

    async def close(self) -> None:
        if self._made is not None:
            await self._made[0].close()
            self._made = None


def dumps_messages(messages: list[dict[str, Any]]) -> str:
    """A faithful, stable text form of a message list (the server's template is unknown)."""
    return json.dumps(messages, ensure_ascii=False, indent=None, separators=(", ", ": "))
