"""The benchmarks' tiny random Llama with SmolLM2's real tokenizer, saved to a fresh folder."""
from __future__ import annotations

import tempfile

import torch


def tiny_model_folder(prefix: str = "bench-tiny-") -> str:
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from colbench.model_cache import embedded_tokenizer_dir

    tokenizer = AutoTokenizer.from_pretrained(embedded_tokenizer_dir())
    config = LlamaConfig(
        vocab_size=len(tokenizer), bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096, tie_word_embeddings=True,
        initializer_range=0.5,
    )
    torch.manual_seed(0)
    folder = tempfile.mkdtemp(prefix=prefix)
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
