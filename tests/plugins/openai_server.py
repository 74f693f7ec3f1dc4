"""A loopback OpenAI-compatible server for tests (pytest plugin).

It stands in for an outside service (OpenAI, ``vllm serve``) and speaks the real
protocol over real HTTP: ``POST /v1/chat/completions`` with the real response schema
(including vLLM-style ``logprobs.content``) and ``GET /v1/models``. Tests script it:

    openai_server.set_responder(lambda request: "text")   # or a list of n texts
    openai_server.fail_next(2, 500)                        # then it answers normally
    openai_server.fail_next(1, 429, retry_after=1)
    openai_server.hang_next(1, seconds=5)                  # longer than the client timeout
    openai_server.drop_next(1)                             # close the connection, no reply
    openai_server.requests                                 # every request body received
    openai_server.set_delay(lambda request: 0.2)           # wait this long before each normal reply
    openai_server.in_flight_peak                           # most requests held at once (reset_in_flight_peak())

``POST /v1/completions`` continues a prompt (text, or token ids as vLLM takes them) and, as
vLLM does, says what it sampled: with ``logprobs`` each choice's ``logprobs.token_logprobs``
and ``logprobs.tokens``, the latter as ``"token_id:<id>"`` strings under
``return_tokens_as_token_ids``; with ``return_token_ids`` (vLLM >= 0.10.2) also
``choices[i].token_ids``. Scripting:

    openai_server.set_completion_responder(fn)   # fn(request) -> n dicts: token_ids, logprobs, finish_reason[, text]
    openai_server.token_ids_field = False        # an older vLLM: ids only as "token_id:<id>" strings
    openai_server.token_id_strings = False       # and a server that is not vLLM: tokens as text only

LoRA adapters at run time, as ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True vllm serve --enable-lora``
answers them (without it those routes are the web framework's 404, as vLLM's are):

    openai_server.allow_runtime_lora()   # POST /v1/load_lora_adapter, /v1/unload_lora_adapter
    openai_server.adapters               # name -> folder, of the adapters loaded
    openai_server.fail_loading = "..."   # the next loads fail as a load error of vLLM's (400)

It then also answers as vLLM always does (left off otherwise, so the other tests may name any
model): 404 for a request naming a model it does not serve, and /v1/models lists the adapters
with the base model as their ``parent``.
"""
from __future__ import annotations

import json
import re
import socket
import threading
import time
import uuid
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

import pytest

Responder = Callable[[dict[str, Any]], "str | list[str]"]
CompletionResponder = Callable[[dict[str, Any]], "list[dict[str, Any]]"]
Delay = Callable[[dict[str, Any]], float]


def echo_responder(request: dict[str, Any]) -> list[str]:
    """Default: each choice echoes the last message, numbered."""
    last = request["messages"][-1]["content"] if request.get("messages") else ""
    if isinstance(last, list):  # content parts (text + images)
        last = " ".join(p["text"] for p in last if isinstance(p, dict) and p.get("text"))
    return [f"reply {i}: {last}" for i in range(int(request.get("n") or 1))]


def echo_completion(request: dict[str, Any]) -> list[dict[str, Any]]:
    """Default for /v1/completions: choice i continues the prompt's ids with a few ids derived from
    them (a text prompt counts its stand-in tokens), each with a deterministic log-prob."""
    prompt = request.get("prompt")
    ids = prompt if isinstance(prompt, list) else [len(t) for t in tokenize(str(prompt or ""))]
    most = int(request.get("max_tokens") or 16)
    choices = []
    for i in range(int(request.get("n") or 1)):
        sampled = [(sum(ids) + 7 * i + k) % 1000 for k in range(min(most, 4))]
        choices.append({"token_ids": sampled, "logprobs": [token_logprob(str(t)) for t in sampled],
                        "finish_reason": "length" if most <= 4 else "stop"})
    return choices


def tokenize(text: str) -> list[str]:
    """A stand-in tokenizer: words with their trailing spaces."""
    return re.findall(r"\S+\s*|\s+", text)


def token_logprob(token: str) -> float:
    # Deterministic and distinct per token, so tests can check the numbers come through.
    return -round(0.1 * len(token) + 0.01 * (sum(token.encode()) % 7), 4)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    # A long listen backlog: a burst of connections (a client with many requests in flight)
    # waits to be accepted instead of being dropped and retried a second later.
    request_queue_size = 1024


class FakeOpenAIServer:
    def __init__(self, model: str = "test-model"):
        self.model = model
        self.requests: list[dict[str, Any]] = []  # request bodies, in arrival order
        self.headers: list[dict[str, str]] = []  # request headers, same order
        self._responder: Responder = echo_responder
        self._completion_responder: CompletionResponder = echo_completion
        self.token_ids_field = True  # answer return_token_ids with choices[i].token_ids, as vLLM >= 0.10.2 does
        self.token_id_strings = True  # answer return_tokens_as_token_ids with "token_id:<id>" tokens, as vLLM does
        self._delay: Delay | None = None
        self.runtime_lora = False
        self.adapters: dict[str, str] = {}  # LoRA adapters loaded at run time: name -> folder
        self.fail_loading: str | None = None  # a load error to answer every load with
        self.in_flight = 0  # requests received and not yet answered (hangs and delays included)
        self.in_flight_peak = 0
        self._actions: deque[tuple] = deque()
        self._lock = threading.Lock()
        self._release = threading.Event()  # ends hangs at teardown
        self._httpd = _HTTPServer(("127.0.0.1", 0), self._handler_class())
        self.port = self._httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    # -- scripting --

    def set_responder(self, fn: Responder) -> None:
        self._responder = fn

    def set_completion_responder(self, fn: CompletionResponder) -> None:
        """What /v1/completions samples: ``fn(request)`` gives one dict per choice with ``token_ids``,
        their ``logprobs`` and a ``finish_reason`` (and optionally ``text``)."""
        self._completion_responder = fn

    def set_delay(self, fn: Delay | None) -> None:
        """Seconds to wait before each normal reply (not before scripted failures or drops), as a
        slow model would; ``None`` answers at once. Lets tests see how many requests a client keeps
        in flight."""
        self._delay = fn

    def reset_in_flight_peak(self) -> None:
        """Start counting the peak again from the requests in flight now."""
        with self._lock:
            self.in_flight_peak = self.in_flight

    def fail_next(self, n: int = 1, status: int = 500, *, retry_after: float | str | None = None,
                  message: str | None = None) -> None:
        with self._lock:
            for _ in range(n):
                self._actions.append(("status", status, retry_after, message))

    def hang_next(self, n: int = 1, seconds: float = 5.0) -> None:
        with self._lock:
            for _ in range(n):
                self._actions.append(("hang", seconds))

    def drop_next(self, n: int = 1) -> None:
        with self._lock:
            for _ in range(n):
                self._actions.append(("drop",))

    def allow_runtime_lora(self) -> None:
        self.runtime_lora = True

    @property
    def chat_requests(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if "messages" in r]

    # -- lifecycle --

    def start(self) -> "FakeOpenAIServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._release.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    # -- the protocol --

    def _next_action(self):
        with self._lock:
            return self._actions.popleft() if self._actions else None

    def _enter(self) -> None:
        with self._lock:
            self.in_flight += 1
            self.in_flight_peak = max(self.in_flight_peak, self.in_flight)

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def _completion(self, request: dict[str, Any]) -> dict[str, Any]:
        n = int(request.get("n") or 1)
        texts = self._responder(request)
        if isinstance(texts, str):
            texts = [texts] * n
        if len(texts) != n:
            raise ValueError(f"responder gave {len(texts)} texts for n={n}")
        max_tokens = request.get("max_tokens") or request.get("max_completion_tokens")
        want_logprobs = bool(request.get("logprobs"))
        top_k = int(request.get("top_logprobs") or 0)
        choices, completion_tokens = [], 0
        for i, text in enumerate(texts):
            tokens = tokenize(text)
            finish = "stop"
            if max_tokens is not None and len(tokens) > int(max_tokens):
                tokens, finish = tokens[: int(max_tokens)], "length"
            completion_tokens += len(tokens)
            choice: dict[str, Any] = {
                "index": i,
                "message": {"role": "assistant", "content": "".join(tokens)},
                "finish_reason": finish,
                "logprobs": None,
            }
            if want_logprobs:
                content = []
                for tok in tokens:
                    lp = token_logprob(tok)
                    alternatives = [{"token": tok, "logprob": lp, "bytes": list(tok.encode())}]
                    alternatives += [{"token": f"<alt{k}>", "logprob": lp - k, "bytes": list(f"<alt{k}>".encode())}
                                     for k in range(1, top_k)]
                    content.append({"token": tok, "logprob": lp, "bytes": list(tok.encode()),
                                    "top_logprobs": alternatives[:top_k]})
                choice["logprobs"] = {"content": content}
            choices.append(choice)
        prompt_tokens = sum(len(tokenize(json.dumps(m.get("content", "")))) for m in request["messages"])
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.get("model", self.model),
            "choices": choices,
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        }

    def _load_adapter(self, request: dict[str, Any]) -> tuple[int, str]:
        """vLLM's answers to a load (vllm/entrypoints/openai/serving_models.py): a status and its text."""
        name, path = request.get("lora_name"), request.get("lora_path")
        if not name or not path:
            return 400, "Both 'lora_name' and 'lora_path' must be provided."
        if name in self.adapters:
            return 400, f"The lora adapter '{name}' has already been loaded."
        if self.fail_loading:
            return 400, self.fail_loading
        if not (Path(path) / "adapter_config.json").is_file():
            return 404, f"Loading lora {name} failed: No adapter found for {path}"
        self.adapters[name] = path
        return 200, f"Success: LoRA adapter '{name}' added successfully."

    def _unload_adapter(self, request: dict[str, Any]) -> tuple[int, str]:
        name = request.get("lora_name")
        if not name:
            return 400, "'lora_name' needs to be provided to unload a LoRA adapter."
        if self.adapters.pop(name, None) is None:
            return 404, f"The lora adapter '{name}' cannot be found."
        return 200, f"Success: LoRA adapter '{name}' removed successfully."

    def _text_completion(self, request: dict[str, Any]) -> dict[str, Any]:
        """A vLLM-style reply of /v1/completions."""
        n = int(request.get("n") or 1)
        sampled = self._completion_responder(request)
        if len(sampled) != n:
            raise ValueError(f"completion responder gave {len(sampled)} choices for n={n}")
        as_ids = bool(request.get("return_tokens_as_token_ids")) and self.token_id_strings
        want_logprobs = request.get("logprobs") is not None
        choices, completion_tokens = [], 0
        for i, choice in enumerate(sampled):
            ids, values = list(choice["token_ids"]), list(choice["logprobs"])
            completion_tokens += len(ids)
            text = choice.get("text", " ".join(f"tok{t}" for t in ids))
            out: dict[str, Any] = {"index": i, "text": text, "logprobs": None, "finish_reason": choice["finish_reason"],
                                   "stop_reason": None}
            if want_logprobs:
                tokens = [f"token_id:{t}" if as_ids else f"tok{t}" for t in ids]
                offsets = [sum(len(x) for x in tokens[:k]) for k in range(len(tokens))]
                out["logprobs"] = {"text_offset": offsets, "token_logprobs": values, "tokens": tokens,
                                   "top_logprobs": [{tok: lp} for tok, lp in zip(tokens, values)]}
            if request.get("return_token_ids") and self.token_ids_field:
                out["token_ids"] = ids
            choices.append(out)
        prompt = request.get("prompt")
        prompt_tokens = len(prompt) if isinstance(prompt, list) else len(tokenize(str(prompt or "")))
        return {
            "id": f"cmpl-{uuid.uuid4().hex[:12]}", "object": "text_completion", "created": int(time.time()),
            "model": request.get("model", self.model), "choices": choices,
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        }

    def _handler_class(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # keep test output quiet
                pass

            counted = False  # this request is in server.in_flight

            def _done(self):
                if self.counted:
                    self.counted = False
                    server._leave()

            def _send(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None):
                data = json.dumps(body).encode()
                # No longer in flight once the reply starts: a client may send its next request
                # the moment it has this one, and must not be counted twice meanwhile.
                self._done()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def _error(self, status: int, message: str, headers=None):
                kind = "invalid_request_error" if status < 500 else "server_error"
                self._send(status, {"error": {"message": message, "type": kind, "param": None, "code": None}},
                           headers)

            def _text(self, text: str):
                data = text.encode()
                self._done()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _received(self, raw: bytes):
                """The request's JSON, recorded with its headers; None (after a 400) when it is not JSON."""
                try:
                    request = json.loads(raw)
                except ValueError:
                    self._error(400, "request body is not JSON")
                    return None
                with server._lock:
                    server.requests.append(request)
                    server.headers.append({k.lower(): v for k, v in self.headers.items()})
                return request

            def _adapter_route(self, route: str, raw: bytes):
                if not server.runtime_lora:  # vLLM adds these routes only when allowed to
                    self._send(404, {"detail": "Not Found"})
                    return
                request = self._received(raw)
                if request is None:
                    return
                with server._lock:
                    load = route == "/v1/load_lora_adapter"
                    status, text = server._load_adapter(request) if load else server._unload_adapter(request)
                if status == 200:
                    self._text(text)
                else:
                    self._error(status, text)

            def do_GET(self):
                if self.path.rstrip("/") == "/v1/models":
                    with server._lock:
                        adapters = dict(server.adapters)
                    self._send(200, {"object": "list", "data": [
                        {"id": server.model, "object": "model", "created": 0, "owned_by": "colbench-tests",
                         "root": server.model, "parent": None},
                        *({"id": name, "object": "model", "created": 0, "owned_by": "colbench-tests", "root": path,
                           "parent": server.model}
                          for name, path in adapters.items())]})
                else:
                    self._error(404, f"no route {self.path}")

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                # Counted from the whole body received to the first byte of the reply (or the drop).
                server._enter()
                self.counted = True
                try:
                    self._chat(raw)
                finally:
                    self._done()

            def _chat(self, raw: bytes):
                route = self.path.rstrip("/")
                if route in ("/v1/load_lora_adapter", "/v1/unload_lora_adapter"):
                    self._adapter_route(route, raw)
                    return
                if route not in ("/v1/chat/completions", "/v1/completions"):
                    self._error(404, f"no route {self.path}")
                    return
                request = self._received(raw)
                if request is None:
                    return
                action = server._next_action()
                if action is not None:
                    kind = action[0]
                    if kind == "status":
                        _, status, retry_after, message = action
                        headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
                        self._error(status, message or f"injected failure {status}", headers)
                        return
                    if kind == "hang":
                        server._release.wait(action[1])
                    elif kind == "drop":
                        # Close the socket without a byte of response, like a crashed server.
                        self.close_connection = True
                        try:
                            self.connection.shutdown(socket.SHUT_RDWR)
                        except OSError:
                            pass
                        return
                completing = route == "/v1/completions"
                if completing and (request.get("prompt") in (None, "", []) or not request.get("model")):
                    self._error(400, "'model' and 'prompt' are required")
                    return
                if not completing and (not isinstance(request.get("messages"), list) or not request.get("model")):
                    self._error(400, "'model' and 'messages' are required")
                    return
                if server.runtime_lora and request["model"] != server.model and request["model"] not in server.adapters:
                    self._error(404, f"The model `{request['model']}` does not exist.")
                    return
                try:
                    if server._delay is not None:
                        server._release.wait(max(0.0, float(server._delay(request))))
                    body = server._text_completion(request) if completing else server._completion(request)
                except Exception as exc:  # a broken responder (or delay) shows as a server error
                    self._error(500, f"responder failed: {exc}")
                    return
                try:
                    self._send(200, body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout) while we hung

        return Handler


@pytest.fixture
def openai_server():
    server = FakeOpenAIServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def closed_port() -> int:
    """A loopback port with nothing listening on it (connections are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
