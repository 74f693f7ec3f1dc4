"""The CTranslate2 engine on the tiny random Llama (real SmolLM2 tokenizer): log-probs against
transformers teacher forcing, prompts, sampling options, the conversion cache, LoRA
checkpoints, stopping, and the default-engine rule."""
from __future__ import annotations

import json
import os
import shutil
import signal
import threading
import time

import pytest
import torch

ct2 = pytest.importorskip("ctranslate2")

from colbench.engines import EngineError, SamplingParams, default_engine, make_engine  # noqa: E402
from colbench.engines.ct2 import CT2Engine, GenerationStopped, conversion_target, length_groups  # noqa: E402
from colbench.engines.hf import HFEngine  # noqa: E402
from colbench.model_refs import resolve_model  # noqa: E402

EOS = 2  # <|im_end|>

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


def ids_of(generations):
    return [[s.token_ids for s in g.samples] for g in generations]


def worst_gap(a, b):
    assert len(a) == len(b) > 0
    return max(abs(x - y) for x, y in zip(a, b))


@pytest.fixture(scope="module")
def ct2_cache(tmp_path_factory):
    """Conversions of this module, kept out of the user's cache."""
    return tmp_path_factory.mktemp("ct2-cache")


@pytest.fixture(scope="module")
def ct2_engine(tiny_model_dir, ct2_cache):
    engine = CT2Engine(str(tiny_model_dir), cache_dir=ct2_cache)
    yield engine
    engine.close()


@pytest.fixture
def count_conversions(monkeypatch):
    """How many times the CTranslate2 converter ran (it still runs)."""
    from ctranslate2.converters import TransformersConverter

    calls = []
    real = TransformersConverter.convert

    def counting(self, output_dir, *args, **kwargs):
        calls.append(output_dir)
        return real(self, output_dir, *args, **kwargs)

    monkeypatch.setattr(TransformersConverter, "convert", counting)
    return calls


# ---------------------------------------------------------------------------- log-probs and prompts


@pytest.mark.parametrize("temperature", [1.0, 0.6])
def test_sampled_logprobs_equal_teacher_forcing(ct2_engine, tiny_engine, temperature):
    # At 0.6 the sampling distribution is not the raw one: the recorded log-probs must still
    # be the raw (temperature 1) ones that transformers gives by teacher forcing.
    gens = ct2_engine.generate(CONVERSATIONS, SamplingParams(temperature=temperature, max_new_tokens=12, n=2, seed=3))
    prompts = [g.prompt_text for g in gens for _ in g.samples]
    samples = [s for g in gens for s in g.samples]
    forced = tiny_engine.logprobs(prompts, [s.token_ids for s in samples])
    for sample, reference in zip(samples, forced):
        assert len(sample.token_logprobs) == len(sample.token_ids) == 12
        assert worst_gap(sample.token_logprobs, reference) <= 1e-3, (sample.token_logprobs, reference)
    assert len({tuple(s.token_ids) for s in samples}) == len(samples)  # really sampled


def test_greedy_equals_transformers_greedy(ct2_engine, tiny_engine):
    params = SamplingParams(temperature=0, max_new_tokens=12, n=2)
    ours, theirs = ct2_engine.generate(CONVERSATIONS, params), tiny_engine.generate(CONVERSATIONS, params)
    assert ids_of(ours) == ids_of(theirs)
    assert len({tuple(g.samples[0].token_ids) for g in ours}) == len(CONVERSATIONS)


def test_prompt_text_is_the_transformers_engines(ct2_engine, tiny_engine):
    gens = ct2_engine.generate(CONVERSATIONS, SamplingParams(temperature=0, max_new_tokens=2))
    for conversation, gen in zip(CONVERSATIONS, gens):
        assert gen.prompt_text == tiny_engine.render_prompt(conversation)
        assert gen.prompt_tokens == len(tiny_engine.encode(gen.prompt_text))
        assert gen.latency_s > 0
    assert gens[0].prompt_text.endswith("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")


def test_model_ref_is_the_policy_in_float32_and_names_a_quantization(ct2_engine, tiny_model_dir, ct2_cache):
    # float32 samples the policy itself (the log-prob tests above): its trajectories are the policy's.
    assert ct2_engine.model_ref == resolve_model(str(tiny_model_dir)).ref == f"hf:{tiny_model_dir.resolve()}"
    quantized = CT2Engine(str(tiny_model_dir), cache_dir=ct2_cache, compute_type="int8")
    assert quantized.model_ref == f"ct2-int8:hf:{tiny_model_dir.resolve()}"
    quantized.close()


# ---------------------------------------------------------------------------- sampling options


def test_n_samples_and_seeds(ct2_engine):
    params = SamplingParams(temperature=1.0, max_new_tokens=10, n=3, seed=7)
    first = ct2_engine.generate(CONVERSATIONS, params)
    assert [len(g.samples) for g in first] == [3, 3, 3]
    for gen in first:
        assert len({tuple(s.token_ids) for s in gen.samples}) == 3  # samples, not copies
    # CTranslate2 seeds a worker thread only once: without a fresh generator per seeded
    # call, the second call would continue the first one's random stream.
    assert ids_of(ct2_engine.generate(CONVERSATIONS, params)) == ids_of(first)
    other = ct2_engine.generate(CONVERSATIONS, SamplingParams(temperature=1.0, max_new_tokens=10, n=3, seed=8))
    assert ids_of(other) != ids_of(first)


def test_greedy_n_copies_and_max_new_tokens(ct2_engine):
    [gen] = ct2_engine.generate(CONVERSATIONS[:1], SamplingParams(temperature=0, max_new_tokens=3, n=2))
    assert [s.token_ids for s in gen.samples][0] == [s.token_ids for s in gen.samples][1]
    assert all(s.num_tokens == 3 and s.finish_reason == "length" for s in gen.samples)
    [empty] = ct2_engine.generate(CONVERSATIONS[:1], SamplingParams(temperature=1.0, max_new_tokens=0, n=2))
    assert [(s.text, s.finish_reason) for s in empty.samples] == [("", "length"), ("", "length")]


@pytest.fixture(scope="module")
def two_eos_model_dir(tiny_model_dir, ct2_engine, tmp_path_factory):
    """The tiny model with a second end-of-turn id (as models with several EOS ids in
    generation_config.json have): a token the greedy continuation of the first conversation
    reaches after a few steps, and that of another conversation never does."""
    greedy = [
        g.samples[0].token_ids
        for g in ct2_engine.generate(CONVERSATIONS, SamplingParams(temperature=0, max_new_tokens=20))
    ]
    position, token = next(
        (p, t)
        for p, t in enumerate(greedy[0])
        if p >= 3 and t not in greedy[0][:p] and any(t not in g for g in greedy[1:])
    )
    path = tmp_path_factory.mktemp("two-eos")
    shutil.copytree(tiny_model_dir, path, dirs_exist_ok=True)
    generation_file = path / "generation_config.json"
    generation = json.loads(generation_file.read_text()) if generation_file.is_file() else {}
    generation["eos_token_id"] = [EOS, token]
    generation_file.write_text(json.dumps(generation))
    return path, token, position


def test_stops_at_end_of_turn_tokens(two_eos_model_dir, ct2_cache):
    path, other_eos, position = two_eos_model_dir
    engine = CT2Engine(str(path), cache_dir=ct2_cache)
    reference = HFEngine(str(path), device="cpu")
    assert engine.eos_ids == reference.eos_ids == {EOS, other_eos}

    greedy = engine.generate(CONVERSATIONS, SamplingParams(temperature=0, max_new_tokens=20))
    assert ids_of(greedy) == ids_of(reference.generate(CONVERSATIONS, SamplingParams(temperature=0, max_new_tokens=20)))
    first = greedy[0].samples[0]
    assert first.finish_reason == "stop" and first.num_tokens == position + 1 and first.token_ids[-1] == other_eos
    assert "length" in {g.samples[0].finish_reason for g in greedy[1:]}

    params = SamplingParams(temperature=1.0, max_new_tokens=20, n=4, seed=1)
    gens = engine.generate(CONVERSATIONS, params)
    samples = [s for g in gens for s in g.samples] + [g.samples[0] for g in greedy]
    for s in samples:
        if s.finish_reason == "stop":
            assert s.token_ids[-1] in {EOS, other_eos} and not {EOS, other_eos} & set(s.token_ids[:-1])
        else:
            assert s.num_tokens == params.max_new_tokens and not {EOS, other_eos} & set(s.token_ids)
    prompts = [g.prompt_text for g in gens for _ in g.samples] + [g.prompt_text for g in greedy]
    forced = reference.logprobs(prompts, [s.token_ids for s in samples])
    assert all(worst_gap(s.token_logprobs, f) <= 1e-3 for s, f in zip(samples, forced))  # the end token's too
    engine.close()


def test_length_groups_trade_padding_steps_for_batch_size():
    # Equal lengths: one batch (up to max_rows).
    assert length_groups([50] * 6, 64, max_rows=16) == [list(range(6))]
    sizes = [len(g) for g in length_groups([50] * 6, 64, max_rows=4)]
    assert len(sizes) == 2 and sum(sizes) == 6 and max(sizes) <= 4
    # Two clusters far apart: the long prompts' extra tokens would cost 500 steps of the whole batch.
    groups = length_groups([40, 600, 42, 610, 45, 605], 64, max_rows=16)
    assert sorted(map(sorted, groups)) == [[0, 2, 4], [1, 3, 5]]
    # Every prompt exactly once.
    lengths = [17, 300, 5, 90, 91, 400, 12, 250]
    assert sorted(i for g in length_groups(lengths, 32, max_rows=3) for i in g) == list(range(len(lengths)))


def test_varied_prompt_lengths_in_one_call_match_separate_calls(ct2_engine):
    # Grouping must not change what a prompt gets (greedy: no randomness involved).
    long = [{"role": "user", "content": "Tell me everything about lists. " * 40}]
    conversations = CONVERSATIONS + [long]
    params = SamplingParams(temperature=0, max_new_tokens=6)
    together = ct2_engine.generate(conversations, params)
    assert ids_of(together) == [ids_of(ct2_engine.generate([c], params))[0] for c in conversations]


# ---------------------------------------------------------------------------- conversion cache


def test_one_conversion_for_two_engines(tiny_model_dir, tmp_path, count_conversions):
    first = CT2Engine(str(tiny_model_dir), cache_dir=tmp_path)
    second = make_engine("ct2", str(tiny_model_dir), cache_dir=tmp_path)
    assert isinstance(second, CT2Engine)
    assert len(count_conversions) == 1 and first.model_dir == second.model_dir
    assert [p.name for p in tmp_path.iterdir() if p.is_dir()] == [first.model_dir.name]  # no temporary left
    record = json.loads((first.model_dir / "colbench-source.json").read_text())
    assert record["quantization"] == "float32" and record["base"] == str(tiny_model_dir.resolve())

    int8 = CT2Engine(str(tiny_model_dir), cache_dir=tmp_path, compute_type="int8")
    assert len(count_conversions) == 2 and int8.model_dir != first.model_dir
    assert int8.model_ref == f"ct2-int8:hf:{tiny_model_dir.resolve()}"


def test_changed_source_files_convert_again(tiny_model_dir, tmp_path):
    source = resolve_model(str(tiny_model_dir))
    before = conversion_target(source, "float32", tmp_path)
    config = tiny_model_dir / "config.json"
    stat = config.stat()
    os.utime(config, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    try:
        assert conversion_target(source, "float32", tmp_path) != before
    finally:
        os.utime(config, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert conversion_target(source, "float32", tmp_path) == before


def test_killed_conversion_is_not_reused(tiny_model_dir, tmp_path, count_conversions):
    target = conversion_target(resolve_model(str(tiny_model_dir)), "float32", tmp_path)
    # What a conversion killed half-way leaves: a temporary folder with a plausible start.
    leftover = tmp_path / f".{target.name}.k1ll3d.tmp"
    leftover.mkdir(parents=True)
    (leftover / "config.json").write_text("{}")
    (leftover / "model.bin").write_bytes(b"\0" * 64)
    engine = CT2Engine(str(tiny_model_dir), cache_dir=tmp_path)
    assert len(count_conversions) == 1 and engine.model_dir == target
    assert not leftover.exists()  # cleaned up, under the conversion lock
    [gen] = engine.generate(CONVERSATIONS[:1], SamplingParams(temperature=0, max_new_tokens=3))
    assert gen.samples[0].num_tokens == 3


def test_failed_conversion_leaves_nothing(tiny_model_dir, tmp_path, monkeypatch):
    from ctranslate2.converters import TransformersConverter

    def half_then_fail(self, output_dir, *args, **kwargs):
        with open(os.path.join(output_dir, "model.bin"), "wb") as half:
            half.write(b"\0" * 64)
        raise RuntimeError("disk full\nmore detail")

    monkeypatch.setattr(TransformersConverter, "convert", half_then_fail)
    with pytest.raises(EngineError, match=r"^cannot convert .*: disk full$"):
        CT2Engine(str(tiny_model_dir), cache_dir=tmp_path)
    assert [p for p in tmp_path.iterdir() if p.is_dir()] == []
    monkeypatch.undo()
    assert CT2Engine(str(tiny_model_dir), cache_dir=tmp_path).model_dir.is_dir()


# ---------------------------------------------------------------------------- LoRA checkpoints


@pytest.fixture(scope="module")
def adapter_dir(tiny_model_dir, tmp_path_factory):
    """A peft LoRA adapter on the tiny model with non-zero weights, as training saves one."""
    from peft import LoraConfig, get_peft_model

    from colbench.model_refs import load_model

    torch.manual_seed(1)
    config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    peft_model = get_peft_model(load_model(str(tiny_model_dir), device="cpu"), config)
    path = tmp_path_factory.mktemp("adapter")
    peft_model.save_pretrained(path)
    return path


def test_adapter_checkpoint_converts_merged(tiny_model_dir, adapter_dir, ct2_engine, ct2_cache, count_conversions):
    lookup = {"9": (str(tiny_model_dir), str(adapter_dir), None)}.__getitem__
    engine = CT2Engine("ckpt:9", checkpoint_lookup=lookup, cache_dir=ct2_cache)
    assert engine.model_ref == "ckpt:9" and len(count_conversions) == 1
    greedy = SamplingParams(temperature=0, max_new_tokens=8)
    assert ids_of(engine.generate(CONVERSATIONS, greedy)) != ids_of(ct2_engine.generate(CONVERSATIONS, greedy))
    # The merged, converted weights give the log-probs of the unmerged adapter in transformers.
    reference = HFEngine("ckpt:9", device="cpu", checkpoint_lookup=lookup)
    gens = engine.generate(CONVERSATIONS, SamplingParams(temperature=1.0, max_new_tokens=10, n=2, seed=4))
    samples = [s for g in gens for s in g.samples]
    forced = reference.logprobs([g.prompt_text for g in gens for _ in g.samples], [s.token_ids for s in samples])
    assert all(worst_gap(s.token_logprobs, f) <= 1e-3 for s, f in zip(samples, forced))
    # Only the temporary merged folder's conversion: nothing else was left in the cache.
    assert not [p for p in ct2_cache.iterdir() if p.name.startswith(".") and p.is_dir()]


# ---------------------------------------------------------------------------- int8


@pytest.fixture(scope="module")
def unrelated_model_dir(tiny_model_dir, tmp_path_factory):
    """The tiny model's architecture and tokenizer with other random weights: what a garbage int8 model is as far
    from the float32 one as."""
    from transformers import AutoConfig, AutoTokenizer, LlamaForCausalLM

    torch.manual_seed(1)
    path = tmp_path_factory.mktemp("unrelated")
    LlamaForCausalLM(AutoConfig.from_pretrained(tiny_model_dir)).save_pretrained(path)
    AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(path)
    return path


def test_int8_is_close_but_not_the_float32_model(tiny_model_dir, ct2_cache, tiny_engine, unrelated_model_dir):
    from colbench.engines.ct2_cpu import ct2_backend

    engine = CT2Engine(str(tiny_model_dir), cache_dir=ct2_cache, compute_type="int8")
    gens = engine.generate(CONVERSATIONS, SamplingParams(temperature=1.0, max_new_tokens=12, n=2, seed=5))
    engine.close()
    samples = [s for g in gens for s in g.samples]
    prompts, ids = [g.prompt_text for g in gens for _ in g.samples], [s.token_ids for s in samples]
    forced = tiny_engine.logprobs(prompts, ids)
    unrelated = HFEngine(str(unrelated_model_dir), device="cpu").logprobs(prompts, ids)

    def mean_gap(ours, theirs):
        gaps = [abs(a - b) for x, y in zip(ours, theirs) for a, b in zip(x, y)]
        return sum(gaps) / len(gaps), max(gaps)

    int8_gap, int8_max = mean_gap([s.token_logprobs for s in samples], forced)
    unrelated_gap, _ = mean_gap(unrelated, forced)
    size = sum(-lp for f in forced for lp in f) / sum(map(len, forced))
    backend = ct2_backend()
    print(f"int8 ({backend.summary() if backend else 'backend unknown'}) vs float32 transformers: mean |gap|"
          f" {int8_gap:.3f} nats, max {int8_max:.3f}; another random model's gap {unrelated_gap:.3f}; mean -logprob"
          f" {size:.3f}")
    # Quantized: float32 CTranslate2 matches transformers within 1e-3 nats; int8 must not.
    assert int8_max > 1e-3
    # Still the same model: far closer to its float32 source than a model with other weights is. Wherever int8
    # runs, its gap is a small share of that (0.02 with exact 32-bit sums, ~0.2 where oneDNN without VNNI clips
    # its 16-bit sums), and a broken quantization (garbage weights or scales) is as far off as another model.
    assert int8_gap < unrelated_gap / 3
    if backend is not None and not backend.int8_coarse:
        # With exact 32-bit sums (MKL, or oneDNN with VNNI) only the rounding to int8 remains: ~0.27 nats on this
        # tiny model (large weights, so coarse per-row scales) against ~4.4 for the log-probs themselves, 0.06 of
        # them; the saturating path gives 0.3-0.35 of them, so a backend that claims exact sums and clips fails.
        assert int8_gap < 0.15 * size


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="CTranslate2's x86-64 wheels carry both MKL and oneDNN")
def test_the_backend_is_what_ctranslate2_says_and_follows_the_environment(monkeypatch):
    from colbench.engines.ct2_cpu import ct2_backend

    def backend_under(**env):
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        ct2_backend.cache_clear()
        try:
            return ct2_backend()
        finally:
            ct2_backend.cache_clear()

    mkl = backend_under(CT2_USE_MKL="1")
    assert (mkl.mkl, mkl.sgemm, mkl.gemm_s8, mkl.int8_vnni, mkl.int8_coarse) == (True, "MKL", "MKL", True, False)
    assert "int8 on MKL" in mkl.summary()
    capped = backend_under(CT2_USE_MKL="0", ONEDNN_MAX_CPU_ISA="AVX2")  # an AVX2-only CPU, as oneDNN sees it
    assert (capped.mkl, capped.gemm_s8, capped.int8_vnni, capped.int8_coarse) == (False, "DNNL", False, True)
    assert "int8 on oneDNN without VNNI" in capped.summary()


def test_int8_says_once_where_it_is_no_faster(tiny_model_dir, ct2_cache, monkeypatch, capfd):
    from colbench.engines import ct2 as ct2_module
    from colbench.engines.ct2_cpu import ct2_backend

    monkeypatch.setenv("CT2_USE_MKL", "0")  # what an AVX2-only AMD CPU runs, as the probe reports it
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    ct2_backend.cache_clear()
    ct2_module._say_when_int8_is_slow.cache_clear()
    try:
        capfd.readouterr()
        for _ in range(2):
            CT2Engine(str(tiny_model_dir), cache_dir=ct2_cache, compute_type="int8").close()
        CT2Engine(str(tiny_model_dir), cache_dir=ct2_cache).close()
        notes = [line for line in capfd.readouterr().err.splitlines() if line.startswith("note: int8")]
        if ct2_backend().cpu == "GenuineIntel":
            assert notes == []  # MKL's int8 kernels: nothing measured says it is slower there
        else:
            assert len(notes) == 1 and "no faster than float32 and coarser" in notes[0], notes
    finally:
        ct2_backend.cache_clear()
        ct2_module._say_when_int8_is_slow.cache_clear()


# ---------------------------------------------------------------------------- stopping


LONG = SamplingParams(temperature=1.0, max_new_tokens=1800, n=4, seed=11)


def test_stop_ends_a_long_generate_quickly(tiny_model_dir, ct2_cache):
    engine = CT2Engine(str(tiny_model_dir), cache_dir=ct2_cache)
    outcome = {}

    def run():
        try:
            outcome["result"] = engine.generate(CONVERSATIONS, LONG)
        except BaseException as exc:  # noqa: BLE001 - inspected below
            outcome["error"] = exc

    worker = threading.Thread(target=run)
    worker.start()
    time.sleep(0.5)
    assert worker.is_alive()  # still generating: ~3 x 4 x 1800 tokens take seconds
    stopped_at = time.perf_counter()
    engine.stop()
    worker.join(timeout=5)
    assert not worker.is_alive() and time.perf_counter() - stopped_at < 1.0
    assert isinstance(outcome.get("error"), GenerationStopped), outcome
    with pytest.raises(GenerationStopped):  # stopping is final
        engine.generate(CONVERSATIONS[:1], SamplingParams(max_new_tokens=2))
    engine.close()


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals go to the main thread")
def test_ctrl_c_in_the_generating_thread(tiny_model_dir, ct2_cache):
    engine = CT2Engine(str(tiny_model_dir), cache_dir=ct2_cache)
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    started = time.perf_counter()
    try:
        with pytest.raises(KeyboardInterrupt):
            engine.generate(CONVERSATIONS, LONG)
    finally:
        timer.cancel()
    assert time.perf_counter() - started < 1.5
    assert engine.stopped
    engine.close()


# ---------------------------------------------------------------------------- the default engine


def test_default_engine(tiny_model_dir, adapter_dir, tmp_path, monkeypatch):
    assert default_engine("smollm2", "cpu") == "ct2"
    assert default_engine(str(tiny_model_dir), "cpu") == "ct2"  # a Llama
    assert default_engine(str(adapter_dir), "cpu") == "ct2"  # an adapter on a Llama
    lookup = {"9": (str(tiny_model_dir), str(adapter_dir), None)}.__getitem__
    assert default_engine("ckpt:9", "cpu", checkpoint_lookup=lookup) == "ct2"
    assert default_engine("ckpt:9", "cpu") == "hf"  # cannot look: the transformers engine will say why
    assert default_engine(str(tiny_model_dir), "cuda") == "hf"
    assert default_engine("HuggingFaceTB/SmolLM2-135M-Instruct", "cpu") == "hf"  # architecture unknown offline
    other = tmp_path / "gpt2"
    other.mkdir()
    (other / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    assert default_engine(str(other), "cpu") == "hf"

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert default_engine(str(tiny_model_dir), "auto") == "ct2"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert default_engine(str(tiny_model_dir), "auto") == "hf"


def test_default_engine_without_ctranslate2(monkeypatch, tiny_model_dir):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ctranslate2" else real(name, *a))
    assert default_engine(str(tiny_model_dir), "cpu") == "hf"


def test_unknown_compute_type_is_one_line(tiny_model_dir, tmp_path):
    with pytest.raises(EngineError) as err:
        CT2Engine(str(tiny_model_dir), cache_dir=tmp_path, compute_type="float8")
    assert "\n" not in str(err.value) and "float8" in str(err.value)
