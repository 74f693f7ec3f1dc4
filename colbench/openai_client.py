"""A small synchronous client for OpenAI-compatible chat endpoints.

It speaks ``POST {base_url}/chat/completions`` (OpenAI, vLLM's ``vllm serve``, and the
many servers that copy them) and nothing else. It retries what is worth retrying
(connection errors, timeouts, 429 and 5xx), gives up at once on other 4xx, and turns
every failure into an ``EndpointError`` whose message is one line naming the
endpoint and the cause, so a failed run says what went wrong in a log line.

One client is safe to share between threads (httpx's connection pool is).
"""
from __future__ import annotations

from colbench.errors import ColbenchError

import email.utils
import json
import os
import random
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

#: Environment variables searched, in order, for an API key when none is passed.
API_KEY_ENV = ("COLBENCH_API_KEY", "OPENAI_API_KEY")

# A server asking us to wait longer than this is capped, so one bad header cannot stall a run.
MAX_RETRY_AFTER_S = 120.0


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


def resolve_api_key(api_key: str | None) -> str | None:
    if api_key:
        return api_key
    for name in API_KEY_ENV:
        if os.environ.get(name):
            return os.environ[name]
    return None


def _one_line(text: str, limit: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _Retryable(Exception):
    """Internal: an attempt failed in a way worth another try."""

    def __init__(self, kind: str, cause: str, retry_after: float | None = None, status: int | None = None):
        super().__init__(cause)
        self.kind = kind  # "unreachable" | "timeout" | "transport" | "http"
        self.cause = cause
        self.retry_after = retry_after
        self.status = status


def _parse_retry_after(value: str | None) -> float | None:
    """Retry-After is either seconds or an HTTP date (RFC 9110)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _error_detail(response: httpx.Response) -> str:
    """The server's own error message if it sent the OpenAI error shape, else the body."""
    try:
        body = response.json()
        err = body.get("error") if isinstance(body, dict) else None
        if isinstance(err, dict) and err.get("message"):
            return _one_line(err["message"], 160)
        if isinstance(err, str):
            return _one_line(err, 160)
        if isinstance(body, dict) and body.get("message"):
            return _one_line(body["message"], 160)
    except (ValueError, AttributeError):
        pass
    return _one_line(response.text, 160) or response.reason_phrase


def _describe_transport_error(exc: httpx.TransportError) -> str:
    text = str(exc).lower()
    if "refused" in text:
        return "connection refused"
    if isinstance(exc, httpx.RemoteProtocolError) or "disconnected" in text or "reset" in text:
        return "connection closed without a response"
    if "name or service not known" in text or "nodename nor servname" in text or "getaddrinfo" in text:
        return "host name not found"
    return _one_line(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__, 120)


def _parse_choice(raw: dict[str, Any]) -> ChatChoice:
    message = raw.get("message") or {}
    content = message.get("content")
    if isinstance(content, list):  # some servers answer with content parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    logprobs = None
    lp = raw.get("logprobs")
    if isinstance(lp, dict) and lp.get("content") is not None:
        logprobs = [
            TokenLogprob(
                token=t.get("token", ""),
                logprob=float(t["logprob"]),
                top=[(x.get("token", ""), float(x["logprob"])) for x in (t.get("top_logprobs") or [])],
            )
            for t in lp["content"]
        ]
    return ChatChoice(
        index=int(raw.get("index", 0)),
        text=content or "",
        finish_reason=raw.get("finish_reason") or "stop",
        logprobs=logprobs,
    )


class OpenAIClient:
    """Chat completions against one OpenAI-compatible endpoint.

    ``max_retries`` is how many times a retryable failure is tried again, so a request
    is sent at most ``max_retries + 1`` times. Waits grow as ``backoff_s * 2**k`` (capped
    at ``max_backoff_s``) with jitter, unless the server sends Retry-After.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        timeout_s: float = 60.0,
        max_retries: int = 3,
        backoff_s: float = 0.5,
        max_backoff_s: float = 20.0,
        max_connections: int = 16,
    ):
        self.base_url = base_url.rstrip("/")
        self.timeout_s = float(timeout_s)
        self.max_retries = max(0, int(max_retries))
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        headers = {"Content-Type": "application/json"}
        key = resolve_api_key(api_key)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        self._http = httpx.Client(
            headers=headers,
            timeout=httpx.Timeout(self.timeout_s, connect=min(10.0, self.timeout_s)),
            limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections),
        )
        self._rng = random.Random()

    # -- public API -------------------------------------------------------------------------

    def chat(
        self,
        model: str,
        messages: list[dict[str, Any]],
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        n: int = 1,
        seed: int | None = None,
        logprobs: bool = False,
        top_logprobs: int | None = None,
        stop: list[str] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> ChatCompletion:
        """One chat completion with ``n`` choices. Messages may carry image parts
        (``{"type": "image_url", ...}``); they are sent as given."""
        payload: dict[str, Any] = {"model": model, "messages": messages, "n": n}
        if temperature is not None:
            payload["temperature"] = temperature
        if max_tokens is not None:
            payload["max_tokens"] = max_tokens
        if seed is not None:
            payload["seed"] = seed
        if logprobs or top_logprobs:
            payload["logprobs"] = True
            if top_logprobs:
                payload["top_logprobs"] = top_logprobs
        if stop:
            payload["stop"] = stop
        if extra:
            payload.update(extra)

        start = time.monotonic()
        body = self._post_json("/chat/completions", payload)
        try:
            completion = ChatCompletion(
                choices=sorted((_parse_choice(c) for c in body["choices"]), key=lambda c: c.index),
                usage={k: int(v) for k, v in (body.get("usage") or {}).items() if isinstance(v, (int, float))},
                model=body.get("model", model),
                id=body.get("id", ""),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise EndpointError(
                f"endpoint {self.base_url} sent a malformed chat completion: {_one_line(repr(exc), 120)}"
            ) from None
        completion.latency_s = time.monotonic() - start
        return completion

    def list_models(self) -> list[str]:
        body = self._request("GET", "/models", None)
        return [m.get("id", "") for m in body.get("data", [])]

    def close(self) -> None:
        self._http.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- internals ---------------------------------------------------------------------------

    def _post_json(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        return self._request("POST", path, payload)

    def _request(self, method: str, path: str, payload: dict[str, Any] | None) -> dict[str, Any]:
        url = self.base_url + path
        tries = 0
        while True:
            tries += 1
            try:
                return self._attempt(method, url, payload)
            except _Retryable as failure:
                if tries > self.max_retries:
                    raise self._give_up(failure, tries) from None
                time.sleep(self._delay(tries, failure.retry_after))

    def _attempt(self, method: str, url: str, payload: dict[str, Any] | None) -> dict[str, Any]:
        try:
            response = self._http.request(method, url, json=payload)
        except httpx.TimeoutException:
            raise _Retryable("timeout", f"no response within {self.timeout_s:g}s") from None
        except httpx.TransportError as exc:
            kind = "unreachable" if isinstance(exc, httpx.ConnectError) else "transport"
            raise _Retryable(kind, _describe_transport_error(exc)) from None

        status = response.status_code
        if status == 429 or status >= 500:
            raise _Retryable(
                "http",
                f"HTTP {status}: {_error_detail(response)}",
                retry_after=_parse_retry_after(response.headers.get("retry-after")),
                status=status,
            )
        if status >= 400:
            # A client error will not fix itself: report it at once.
            raise EndpointError(
                f"endpoint {self.base_url} rejected the request: HTTP {status}: {_error_detail(response)}",
                status=status,
            )
        try:
            body = response.json()
        except ValueError:
            raise EndpointError(
                f"endpoint {self.base_url} sent a response that is not JSON: {_one_line(response.text, 80)!r}",
                status=status,
            ) from None
        if not isinstance(body, dict):
            raise EndpointError(f"endpoint {self.base_url} sent a JSON {type(body).__name__}, not an object")
        return body

    def _delay(self, tries: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, MAX_RETRY_AFTER_S)
        ceiling = min(self.max_backoff_s, self.backoff_s * 2 ** (tries - 1))
        # "Equal jitter": at least half the ceiling, so waits still grow, spread so that
        # many clients failing together do not retry in lockstep.
        return ceiling / 2 + self._rng.uniform(0, ceiling / 2)

    def _give_up(self, failure: _Retryable, tries: int) -> EndpointError:
        plural = "try" if tries == 1 else "tries"
        if failure.kind == "unreachable":
            what = f"unreachable after {tries} {plural}"
        elif failure.kind == "timeout":
            what = f"timed out after {tries} {plural}"
        else:
            what = f"failed after {tries} {plural}"
        return EndpointError(f"endpoint {self.base_url} {what}: {failure.cause}", status=failure.status)


def dumps_messages(messages: list[dict[str, Any]]) -> str:
    """A faithful, stable text form of a message list (the server's template is unknown)."""
    return json.dumps(messages, ensure_ascii=False, indent=None, separators=(", ", ": "))
