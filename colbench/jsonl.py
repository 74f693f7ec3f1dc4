"""JSON lines, as every task and trajectory file here is written: one JSON object per line,
blank lines skipped, and a FormatError that names the file and line of anything else."""
from __future__ import annotations

import json
from collections.abc import Iterable, Iterator

from colbench.errors import FormatError


def parse_record(line: str, where: str) -> dict:
    """One line's record; ``where`` (file:line) heads the error."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise FormatError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(record, dict):
        raise FormatError(f"{where}: expected a JSON object, got {type(record).__name__}")
    return record


def records(lines: Iterable[bytes], name: object) -> Iterator[tuple[int, dict]]:
    """(line number, record) for every non-blank line of an open binary file called ``name``.
    Decoded line by line, so that a byte that is not UTF-8 names its line."""
    for number, raw in enumerate(lines, start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FormatError(
                f"{name}:{number}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at column {exc.start + 1})"
            ) from None
        if line.strip():
            yield number, parse_record(line, f"{name}:{number}")
