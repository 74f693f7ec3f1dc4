"""Checkpoint folders and rows: where a trained model goes, and how it comes back.

A checkpoint is a folder, by default ``<database folder>/checkpoints/<kind>-<run id>``:
a peft adapter (``adapter_config.json`` and weights) or, after ``--full`` training,
full weights with the tokenizer. Its ``Checkpoint`` row names the run, the base model
reference the run started from (so ``ckpt:<id>`` resolves), the step and metrics.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

from colbench.models import ModelNotFound, ModelSource, resolve_model
from colbench.store.models import Checkpoint, TrainingRun, utcnow


def normalized_model_ref(ref: str) -> str:
    """Local folders as absolute paths, so a run's base model resolves from anywhere."""
    name = ref[3:] if ref.startswith("hf:") else ref
    path = Path(name).expanduser()
    return str(path.resolve()) if path.is_dir() else ref


def checkpoint_folder(db, kind: str, run_id: int, out: str | None = None) -> Path:
    if out:
        return Path(out).expanduser().resolve()
    return db.folder / "checkpoints" / f"{kind}-{run_id}"


def save_model(model, tokenizer, folder: Path) -> tuple[bool, str | None]:
    """Write an adapter (peft model) or full weights and tokenizer. Returns (adapter, sha256)."""
    from colbench.training.modeling import is_peft

    folder.mkdir(parents=True, exist_ok=True)
    model = getattr(model, "module", model)
    model = getattr(model, "lm", model)
    model = getattr(model, "module", model)
    adapter = is_peft(model)
    model.save_pretrained(folder)
    if not adapter:
        tokenizer.save_pretrained(folder)
    weights = sorted(folder.glob("*.safetensors"))
    return adapter, (_sha256(weights[0]) if len(weights) == 1 else None)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def parse_checkpoint_id(ref) -> int:
    """``7``, ``"7"`` or ``"ckpt:7"`` → 7."""
    text = str(ref).strip()
    if text.startswith("ckpt:"):
        text = text[5:]
    try:
        return int(text)
    except ValueError:
        raise ModelNotFound(f"not a checkpoint reference: {ref!r} (expected ckpt:<id>)") from None


def get_checkpoint(db, ref) -> tuple[Checkpoint, TrainingRun]:
    checkpoint_id = parse_checkpoint_id(ref)
    with db.read() as session:
        row = session.get(Checkpoint, checkpoint_id)
        run = session.get(TrainingRun, row.run_id) if row else None
    if row is None or run is None:
        raise ModelNotFound(f"checkpoint ckpt:{checkpoint_id} not found")
    if not Path(row.path).is_dir():
        raise ModelNotFound(f"checkpoint ckpt:{checkpoint_id}: folder {row.path} is missing")
    return row, run


def resolve_base(db, ref: str) -> ModelSource:
    """A base model reference (smollm2, a path, a hub id, ckpt:<id>) → what to load."""
    from colbench.runner import checkpoint_lookup

    return resolve_model(ref, checkpoint_lookup(db))


def fail_run(db, run_id: int | None, exc: BaseException) -> None:
    """Mark a training run failed with the first line of what stopped it."""
    if run_id is None:  # a non-main process under accelerate writes nothing
        return
    lines = str(exc).strip().splitlines()
    reason = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    try:
        with db.write() as session:
            run = session.get(TrainingRun, run_id)
            if run is not None:
                run.status, run.error, run.finished_at = "failed", reason, utcnow()
                session.add(run)
    except Exception:  # the store is gone too; the original error matters more
        pass
