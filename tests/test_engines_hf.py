"""The transformers engine on a tiny random Llama with the real SmolLM2 tokenizer, the
engine factory, and the vLLM engine's guard (its real test runs only where vLLM imports)."""
from __future__ import annotations

import importlib.util
import math
import sys
import types

import pytest
import torch

from colbench.engines import EngineError, SamplingParams, make_engine
from colbench.engines.hf import HFEngine

EOS = 2  # <|im_end|>

# Prompts of clearly different lengths, so a batch needs padding.
CONVERSATIONS = [
    [{"role": "user", "content": "Hi"}],
    [{"role": "user", "content": "Write a Python function that returns the sum of a list of numbers."}],
    [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is 2 + 2?"},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "And times three?"},
    ],
]


def close_lists(a, b, tol=1e-4):
    return len(a) == len(b) and all(abs(x - y) <= tol for x, y in zip(a, b))


def test_prompt_is_chat_template_text(tiny_engine):
    [gen] = tiny_engine.generate(CONVERSATIONS[:1], SamplingParams(temperature=0, max_new_tokens=2))
    assert gen.prompt_text == tiny_engine.render_prompt(CONVERSATIONS[0])
    assert gen.prompt_text.startswith("<|im_start|>system\n")  # SmolLM2's default system prompt
    assert gen.prompt_text.endswith("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
    assert gen.prompt_tokens == len(tiny_engine.encode(gen.prompt_text))


def test_batched_greedy_equals_one_at_a_time(tiny_engine):
    params = SamplingParams(temperature=0, max_new_tokens=12)
    batched = tiny_engine.generate(CONVERSATIONS, params)
    for conv, gen in zip(CONVERSATIONS, batched):
        [alone] = tiny_engine.generate([conv], params)
        assert gen.samples[0].token_ids == alone.samples[0].token_ids
        assert close_lists(gen.samples[0].token_logprobs, alone.samples[0].token_logprobs)
        assert gen.samples[0].text == alone.samples[0].text
    # The rows really are different continuations (otherwise the check above proves little).
    assert len({tuple(g.samples[0].token_ids) for g in batched}) == len(CONVERSATIONS)


def test_the_kv_cache_decodes_as_the_whole_sequence_does_with_no_deprecated_name(tiny_engine):
    """The loop hands the model its KV cache by the installed transformers' name: greedy tokens equal those of
    re-reading the whole sequence each step (a cache dropped, as transformers 5.40 will drop one passed by the old
    name, would decode from the last token alone), and transformers' deprecation of the old name never fires."""
    import warnings

    params = SamplingParams(temperature=0, max_new_tokens=10)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*past_key_values.*")
        [gen] = tiny_engine.generate(CONVERSATIONS[2:], params)
    ids = tiny_engine.encode(gen.prompt_text)
    with torch.inference_mode():
        for _ in gen.samples[0].token_ids:
            logits = tiny_engine.model(input_ids=torch.tensor([ids])).logits[0, -1]
            ids.append(int(logits.argmax()))
    assert ids[-len(gen.samples[0].token_ids):] == gen.samples[0].token_ids


def test_micro_batches_match_one_batch(tiny_engine):
    # The same weights, wrapped as training code would, in micro-batches of 2 rows.
    small = HFEngine(model=tiny_engine.model, tokenizer=tiny_engine.tokenizer, max_batch_size=2, model_ref="x")
    params = SamplingParams(temperature=0, max_new_tokens=8, n=2)
    a = tiny_engine.generate(CONVERSATIONS, params)
    b = small.generate(CONVERSATIONS, params)
    assert [[s.token_ids for s in g.samples] for g in a] == [[s.token_ids for s in g.samples] for g in b]


def test_n_samples_and_seed(tiny_engine):
    params = SamplingParams(temperature=1.0, max_new_tokens=10, n=3, seed=7)
    first = tiny_engine.generate(CONVERSATIONS[:2], params)
    assert [len(g.samples) for g in first] == [3, 3]
    for gen in first:
        assert len({tuple(s.token_ids) for s in gen.samples}) > 1  # samples, not copies
        assert all(len(s.token_logprobs) == len(s.token_ids) for s in gen.samples)
        assert gen.latency_s > 0
    again = tiny_engine.generate(CONVERSATIONS[:2], params)
    assert [[s.token_ids for s in g.samples] for g in again] == [[s.token_ids for s in g.samples] for g in first]
    other = tiny_engine.generate(CONVERSATIONS[:2], SamplingParams(temperature=1.0, max_new_tokens=10, n=3, seed=8))
    assert [[s.token_ids for s in g.samples] for g in other] != [[s.token_ids for s in g.samples] for g in first]


@pytest.mark.parametrize("temperature", [1.0, 0.6])
def test_sampled_logprobs_equal_teacher_forcing(tiny_engine, temperature):
    # At temperature 0.6 the sampling distribution differs from the raw one: the recorded
    # log-probs must still be the raw (temperature 1) ones that teacher forcing gives.
    params = SamplingParams(temperature=temperature, max_new_tokens=12, n=2, seed=3)
    gens = tiny_engine.generate(CONVERSATIONS, params)
    prompts = [g.prompt_text for g in gens for _ in g.samples]
    samples = [s for g in gens for s in g.samples]
    forced = tiny_engine.logprobs(prompts, [s.token_ids for s in samples])
    for sample, lps in zip(samples, forced):
        assert all(lp <= 0 for lp in sample.token_logprobs)
        assert close_lists(sample.token_logprobs, lps), (sample.token_logprobs, lps)


def test_logprobs_of_text(tiny_engine):
    prompt = tiny_engine.render_prompt(CONVERSATIONS[0])
    completion = "Hello there!"
    [by_text, empty, by_ids] = tiny_engine.logprobs(
        [prompt, prompt, prompt], [completion, "", tiny_engine.encode(completion)]
    )
    assert len(by_text) == len(tiny_engine.encode(completion)) > 1
    assert empty == []
    assert close_lists(by_text, by_ids, tol=1e-5)
    # The first token's log-prob, straight from an unbatched forward pass over the prompt.
    ids = torch.tensor([tiny_engine.encode(prompt)])
    with torch.no_grad():
        logits = tiny_engine.model(ids).logits[0, -1].float()
    first = tiny_engine.encode(completion)[0]
    assert math.isclose(by_text[0], float(logits.log_softmax(-1)[first]), abs_tol=1e-4)


def eos_prone(engine, p_eos=0.15):
    """Make the model end each step with probability p_eos (a forward hook on the output
    layer), so samples stop at different lengths. Returns the hook handle."""

    def hook(module, inputs, logits):
        rest = logits.clone()
        rest[..., EOS] = float("-inf")
        logits = logits.clone()
        logits[..., EOS] = torch.logsumexp(rest, dim=-1) + math.log(p_eos / (1 - p_eos))
        return logits

    return engine.model.get_output_embeddings().register_forward_hook(hook)


def test_stops_at_eos_and_trims_padding(tiny_model_dir):
    engine = HFEngine(str(tiny_model_dir), device="cpu")
    eos_prone(engine)
    params = SamplingParams(temperature=1.0, max_new_tokens=20, n=3, seed=0)
    gens = engine.generate(CONVERSATIONS, params)
    samples = [s for g in gens for s in g.samples]
    stopped = [s for s in samples if s.finish_reason == "stop"]
    assert len({s.num_tokens for s in stopped}) > 2  # rows of one batch end at different steps
    for s in samples:
        assert len(s.token_logprobs) == len(s.token_ids)
        assert "<|im_end|>" not in s.text
        if s.finish_reason == "stop":
            assert s.token_ids[-1] == EOS and EOS not in s.token_ids[:-1]
        else:
            assert len(s.token_ids) == params.max_new_tokens and EOS not in s.token_ids
    # Teacher forcing agrees on the EOS token's log-prob too.
    forced = engine.logprobs([g.prompt_text for g in gens for _ in g.samples], [s.token_ids for s in samples])
    assert all(close_lists(s.token_logprobs, f) for s, f in zip(samples, forced))
    assert all(math.isclose(s.token_logprobs[-1], math.log(0.15), abs_tol=1e-3) for s in stopped)


def test_max_new_tokens_and_train_mode(tiny_engine):
    tiny_engine.model.train()
    try:
        [gen] = tiny_engine.generate(CONVERSATIONS[:1], SamplingParams(temperature=0, max_new_tokens=3))
        assert tiny_engine.model.training  # put back as the training code left it
    finally:
        tiny_engine.model.eval()
    assert gen.samples[0].num_tokens == 3 and gen.samples[0].finish_reason == "length"


def test_make_engine_hf(tiny_model_dir):
    engine = make_engine("transformers", str(tiny_model_dir), device="cpu", max_batch_size=4)
    assert isinstance(engine, HFEngine)
    assert engine.model_ref == f"hf:{tiny_model_dir.resolve()}"
    assert engine.max_batch_size == 4 and engine.device.type == "cpu"
    assert next(engine.model.parameters()).dtype == torch.float32


def test_make_engine_unknown_kind():
    with pytest.raises(EngineError, match="unknown engine 'llamacpp'"):
        make_engine("llamacpp", "smollm2")


def test_make_engine_openai_is_lazy_and_passes_options(monkeypatch):
    # The OpenAI engine is another module's; check only the factory's wiring to it.
    made = {}

    class Recorder:
        def __init__(self, model, base_url, **opts):
            made.update(model=model, base_url=base_url, **opts)

    monkeypatch.setitem(sys.modules, "colbench.engines.openai", types.SimpleNamespace(OpenAIEngine=Recorder))
    engine = make_engine("openai", "served-model", base_url="http://127.0.0.1:9/v1", checkpoint_lookup=print)
    assert isinstance(engine, Recorder)
    assert made == {"model": "served-model", "base_url": "http://127.0.0.1:9/v1"}


# ---------------------------------------------------------------------------- vLLM

HAS_VLLM = importlib.util.find_spec("vllm") is not None


def test_vllm_missing_is_a_clear_error(monkeypatch, tmp_path):
    import colbench.model_refs

    # Whether or not vLLM is installed here, make its import fail.
    monkeypatch.setitem(sys.modules, "vllm", None)
    # And check it fails before any model work (resolving "smollm2" may convert for ~40 s).
    monkeypatch.setattr(colbench.model_refs, "embedded_model_dir", lambda: pytest.fail("resolved the model first"))
    from colbench.engines import vllm_server

    for venv, expected in ((tmp_path / "none", "vLLM is not installed: pip install 'colbench[vllm]'"),
                           (tmp_path / ".venv-vllm", f"vLLM is not in this environment; its CPU build is, in "
                            f"{tmp_path / '.venv-vllm' / 'bin' / 'python'}, which cannot hold colbench's transformers:"
                            " serve the policy with `colbench serve` and use --engine openai")):
        if venv.name == ".venv-vllm":  # the CPU build's environment, as scripts/setup.sh --vllm makes it
            (venv / "bin").mkdir(parents=True)
            (venv / "bin" / "python").touch()
        monkeypatch.setattr(vllm_server, "repo_venv", lambda venv=venv: venv)
        with pytest.raises(EngineError) as err:
            make_engine("vllm", "smollm2", device="cpu")  # device: every builder passes it
        assert str(err.value) == expected


@pytest.mark.skipif(
    not (HAS_VLLM and torch.cuda.is_available()),
    reason="needs vLLM (a CUDA-only optional dependency) and a GPU" if HAS_VLLM else "vLLM is not installed",
)
def test_vllm_generates_with_raw_logprobs(tiny_model_dir):
    from colbench.engines.vllm import VLLMEngine

    engine = VLLMEngine(str(tiny_model_dir), dtype="float32", gpu_memory_utilization=0.3, max_model_len=512)
    try:
        params = SamplingParams(temperature=0.7, max_new_tokens=8, n=2, seed=1)
        gens = engine.generate(CONVERSATIONS, params)
        assert [len(g.samples) for g in gens] == [2, 2, 2]
        reference = HFEngine(str(tiny_model_dir), device="cpu")
        for gen in gens:
            assert gen.prompt_text == reference.render_prompt(CONVERSATIONS[gens.index(gen)])
            for s in gen.samples:
                assert len(s.token_logprobs) == len(s.token_ids) > 0
                [forced] = reference.logprobs([gen.prompt_text], [s.token_ids])
                assert close_lists(s.token_logprobs, forced, tol=2e-2)
    finally:
        engine.close()
