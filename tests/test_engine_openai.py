"""OpenAIEngine against the loopback OpenAI-compatible server."""
from __future__ import annotations

import json
import threading
import time

import pytest

from colbench.engines.base import EngineError, SamplingParams
from colbench.engines.openai import OpenAIEngine
from plugins.openai_server import token_logprob


def conv(text: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": "be brief"}, {"role": "user", "content": text}]


def test_generate_n_samples_with_logprobs(openai_server):
    openai_server.set_responder(lambda req: [f"{req['messages'][-1]['content']} sample {i}" for i in range(req["n"])])
    with OpenAIEngine("policy", openai_server.base_url) as engine:
        gens = engine.generate([conv("a"), conv("b")], SamplingParams(temperature=1.0, max_new_tokens=64, n=3, seed=7))
    assert engine.model_ref == f"openai:policy@{openai_server.base_url}"
    assert [[s.text for s in g.samples] for g in gens] == [
        ["a sample 0", "a sample 1", "a sample 2"], ["b sample 0", "b sample 1", "b sample 2"]]
    sample = gens[1].samples[2]
    assert sample.token_logprobs == [token_logprob(t) for t in ["b ", "sample ", "2"]]
    assert sample.num_tokens == 3 and sample.finish_reason == "stop"
    assert json.loads(gens[0].prompt_text) == conv("a")
    assert gens[0].prompt_tokens > 0 and gens[0].latency_s > 0
    for req in openai_server.requests:
        assert (req["n"], req["temperature"], req["max_tokens"], req["seed"], req["logprobs"]) == (3, 1.0, 64, 7, True)


def test_length_finish_and_no_logprobs_option(openai_server):
    openai_server.set_responder(lambda req: "w " * 10)
    with OpenAIEngine("policy", openai_server.base_url, logprobs=False) as engine:
        [gen] = engine.generate([conv("x")], SamplingParams(max_new_tokens=4))
    assert gen.samples[0].finish_reason == "length" and gen.samples[0].token_logprobs == []
    assert "logprobs" not in openai_server.requests[0]


def test_conversations_run_concurrently(openai_server):
    active, peak, lock = [0], [0], threading.Lock()

    def slow(req):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.2)
        with lock:
            active[0] -= 1
        return "ok"

    openai_server.set_responder(slow)
    with OpenAIEngine("policy", openai_server.base_url, concurrency=4) as engine:
        start = time.monotonic()
        gens = engine.generate([conv(str(i)) for i in range(8)], SamplingParams())
        elapsed = time.monotonic() - start
    assert len(gens) == 8 and 1 < peak[0] <= 4  # parallel, but never above the limit
    assert elapsed < 1.2  # 8 × 0.2 s serially would be 1.6 s


def test_failure_is_one_line_engine_error(openai_server):
    openai_server.fail_next(10, 500)
    with OpenAIEngine("policy", openai_server.base_url, max_retries=1, concurrency=1) as engine:
        with pytest.raises(EngineError) as err:
            engine.generate([conv("x")], SamplingParams())
    assert str(err.value) == f"endpoint {openai_server.base_url} failed after 2 tries: HTTP 500: injected failure 500"
