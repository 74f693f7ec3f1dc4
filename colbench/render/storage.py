"""Content-addressed screenshot files.

A screenshot is stored once, named by the SHA-256 of its PNG bytes, under a two-letter
fan-out folder (``<folder>/ab/abcdef....png``) so no folder grows past a few thousand
files. Identical renders (the same page twice, every black image) share one file; the
store's tables keep only the hash and the path.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path


class ScreenshotStore:
    def __init__(self, folder: str | os.PathLike):
        self.folder = Path(folder)

    def path_for(self, sha256: str) -> Path:
        return self.folder / sha256[:2] / f"{sha256}.png"

    def put(self, png: bytes) -> tuple[str, Path]:
        """Save ``png`` (idempotent); returns (sha256 hex, path)."""
        digest = hashlib.sha256(png).hexdigest()
        path = self.path_for(digest)
        if path.is_file() and path.stat().st_size == len(png):
            return digest, path
        path.parent.mkdir(parents=True, exist_ok=True)
        # Write then rename: a reader (or a second writer) never sees a half-written file.
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".png")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(png)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return digest, path

    def get(self, sha256: str) -> bytes:
        return self.path_for(sha256).read_bytes()

    def __contains__(self, sha256: str) -> bool:
        return self.path_for(sha256).is_file()
