"""Pytest fixtures for models: the real SmolLM2 tokenizer, a tiny random model that uses
it, and (opt-in, COLBENCH_SLOW=1) the real embedded 135M model.

Register with ``pytest_plugins = ["plugins.models"]`` in tests/conftest.py.
"""
from __future__ import annotations

import os

import pytest

SLOW = os.environ.get("COLBENCH_SLOW") == "1"

_SESSION_CACHE: list[str] = []


def pytest_configure(config):
    """The session's own colbench cache, so the tests' CTranslate2 conversions (one per
    temporary checkpoint) never pile up in the user's; the embedded model's conversions
    (``models/``, ~0.5 GB, ~40 s to make) are shared with the user's cache through a link."""
    import tempfile
    from pathlib import Path

    from colbench.model_cache import cache_dir

    shared = cache_dir() / "models"
    shared.mkdir(parents=True, exist_ok=True)
    session = Path(tempfile.mkdtemp(prefix="colbench-test-cache-"))
    (session / "models").symlink_to(shared, target_is_directory=True)
    os.environ["COLBENCH_CACHE"] = str(session)  # subprocesses (CLI tests) inherit it
    _SESSION_CACHE.append(str(session))


def pytest_unconfigure(config):
    import shutil

    for folder in _SESSION_CACHE:
        shutil.rmtree(folder, ignore_errors=True)

# Sized so the 49,152-wide output layer dominates and a forward pass takes milliseconds.
TINY_CONFIG = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=2048,
    tie_word_embeddings=True,
    # Larger than the usual 0.02 so the random model has peaked, varied next-token
    # distributions instead of near-uniform ones.
    initializer_range=0.5,
)


@pytest.fixture(scope="session")
def smol_tokenizer_dir():
    """The real SmolLM2 tokenizer (with its chat template) as a directory.

    Converted from the embedded GGUF once (~10 s) and kept in the colbench cache dir, so
    later sessions reuse it."""
    from colbench.model_cache import embedded_tokenizer_dir
    from colbench.model_refs import ModelNotFound

    try:
        return embedded_tokenizer_dir()
    except ModelNotFound as err:
        pytest.skip(f"no SmolLM2 tokenizer: {err}")


def save_tiny_llama(tokenizer_dir, folder, **shape):
    """A random-initialised LlamaForCausalLM (fixed seed) of TINY_CONFIG's shape with ``shape``'s changes, saved in
    ``folder`` with the real tokenizer."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        **TINY_CONFIG | shape,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_model_dir(smol_tokenizer_dir, tmp_path_factory):
    """A random-initialised LlamaForCausalLM (~3M parameters, fixed seed) saved with the
    real tokenizer, so tests load it through the ordinary local-directory path."""
    return save_tiny_llama(smol_tokenizer_dir, tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="session")
def servable_tiny_dir(smol_tokenizer_dir, tmp_path_factory):
    """The tiny model with heads of 64 (vLLM's CPU attention takes no heads of 16), as a full fine-tune's folder."""
    return save_tiny_llama(smol_tokenizer_dir, tmp_path_factory.mktemp("servable-tiny"), hidden_size=128,
                           intermediate_size=256, num_attention_heads=2, num_key_value_heads=1)


@pytest.fixture(scope="session")
def tokenizer(tiny_model_dir):
    """The tiny model's tokenizer (the real SmolLM2 one), loaded as colbench loads it."""
    from colbench.model_refs import load_tokenizer

    return load_tokenizer(str(tiny_model_dir))


@pytest.fixture(scope="session")
def tiny_engine(tiny_model_dir):
    """An HFEngine on the tiny model (CPU, float32), shared by the session."""
    from colbench.engines.hf import HFEngine

    engine = HFEngine(str(tiny_model_dir), device="cpu", max_batch_size=8)
    yield engine
    engine.close()


@pytest.fixture(scope="session")
def embedded_model_dir():
    """The real SmolLM2-135M-Instruct as a transformers directory (~40 s the first time)."""
    if not SLOW:
        pytest.skip("loads the real 135M model: set COLBENCH_SLOW=1")
    from colbench.model_cache import embedded_model_dir
    from colbench.model_refs import ModelNotFound

    try:
        return embedded_model_dir()
    except ModelNotFound as err:
        pytest.skip(str(err))
