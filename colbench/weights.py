"""Checkpoint weights on disk: their digest, and the check that a folder still holds what its
run wrote (every `ckpt:<id>` load makes it)."""
from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

from colbench.model_refs import ModelNotFound


def weights_digest(folder: Path) -> str:
    """sha256 of a checkpoint's weights: of its one .safetensors file, or of the names and
    hashes of several."""
    files = sorted(Path(folder).glob("*.safetensors"))
    if not files:
        raise ModelNotFound(f"{folder} holds no .safetensors weights")
    if len(files) == 1:
        return _cached_sha256(files[0])
    return hashlib.sha256("".join(f"{f.name}:{_cached_sha256(f)}\n" for f in files).encode()).hexdigest()


def verify_checkpoint(row) -> None:
    """The folder must hold the weights its run wrote: a clear error when they differ."""
    if not Path(row.path).is_dir():
        raise ModelNotFound(f"checkpoint ckpt:{row.id}: folder {row.path} is missing")
    if row.sha256 and weights_digest(Path(row.path)) != row.sha256:
        raise ModelNotFound(
            f"checkpoint ckpt:{row.id}: the weights in {row.path} are not the ones its run wrote "
            "(sha256 mismatch: the folder was overwritten or changed)"
        )


def _cached_sha256(path: Path) -> str:
    stat = path.stat()
    return _sha256_of(str(path.resolve()), stat.st_size, stat.st_mtime_ns)


@lru_cache(maxsize=64)
def _sha256_of(path: str, size: int, mtime_ns: int) -> str:  # size and mtime: a changed file is hashed again
    return _sha256(Path(path))


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
