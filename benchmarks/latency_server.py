"""A loopback OpenAI-compatible chat server that answers as slowly as a real model does.

It stands in for two served models in a rollout benchmark: the policy (any model name
but "human") and the simulated human ("human"). Every request waits a latency drawn
from a lognormal distribution (median 1 s, sigma 0.5 by default; `--median` scales it
down for quick runs), then gets a short reply with the real response schema: `usage`,
and `logprobs.content` when asked for. The policy never writes the answer marker, so
every dialogue runs its full 10 agent turns (the protocol takes the last turn's text as
the answer).

Reproducible whatever the order of arrival: a request's latency and reply are drawn
from a hash of its model and messages (not the sampling seed, which numbers steps of
the orchestration and so differs between orchestrations), and of how many times that
exact conversation was seen before. The occurrence count keeps the k samples of a
task apart: their first requests are identical, the draws are not, and the dialogues
diverge from there. A rerun hands out the same multiset of conversations and latencies.

Every reply carries a tag, `[ref <hex>]`, that names its request, so a benchmark can
attribute the server's latencies to the trajectories whose stored turns hold the tag.

The server holds many hundreds of requests at once (a thread per connection, a long
listen backlog). It records the peak number of requests in flight and every request
(`requests`, `latencies`); `GET /stats` serves the same as JSON.

    python benchmarks/latency_server.py --port 8000 [--median 1] [--sigma 0.5] [--seed 0]

    with LatencyServer(median=0.2) as server:   # in a thread of this process
        ... server.base_url ..., server.in_flight_peak, server.latencies
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import signal
import statistics
import sys
import threading
import time
import uuid
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

HUMAN_MODEL = "human"
REF = re.compile(r"\[ref ([0-9a-f]{16})\]")

# Short, plausible turns. None contains the protocol's answer marker ("I WANT TO ANSWER:")
# or its thinking marker ("OUTPUT:").
POLICY_TURNS = [
    "Before I write it, could you tell me what the function should return when the input is empty?",
    "Thanks. Should the values be rounded, and if so to how many decimal places?",
    "Got it. Are the inputs always valid, or should the function check them and raise an error?",
    "One more question: does the order of the results matter, or can they come back in any order?",
    "Understood. What should happen when two entries tie: keep the first one, or the last?",
    "Thank you. Is there a limit on the size of the input I should keep in mind?",
]
HUMAN_TURNS = [
    "I'm not sure, the hidden details don't say. Just do what seems most natural.",
    "Yes, that's right. Keep it simple and return the plain result.",
    "No, you can assume the input is always well formed.",
    "Good question. The order should follow the input, please.",
    "I don't know about that one. Use your best judgement.",
]


class LatencyModel:
    """Lognormal latencies drawn from a hash: `median * exp(sigma * z)`, z standard normal."""

    def __init__(self, median: float = 1.0, sigma: float = 0.5, seed: int = 0):
        self.median, self.sigma, self.seed = float(median), float(sigma), int(seed)

    def digest(self, request: dict[str, Any], occurrence: int) -> bytes:
        conversation = json.dumps({"model": request.get("model"), "messages": request.get("messages")},
                                  sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(f"{self.seed}\n{occurrence}\n{conversation}".encode()).digest()

    def latency(self, digest: bytes) -> float:
        # 53 bits of the hash as a uniform in (0, 1), then the normal quantile.
        u = (int.from_bytes(digest[:7], "big") >> 3 | 1) / 2.0**53
        return self.median * math.exp(self.sigma * statistics.NormalDist().inv_cdf(u))


def _tokens(text: str) -> list[str]:
    """A stand-in tokenizer: words with their trailing spaces."""
    return re.findall(r"\S+\s*|\s+", text)


def _logprob(token: str) -> float:
    # Deterministic per token and plausible for a sampled token.
    return -round(0.05 + (zlib.crc32(token.encode()) % 1000) / 400, 4)


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a stuck client never keeps the process alive
    request_queue_size = 4096  # the listen backlog: a burst of new connections waits, is not refused
    allow_reuse_address = True


class LatencyServer:
    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, median: float = 1.0, sigma: float = 0.5,
                 seed: int = 0):
        self.model = LatencyModel(median, sigma, seed)
        self.requests: list[dict[str, Any]] = []  # one small record per answered request, in arrival order
        self.in_flight = 0
        self.in_flight_peak = 0
        self._seen: dict[bytes, int] = {}  # conversation hash → times seen (the occurrence count)
        self._lock = threading.Lock()
        self._stopping = threading.Event()  # ends every pending wait at stop()
        self._httpd = _Server((host, port), self._handler_class())
        self.port = self._httpd.server_address[1]
        self.base_url = f"http://{host}:{self.port}/v1"
        self._thread: threading.Thread | None = None

    @property
    def latencies(self) -> list[float]:
        with self._lock:
            return [r["latency_s"] for r in self.requests]

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {"in_flight": self.in_flight, "in_flight_peak": self.in_flight_peak, "requests": list(self.requests),
                    "cpu_s": time.process_time()}  # this process's CPU: is the stand-in itself a bottleneck?

    def reset(self) -> None:
        """Forget the records and the peak (not the occurrence counts: draws stay reproducible)."""
        with self._lock:
            self.requests.clear()
            self.in_flight_peak = self.in_flight

    # -- lifecycle --

    def start(self) -> "LatencyServer":
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> "LatencyServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- the replies --

    def _draw(self, request: dict[str, Any]) -> tuple[bytes, float]:
        with self._lock:
            probe = self.model.digest(request, 0)  # names the conversation
            occurrence = self._seen.get(probe, 0)
            self._seen[probe] = occurrence + 1
        digest = probe if occurrence == 0 else self.model.digest(request, occurrence)
        return digest, self.model.latency(digest)

    def completion(self, request: dict[str, Any], digest: bytes) -> dict[str, Any]:
        human = request.get("model") == HUMAN_MODEL
        turns = HUMAN_TURNS if human else POLICY_TURNS
        n = int(request.get("n") or 1)
        max_tokens = request.get("max_tokens") or request.get("max_completion_tokens")
        top = int(request.get("top_logprobs") or 0)
        choices, completion_tokens = [], 0
        ref = digest.hex()[:16]  # names the request; its n choices share it
        for i in range(n):
            text = f"{turns[(digest[8] + i) % len(turns)]} [ref {ref}]"
            tokens, finish = _tokens(text), "stop"
            if max_tokens is not None and len(tokens) > int(max_tokens):
                tokens, finish = tokens[: int(max_tokens)], "length"
            completion_tokens += len(tokens)
            choice: dict[str, Any] = {"index": i, "message": {"role": "assistant", "content": "".join(tokens)},
                                      "finish_reason": finish, "logprobs": None}
            if request.get("logprobs"):
                choice["logprobs"] = {"content": [self._token_logprobs(t, top) for t in tokens]}
            choices.append(choice)
        # About four characters a token, plus a few for each message's template.
        prompt_tokens = sum(4 + len(json.dumps(m.get("content", ""))) // 4 for m in request["messages"])
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:16]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.get("model"),
            "choices": choices,
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        }

    @staticmethod
    def _token_logprobs(token: str, top: int) -> dict[str, Any]:
        lp = _logprob(token)
        entry = {"token": token, "logprob": lp, "bytes": list(token.encode())}
        alternatives = [dict(entry)] + [{"token": f"<alt{k}>", "logprob": lp - k, "bytes": list(f"<alt{k}>".encode())}
                                        for k in range(1, top)]
        return {**entry, "top_logprobs": alternatives[:top]}

    def _handler_class(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive: a client reuses its connections

            def log_message(self, *args):
                pass

            def _send(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _error(self, status: int, message: str) -> None:
                self._send(status,
                           {"error": {"message": message, "type": "invalid_request_error", "param": None,
                                      "code": None}})

            def do_GET(self):
                path = self.path.rstrip("/")
                if path == "/v1/models":
                    self._send(200, {"object": "list", "data": [
                        {"id": name, "object": "model", "created": 0, "owned_by": "latency-server"}
                        for name in ("policy", HUMAN_MODEL)]})
                elif path == "/stats":
                    self._send(200, server.stats())
                else:
                    self._error(404, f"no route {self.path}")

            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._error(404, f"no route {self.path}")
                    return
                try:
                    request = json.loads(raw)
                except ValueError:
                    self._error(400, "request body is not JSON")
                    return
                if not isinstance(request.get("messages"), list) or not request.get("model"):
                    self._error(400, "'model' and 'messages' are required")
                    return
                arrived = time.time()  # wall clock: comparable with a client in another process
                with server._lock:
                    server.in_flight += 1
                    server.in_flight_peak = max(server.in_flight_peak, server.in_flight)
                digest, latency = server._draw(request)
                stopped = server._stopping.wait(latency)
                body = None if stopped else server.completion(request, digest)
                with server._lock:
                    # Out of flight before the reply starts: the client may send its next request
                    # the moment it has this one, and must not be counted twice meanwhile.
                    server.in_flight -= 1
                    server.requests.append({"model": request["model"], "ref": digest.hex()[:16],
                                            "latency_s": latency, "arrived": arrived, "replied": time.time()})
                if body is not None:
                    try:
                        self._send(200, body)
                    except (BrokenPipeError, ConnectionResetError):
                        pass  # the client gave up

        return Handler


def summary(stats: dict[str, Any]) -> str:
    latencies = sorted(r["latency_s"] for r in stats["requests"])
    if not latencies:
        return "no requests"
    p90 = latencies[int(0.9 * (len(latencies) - 1))]
    return (f"{len(latencies)} requests, peak {stats['in_flight_peak']} in flight, latency median "
            f"{statistics.median(latencies):.3f} s, p90 {p90:.3f} s, max {latencies[-1]:.3f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000, help="0 picks a free port (printed)")
    parser.add_argument("--median", type=float, default=1.0, help="median latency, seconds")
    parser.add_argument("--sigma", type=float, default=0.5, help="lognormal shape: the spread of log latency")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    server = LatencyServer(args.host, args.port, median=args.median, sigma=args.sigma, seed=args.seed).start()
    signal.signal(signal.SIGTERM, _interrupt)  # a parent's terminate() ends it like Ctrl-C, summary included
    print(f"serving {server.base_url}", flush=True)  # the first line: a parent process reads the URL here
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
        print(f"latency server: {summary(server.stats())}", file=sys.stderr, flush=True)


def _interrupt(*_) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    main()
