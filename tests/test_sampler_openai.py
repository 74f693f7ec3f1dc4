"""SWEET's candidates from a served model (--sampler openai): the stored prompt goes as token ids to
/v1/completions of the loopback OpenAI-compatible server, which here serves the tiny policy itself (its
completion responder samples with the hf engine on the tiny model, as `vllm serve` of the same weights
would), and the sampled ids and their log-probs come back the way vLLM sends them."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest
from sqlmodel import select

from colbench.engines.base import EngineError, SamplingParams
from colbench.engines.openai import OpenAIEngine
from colbench.official import import_trajectories
from colbench.store.db import Database
from colbench.store.models import SweetCandidate
from colbench.training import sequences as S
from conftest import write_jsonl
from officialdata import backend_task, trajectory

COLBENCH = [sys.executable, "-m", "colbench.cli.app"]
PROMPT = (
    "<|im_start|>system\nYou are a helpful agent.<|im_end|>\n<|im_start|>user\nWhat"
    " unit?<|im_end|>\n<|im_start|>assistant\n"
)


def serve_policy(server, engine) -> list[tuple[list[int], list]]:
    """Make the loopback server sample from ``engine`` (the tiny policy; or a function of the model name a request
    asks for, giving its engine) for /v1/completions; returns the list it appends (prompt ids, samples) to, one entry
    per request."""
    served: list[tuple[list[int], list]] = []
    lock = threading.Lock()  # the server answers on many threads; the model samples one batch at a time
    engine_for = engine if callable(engine) else lambda name: engine

    def respond(request):
        params = SamplingParams(temperature=request["temperature"], max_new_tokens=request["max_tokens"],
                                n=request["n"], seed=request.get("seed"))
        with lock:
            [generation] = engine_for(request["model"]).generate_from_prompts([request["prompt"]], params)
            served.append((list(request["prompt"]), generation.samples))
        return [{"token_ids": s.token_ids, "logprobs": s.token_logprobs, "finish_reason": s.finish_reason,
                 "text": s.text}
                for s in generation.samples]

    server.set_completion_responder(respond)
    return served


@pytest.mark.parametrize("token_ids_field", [True, False], ids=["return_token_ids", "token_id-strings"])
def test_prompts_go_as_ids_and_samples_come_back_as_ids_with_logprobs(openai_server, tiny_engine, tokenizer,
                                                                      token_ids_field):
    openai_server.token_ids_field = token_ids_field  # False: an older vLLM, ids only in logprobs.tokens
    served = serve_policy(openai_server, tiny_engine)
    with OpenAIEngine("test-model", openai_server.base_url, tokenizer=tokenizer) as engine:
        [generation] = engine.generate_from_prompts([PROMPT],
                                                    SamplingParams(temperature=1.0, max_new_tokens=8, n=3, seed=5))
    [request] = openai_server.requests
    assert request["prompt"] == S.encode_text(tokenizer, PROMPT)  # exactly the ids training reads, no BOS added
    # Every sampling filter sent switched off: a field left out, vLLM fills from the model's generation config.
    assert {k: request.get(k) for k in ("top_p", "top_k", "min_p", "repetition_penalty")} == {
        "top_p": 1.0, "top_k": -1, "min_p": 0.0, "repetition_penalty": 1.0}
    assert (request["n"], request["max_tokens"], request["seed"], request["return_tokens_as_token_ids"]) == (3, 8, 5,
                                                                                                             True)
    [(_, sampled)] = served
    assert [s.token_ids for s in generation.samples] == [s.token_ids for s in sampled]
    assert [s.token_logprobs for s in generation.samples] == [s.token_logprobs for s in sampled]  # exact through JSON
    assert [s.finish_reason for s in generation.samples] == [s.finish_reason for s in sampled]
    assert generation.prompt_tokens == len(request["prompt"]) and generation.prompt_text == PROMPT
    # The log-probs are the policy's own: teacher-forced by the hf engine on the same ids.
    forced = tiny_engine.logprobs([PROMPT] * 3, [s.token_ids for s in generation.samples])
    for sample, values in zip(generation.samples, forced):
        assert sample.token_logprobs == pytest.approx(values, abs=1e-4)


def test_a_server_that_cannot_say_what_it_sampled_is_refused(openai_server, tokenizer):
    openai_server.set_completion_responder(
        lambda request: [{"token_ids": [5, 6], "logprobs": [-1.0, -2.0], "finish_reason": "stop"}]
    )
    engine = OpenAIEngine("test-model", openai_server.base_url, tokenizer=tokenizer, max_retries=0)
    openai_server.token_ids_field = openai_server.token_id_strings = (
        False  # a server that is not vLLM: tokens as text only
    )
    with pytest.raises(EngineError, match="tokens as text"):
        engine.generate_from_prompts([PROMPT], SamplingParams(n=1, max_new_tokens=4))
    openai_server.token_id_strings = True
    openai_server.set_completion_responder(
        lambda request: [{"token_ids": [len(tokenizer) + 3], "logprobs": [-1.0], "finish_reason": "stop"}]
    )
    with pytest.raises(EngineError, match="outside the policy's vocabulary"):
        engine.generate_from_prompts([PROMPT], SamplingParams(n=1, max_new_tokens=4))
    engine.close()


def test_sweet_samples_its_candidates_from_the_served_policy(openai_server, tiny_engine, tiny_model_dir, tmp_path):
    folder = tmp_path
    url = f"sqlite:///{folder / 'c.db'}"
    db = Database(url)
    records = [trajectory(backend_task(i), turns, reward) for i in range(2) for turns, reward in ((2, 1.0), (1, 0.0))]
    import_trajectories(db, write_jsonl(folder / "data.jsonl", records))
    env = dict(os.environ, NO_COLOR="1", OMP_NUM_THREADS="1")
    env.pop("COLBENCH_DEBUG", None)
    tiny = ["--device", "cpu", "--lora-rank", "4", "--max-len", "160", "--batch-size", "2", "--lr", "1e-3", "--json"]

    def colbench(*args):
        done = subprocess.run(COLBENCH + ["--db", url, *args, *tiny], capture_output=True, text=True, env=env,
                              timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout)

    critic = colbench("critic", "fit", "--model", str(tiny_model_dir), "--epochs", "1", "--heldout", "0")["checkpoint"]
    served = serve_policy(openai_server, tiny_engine)
    result = colbench("policy", "fit", "--algo", "sweet", "--model", str(tiny_model_dir), "--critic", critic,
                      "--fraction", "1",
                      "--candidates", "4", "--max-new-tokens", "6", "--sampler", "openai", "--base-url",
                      openai_server.base_url)
    metrics = result["metrics"]
    assert metrics["sampler"] == "openai" and metrics["turns_sampled"] == 6 and metrics["pairs"] > 0
    assert [r["model"] for r in openai_server.requests] == ["test-model"] * 6  # the only model the server lists
    with db.read() as session:
        candidates = session.exec(select(SweetCandidate).where(SweetCandidate.run_id == result["run_id"])).all()
    assert len(candidates) == 24 and len(served) == 6
    for candidate in candidates:
        prompt, sample = next(
            (ids, samples[candidate.index])
            for ids, samples in served
            if samples[candidate.index].token_ids == candidate.token_ids
        )
        # Stored as the other samplers store them: the sampled ids, and the mean of their log-probs as the sampler's
        # term.
        assert candidate.finish_reason == sample.finish_reason
        assert candidate.sampler_logp == pytest.approx(sum(sample.token_logprobs) / len(sample.token_logprobs),
                                                       abs=1e-6)
        text = tiny_engine.tokenizer.decode(prompt)
        assert text.endswith("<|im_start|>assistant\n") and S.encode_text(tiny_engine.tokenizer, text) == prompt
        [forced] = tiny_engine.logprobs([text], [candidate.token_ids])
        assert candidate.sampler_logp == pytest.approx(sum(forced) / len(forced), abs=1e-4)
    # Served again under the same name, a rerun reuses the candidates: the key names the served model.
    again = colbench("policy", "fit", "--algo", "sweet", "--model", str(tiny_model_dir), "--critic", critic,
                     "--fraction", "1",
                     "--candidates", "4", "--max-new-tokens", "6", "--sampler", "openai", "--base-url",
                     openai_server.base_url,
                     "--served-model", "test-model")
    assert again["metrics"]["turns_sampled"] == 0 and again["metrics"]["sampling_key"] == metrics["sampling_key"]
