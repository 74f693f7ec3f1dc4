"""Generation with CTranslate2: the transformers engine's models, converted once, several times faster on CPU.

The model reference resolves exactly as for the transformers engine (``smollm2``, a local
folder, ``ckpt:<id>``); a checkpoint that is a LoRA adapter is merged into its base first.
The result is converted to CTranslate2's format once, into a cache folder keyed by the
source's files and the quantization, and reused by every later engine.

What the engine records matches the transformers engine's: the prompt text the tokenizer's
chat template renders, the sampled token ids (the end-of-turn token included), and each
token's log-prob under the model's raw distribution (temperature 1, no top-k/top-p). In
CTranslate2 4.x the step callback's ``log_prob`` is the log-softmax of the raw logits: the
sampler divides by the temperature only for drawing the token, then gathers the unscaled
log-prob, so it is the temperature-1 value at any sampling temperature.

int8 (and other quantized compute types) change the model itself: its samples and
log-probs are those of the quantized model, not of the float32 policy. The model_ref says
so ("ct2-int8:smollm2"), so the store keeps them apart; a float32 engine's model_ref is the
transformers engine's ("smollm2", "ckpt:3"), as it samples the same policy. How fast and how
faithful int8 is depends on the CPU's GEMM backend (ct2_cpu): the engine reports it in
``arithmetic()``, and says once when int8 here is both slower and coarser than float32.
"""
from __future__ import annotations

import functools
import hashlib
import json
import math
import shutil
import sys
import threading
import time
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path

from colbench.engines.base import EngineError, Generation, Sample, SamplingParams, TokenizerEngine, token_ids
from colbench.engines.ct2_cpu import ct2_backend
from colbench.model_cache import cache_dir, convert_once
from colbench.model_refs import ModelSource, load_tokenizer, resolve_model
from colbench.openmp import spin_briefly

# How long generate() sleeps between checks of a running batch: the bound it adds to Ctrl-C.
POLL_S = 0.02

# A decoding step costs about as much as this many extra rows (weights are read once per
# step, whatever the batch size): measured ~3.5 for SmolLM2-135M on 2 CPU cores.
STEP_OVERHEAD_ROWS = 4


def _import_ctranslate2():
    """ctranslate2, its OpenMP threads told to spin briefly (colbench.openmp: set as colbench loads; again here for
    whoever imported this module some other way)."""
    spin_briefly()
    import ctranslate2

    return ctranslate2


class GenerationStopped(EngineError):
    """generate() was cut short by stop() (or Ctrl-C); nothing it sampled is returned."""


# ---------------------------------------------------------------------------- conversion


def ct2_cache_root() -> Path:
    """Converted models live under $COLBENCH_CACHE/ct2 (default ~/.cache/colbench/ct2)."""
    return cache_dir() / "ct2"


def conversion_key(source: ModelSource, quantization: str) -> str:
    """A content key of what the conversion reads: every file of the base and adapter folders
    (path, size, modification time), the quantization and the CTranslate2 version (whose
    format may change). A hub id has no local files: its name stands for its content."""
    ctranslate2 = _import_ctranslate2()

    digest = hashlib.sha256()
    digest.update(json.dumps([quantization, ctranslate2.__version__]).encode())
    for folder in (source.base, source.adapter):
        if folder is None:
            digest.update(b"\0none")
            continue
        path = Path(folder)
        if not path.is_dir():
            digest.update(f"\0hub:{folder}".encode())
            continue
        digest.update(f"\0dir:{path.resolve()}".encode())
        for file in sorted(p for p in path.rglob("*") if p.is_file()):
            stat = file.stat()
            digest.update(f"\0{file.relative_to(path)}\0{stat.st_size}\0{stat.st_mtime_ns}".encode())
    return digest.hexdigest()[:20]


def conversion_target(source: ModelSource, quantization: str, root: Path | str | None = None) -> Path:
    """The folder the converted model lives in (whether or not it exists yet)."""
    name = "".join(c if c.isalnum() or c in "-_." else "-" for c in Path(source.ref).name or source.ref)
    root = Path(root).expanduser() if root else ct2_cache_root()
    return root / f"{name.strip('-.') or 'model'}-{quantization}-{conversion_key(source, quantization)}"


def convert_model(source: ModelSource, quantization: str = "float32", root: Path | str | None = None) -> Path:
    """The source converted to CTranslate2 (``quantization`` of the weights), converting only
    the first time. Atomic: the converter writes into a temporary sibling folder renamed into
    place when complete (model_cache.convert_once), so a killed conversion is never reused. Said on stderr only when
    it lands in the shared cache: a caller's own ``root`` (an online run's per-step weights) reports its own time."""
    target = conversion_target(source, quantization, root)

    def build(tmp: Path) -> None:
        # We hold convert_once's lock on this target: other temporary folders for it are
        # leftovers of killed conversions (up to ~0.5 GB each), never to be finished.
        for stale in target.parent.glob(f".{target.name}.*.tmp"):
            if stale != tmp:
                shutil.rmtree(stale, ignore_errors=True)
        from ctranslate2.converters import TransformersConverter

        with _plain_model_folder(source) as folder:
            TransformersConverter(folder).convert(str(tmp), quantization=quantization, force=True)
        record = {"ref": source.ref, "base": source.base, "adapter": source.adapter, "quantization": quantization}
        (tmp / "colbench-source.json").write_text(json.dumps(record, indent=1) + "\n")

    try:
        return convert_once(target, build, announce=root is None)
    except (OSError, ValueError, RuntimeError, KeyError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise EngineError(f"cannot convert {source.ref!r} for CTranslate2: {first}") from err


@contextmanager
def _plain_model_folder(source: ModelSource):
    """A transformers folder (or hub id) the converter can read: the base itself, or for an
    adapter, the adapter merged into its base in a temporary folder."""
    if not source.adapter:
        yield source.base
        return
    import tempfile

    from colbench.model_refs import load_model

    with tempfile.TemporaryDirectory(prefix="colbench-merge-") as folder:
        model = load_model(source, device="cpu", dtype="float32").merge_and_unload()
        model.save_pretrained(folder)
        load_tokenizer(source).save_pretrained(folder)  # the converter reads the vocabulary here
        del model
        yield folder


# ---------------------------------------------------------------------------- batching


def length_groups(lengths: list[int], new_tokens: int, max_rows: int, samples: int = 1) -> list[list[int]]:
    """Split prompts (their indices) into the batches that decode fastest.

    CTranslate2 forwards a batch's prompts in one pass only up to the shortest of them; the
    rest of each longer prompt is fed one token per decoding step. A batch thus takes about
    (longest - shortest + new_tokens) steps, each costing about (STEP_OVERHEAD_ROWS + rows).
    With the prompts sorted by length, the cheapest split into consecutive runs of at most
    ``max_rows`` prompts is found by dynamic programming.
    """
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    size = [lengths[i] for i in order]
    best = [0.0] + [math.inf] * len(order)  # best[k]: cheapest cost of the first k prompts
    cut = [0] * (len(order) + 1)
    for end in range(1, len(order) + 1):
        for start in range(max(0, end - max(1, max_rows)), end):
            steps = size[end - 1] - size[start] + new_tokens
            cost = best[start] + steps * (STEP_OVERHEAD_ROWS + (end - start) * samples)
            if cost < best[end]:
                best[end], cut[end] = cost, start
    groups, end = [], len(order)
    while end > 0:
        groups.append(order[cut[end] : end])
        end = cut[end]
    return groups[::-1]


# ---------------------------------------------------------------------------- the engine


class CT2Engine(TokenizerEngine):
    """A causal LM run by CTranslate2 (CPU by default), converted from a model reference.

    ``compute_type`` is both the conversion's quantization and the type computed in:
    "float32" reproduces the transformers model's distribution; "int8" is a quantized,
    different model, faster only where the CPU sums int8 products in 32 bits
    (docs/rollouts-and-engines.md, "int8 by CPU").
    """

    def __init__(
        self,
        model: ModelSource | str,
        *,
        device: str = "cpu",
        compute_type: str = "float32",
        checkpoint_lookup=None,
        cache_dir: Path | str | None = None,
        max_batch_size: int = 16,
        intra_threads: int = 0,
        model_ref: str | None = None,
    ):
        try:
            self._ct2 = _import_ctranslate2()
        except ImportError as err:
            raise EngineError("CTranslate2 is not installed: pip install ctranslate2") from err
        self.source = model if isinstance(model, ModelSource) else resolve_model(model, checkpoint_lookup)
        self.compute_type = compute_type
        self.kind = "ct2" if compute_type == "float32" else f"ct2-{compute_type}"
        self.device = device
        self.intra_threads = intra_threads
        self.max_batch_size = max(1, int(max_batch_size))  # rows: conversations times samples
        # float32 samples the very distribution the transformers engine does (log-probs within
        # 1e-3 nats), so it is the same policy; other compute types are other models, whose
        # trajectories must not pass for the policy's.
        quantized = "" if compute_type == "float32" else f"ct2-{compute_type}:"
        self.model_ref = model_ref or f"{quantized}{self.source.ref}"
        self.model_dir = convert_model(self.source, compute_type, cache_dir)
        self.tokenizer = load_tokenizer(self.source)
        self._check_vocabulary()
        self.eos_ids = _eos_ids(self.source, self.tokenizer)
        if not self.eos_ids:
            raise EngineError(f"model {self.model_ref} has no EOS token: generation could not stop")
        self._stopping = threading.Event()
        self._lock = threading.Lock()  # one generate at a time: a seeded call replaces the generator
        self._generator = self._load()
        if compute_type == "int8" and device == "cpu":
            _say_when_int8_is_slow()

    def arithmetic(self) -> dict:
        """The compute type and, on a CPU, CTranslate2's GEMM backends and ISA (ct2_cpu)."""
        found = {"compute_type": self.compute_type, "device": self.device}
        backend = ct2_backend() if self.device == "cpu" else None
        if backend is not None:
            found.update(ct2_cpu=backend.summary(), **backend.as_dict())
        return found

    def _load(self):
        try:
            return self._ct2.Generator(
                str(self.model_dir), device=self.device, compute_type=self.compute_type,
                intra_threads=self.intra_threads
            )
        except (RuntimeError, ValueError) as err:
            raise EngineError(
                f"cannot load {self.model_ref} in CTranslate2 ({self.device}, {self.compute_type}): {err}"
            ) from err

    def _check_vocabulary(self) -> None:
        # Prompts go in as token strings and come back as ids of CTranslate2's vocabulary:
        # both must number the tokens as the tokenizer does.
        vocabulary = json.loads((self.model_dir / "vocabulary.json").read_text(encoding="utf-8"))
        width = min(len(vocabulary), len(self.tokenizer))
        if vocabulary[:width] != self.tokenizer.convert_ids_to_tokens(list(range(width))):
            raise EngineError(f"the CTranslate2 vocabulary of {self.model_ref} does not match its tokenizer")

    # ------------------------------------------------------------------ sampling (prompts: TokenizerEngine)

    def generate_from_prompts(self, prompts: list[str], params: SamplingParams) -> list[Generation]:
        """Continue prompts that are already templated (e.g. a stored turn's exact prompt)."""
        prompt_ids = [self.encode(p) for p in prompts]
        if any(not ids for ids in prompt_ids):
            raise EngineError("an empty prompt gives the first token no context")
        samples: list[list[Sample]] = [[] for _ in prompts]
        latency = [0.0] * len(prompts)
        with self._lock:
            if self._stopping.is_set():
                raise GenerationStopped(f"{self.model_ref} was stopped")
            if params.max_new_tokens <= 0:  # CTranslate2 refuses max_length 0
                samples = [[Sample(text="", finish_reason="length") for _ in range(params.n)] for _ in prompts]
            else:
                self._reseed(params.seed)
                rows_per_prompt = max(1, params.n)
                groups = length_groups(
                    [len(ids) for ids in prompt_ids], params.max_new_tokens, self.max_batch_size // rows_per_prompt,
                    rows_per_prompt,
                )
                for group in groups:
                    t0 = time.perf_counter()
                    drawn = self._sample_group([prompt_ids[c] for c in group], params)
                    elapsed = time.perf_counter() - t0
                    for c, found in zip(group, drawn):
                        samples[c], latency[c] = found, latency[c] + elapsed
        return [
            Generation(prompt_text=prompts[c], prompt_tokens=len(prompt_ids[c]), samples=samples[c],
                       latency_s=latency[c])
            for c in range(len(prompts))
        ]

    def _reseed(self, seed: int | None) -> None:
        """Make this call's draws depend on ``seed`` alone.

        CTranslate2 seeds a worker thread's random generator once, from the global seed, when
        the thread first samples; set_random_seed does not touch a generator already made.
        So a seeded call gets a fresh Generator (new worker thread): ~0.2 s for the float32
        135M model, ~0.07 s in int8. (The seed is process-wide: two engines reseeding at the
        same moment in one process could swap seeds.)
        """
        if seed is None:
            return
        self._ct2.set_random_seed(int(seed) % 2**32)
        # Drop the old generator first: two live ones would compete for the OpenMP threads.
        self._generator = None
        self._generator = self._load()

    def _sample_group(self, prompts: list[list[int]], params: SamplingParams) -> list[list[Sample]]:
        greedy = params.temperature <= 0
        # Greedy decoding gives n identical samples (as in the transformers engine), and
        # CTranslate2 refuses num_hypotheses > 1 without sampling: decode once and copy.
        hypotheses = 1 if greedy else max(1, params.n)
        steps: dict[tuple[int, int], tuple[list[int], list[float]]] = defaultdict(lambda: ([], []))
        failure: list[BaseException] = []

        def on_step(step) -> bool:
            # Runs in CTranslate2's worker thread for every sampled token; True ends that row.
            try:
                ids, logprobs = steps[(step.batch_id, step.hypothesis_id)]
                ids.append(step.token_id)
                logprobs.append(step.log_prob)
            except BaseException as exc:  # noqa: BLE001 - re-raised in the calling thread
                failure.append(exc)
                return True
            return self._stopping.is_set()

        try:
            pending = self._generator.generate_batch(
                [self.tokenizer.convert_ids_to_tokens(ids) for ids in prompts],
                asynchronous=True,  # so this thread can wait in Python and see Ctrl-C
                num_hypotheses=hypotheses,
                max_length=params.max_new_tokens,  # new tokens only, as the prompt is not in the result
                include_prompt_in_result=False,  # forward the prompt at once instead of token by token
                sampling_topk=1 if greedy else 0,  # 0: the full distribution
                sampling_temperature=1.0 if greedy else params.temperature,
                return_scores=True,  # fills step.log_prob
                end_token=sorted(self.eos_ids),
                return_end_token=True,
                callback=on_step,
            )
            self._wait(pending)
        except (RuntimeError, ValueError) as err:
            raise EngineError(f"{self.model_ref}: CTranslate2 generation failed: {err}") from err
        if failure:
            raise failure[0]
        if self._stopping.is_set():
            raise GenerationStopped(f"{self.model_ref} was stopped during generation")

        drawn = []
        for row in range(len(prompts)):
            row_samples = [self._sample(*steps[(row, h)]) for h in range(hypotheses)]
            drawn.append(row_samples * params.n if greedy else row_samples)
        return drawn

    def _wait(self, pending) -> None:
        try:
            while not all(result.done() for result in pending):
                time.sleep(POLL_S)
        except BaseException:  # Ctrl-C in this thread: end the batch before leaving it
            self._stopping.set()
            for result in pending:
                try:
                    result.result()
                except Exception:  # noqa: BLE001 - already leaving with the first exception
                    pass
            raise
        for result in pending:
            result.result()  # raises what the generation raised

    def _sample(self, ids: list[int], logprobs: list[float]) -> Sample:
        stopped = bool(ids) and ids[-1] in self.eos_ids
        return Sample(
            text=self.tokenizer.decode(ids, skip_special_tokens=True),
            token_ids=list(ids),
            token_logprobs=[float(lp) for lp in logprobs],
            finish_reason="stop" if stopped else "length",
        )

    # ------------------------------------------------------------------ stopping

    def stop(self) -> None:
        """End a running generate promptly (within a decoding step, plus POLL_S); it raises
        GenerationStopped. Safe from any thread. Final: later calls raise at once too."""
        self._stopping.set()

    @property
    def stopped(self) -> bool:
        return self._stopping.is_set()

    def close(self) -> None:
        self.stop()
        with self._lock:  # after any generate still finishing
            self._generator = None


@functools.cache  # once per process
def _say_when_int8_is_slow() -> None:
    """int8 has been measured no faster than float32 on every non-Intel CPU here (docs/rollouts-and-engines.md,
    "int8 by CPU"), and coarser where oneDNN lacks VNNI: say so once, in one line."""
    backend = ct2_backend()
    if backend is None or backend.cpu == "GenuineIntel":
        return
    coarse = " and coarser (its 16-bit sums clip)" if backend.int8_coarse else ""
    print(f"note: int8 here ({backend.summary()}) is no faster than float32{coarse}, as measured on such CPUs; float32"
          " is the policy itself (docs/rollouts-and-engines.md, 'int8 by CPU')", file=sys.stderr, flush=True)


def _eos_ids(source: ModelSource, tokenizer) -> set[int]:
    """The ids that end a turn, as the transformers engine takes them: the generation
    config's EOS id(s) (the model config's when there is no generation config) and the
    tokenizer's EOS."""
    from transformers import AutoConfig, GenerationConfig

    try:
        found = GenerationConfig.from_pretrained(source.base).eos_token_id
    except (OSError, ValueError):
        try:
            found = GenerationConfig.from_model_config(AutoConfig.from_pretrained(source.base)).eos_token_id
        except (OSError, ValueError):
            found = None
    return token_ids(found, tokenizer.eos_token_id)
