"""The OpenAI-compatible client against a real loopback HTTP server."""
from __future__ import annotations

import time

import pytest

from colbench.openai_client import EndpointError, OpenAIClient

MESSAGES = [{"role": "user", "content": "hello there"}]


def client_for(server, **kw) -> OpenAIClient:
    return OpenAIClient(server.base_url, kw.pop("api_key", None), **kw)


def test_chat_sends_the_request_and_parses_choices(openai_server):
    openai_server.set_responder(lambda req: ["first answer", "second answer here"])
    with client_for(openai_server, api_key="sk-test") as client:
        out = client.chat("m1", MESSAGES, temperature=0.7, max_tokens=50, n=2, seed=3, logprobs=True, top_logprobs=2)
    sent = openai_server.requests[0]
    assert sent["model"] == "m1" and sent["messages"] == MESSAGES
    assert (sent["temperature"], sent["max_tokens"], sent["n"], sent["seed"]) == (0.7, 50, 2, 3)
    assert sent["logprobs"] is True and sent["top_logprobs"] == 2
    assert openai_server.headers[0]["authorization"] == "Bearer sk-test"
    assert [c.text for c in out.choices] == ["first answer", "second answer here"]
    assert [c.finish_reason for c in out.choices] == ["stop", "stop"]
    tokens = out.choices[1].logprobs
    assert [t.token for t in tokens] == ["second ", "answer ", "here"]
    assert all(t.logprob < 0 for t in tokens) and len(tokens[0].top) == 2
    assert out.usage["completion_tokens"] == 5 and out.usage["total_tokens"] > 5


def test_logprobs_absent_unless_asked_and_length_finish(openai_server):
    openai_server.set_responder(lambda req: "one two three four")
    with client_for(openai_server) as client:
        out = client.chat("m", MESSAGES, max_tokens=2)
    assert "logprobs" not in openai_server.requests[0]
    assert out.choices[0].logprobs is None and out.choices[0].token_logprobs == []
    assert out.choices[0].text == "one two " and out.choices[0].finish_reason == "length"


def test_api_key_from_environment(openai_server, monkeypatch):
    monkeypatch.delenv("COLBENCH_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    with client_for(openai_server) as client:
        client.chat("m", MESSAGES)
    monkeypatch.setenv("COLBENCH_API_KEY", "sk-colbench")
    with client_for(openai_server) as client:
        client.chat("m", MESSAGES)
    monkeypatch.delenv("COLBENCH_API_KEY")
    monkeypatch.delenv("OPENAI_API_KEY")
    with client_for(openai_server) as client:
        client.chat("m", MESSAGES)
    auth = [h.get("authorization") for h in openai_server.headers]
    assert auth == ["Bearer sk-openai", "Bearer sk-colbench", None]


def test_image_parts_are_sent_as_given(openai_server):
    parts = [{"type": "text", "text": "what is this"},
             {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]
    with client_for(openai_server) as client:
        out = client.chat("m", [{"role": "user", "content": parts}])
    assert openai_server.requests[0]["messages"][0]["content"] == parts
    assert out.choices[0].text == "reply 0: what is this"


def test_retries_server_errors_then_succeeds(openai_server):
    openai_server.fail_next(2, 500)
    with client_for(openai_server, max_retries=3) as client:
        out = client.chat("m", MESSAGES)
    assert out.choices[0].text == "reply 0: hello there"
    assert len(openai_server.requests) == 3


def test_gives_up_with_one_line_error(openai_server):
    openai_server.fail_next(5, 503, message="model is overloaded\nplease retry")
    with client_for(openai_server, max_retries=2) as client, pytest.raises(EndpointError) as err:
        client.chat("m", MESSAGES)
    message = str(err.value)
    assert "\n" not in message
    assert (
        message == f"endpoint {openai_server.base_url} failed after 3 tries: HTTP 503: model is overloaded please retry"
    )
    assert err.value.status == 503
    assert len(openai_server.requests) == 3


def test_no_retry_on_client_error(openai_server):
    openai_server.fail_next(3, 400, message="max_tokens is too large")
    with client_for(openai_server, max_retries=3) as client, pytest.raises(EndpointError) as err:
        client.chat("m", MESSAGES)
    assert len(openai_server.requests) == 1
    assert str(err.value) == (
        f"endpoint {openai_server.base_url} rejected the request: HTTP 400: max_tokens is too large")


def test_retry_after_is_honoured_on_429(openai_server):
    openai_server.fail_next(1, 429, retry_after=1)
    with client_for(openai_server, max_retries=1) as client:
        start = time.monotonic()
        client.chat("m", MESSAGES)
        waited = time.monotonic() - start
    assert len(openai_server.requests) == 2
    assert waited >= 0.95  # the SDK's first backoff alone is at most 0.5 s


def test_unreachable_endpoint(closed_port):
    url = f"http://127.0.0.1:{closed_port}/v1"
    with OpenAIClient(url, max_retries=2) as client, pytest.raises(EndpointError) as err:
        client.chat("m", MESSAGES)
    assert str(err.value) == f"endpoint {url} unreachable after 3 tries: connection refused"


def test_timeout_is_retried_then_reported(openai_server):
    openai_server.hang_next(2, seconds=5)
    with client_for(openai_server, timeout_s=0.3, max_retries=1) as client, pytest.raises(EndpointError) as err:
        start = time.monotonic()
        client.chat("m", MESSAGES)
    assert time.monotonic() - start < 3
    assert str(err.value) == f"endpoint {openai_server.base_url} timed out after 2 tries: no response within 0.3s"


def test_timeout_then_success(openai_server):
    openai_server.hang_next(1, seconds=5)
    with client_for(openai_server, timeout_s=0.3, max_retries=2) as client:
        out = client.chat("m", MESSAGES)
    assert out.choices[0].text.startswith("reply 0")


def test_dropped_connection_is_retried(openai_server):
    openai_server.drop_next(1)
    with client_for(openai_server, max_retries=1) as client:
        out = client.chat("m", MESSAGES)
    assert out.choices[0].text.startswith("reply 0") and len(openai_server.requests) == 2
    openai_server.drop_next(2)
    with client_for(openai_server, max_retries=1) as client, pytest.raises(EndpointError) as err:
        client.chat("m", MESSAGES)
    assert str(err.value) == (
        f"endpoint {openai_server.base_url} failed after 2 tries: connection closed without a response")


def test_list_models(openai_server):
    with client_for(openai_server) as client:
        assert client.list_models() == ["test-model"]
