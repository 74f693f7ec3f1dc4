"""JSON lines, as every task, trajectory and study file here is written: one JSON object per line,
blank lines skipped, and a FormatError that names the file and line of anything else."""
from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path

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


def replace_rows(path: Path, is_old, new: list[dict]) -> None:
    """Write ``new`` where the rows ``is_old`` picks stood (at the end when none did), so that
    rerunning a finished stage leaves the committed file as it was."""
    rows = read_jsonl(path)
    at = next((i for i, row in enumerate(rows) if is_old(row)), len(rows))
    kept = [row for row in rows[at:] if not is_old(row)]
    write_jsonl(path, rows[:at] + new + kept)


def read_jsonl(path: Path) -> list[dict]:
    """A JSON-lines file's records (a study's files); a file not written yet holds none."""
    if not path.exists():
        return []
    with path.open("rb") as lines:
        return [record for _, record in records(lines, path)]


def write_jsonl(path: Path, rows: list[dict]) -> None:
    """The file whole, written under a temporary name and moved into place: a reader never sees half of it."""
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text("".join(json.dumps(row, sort_keys=True) + "\n" for row in rows), encoding="utf-8")
    temporary.replace(path)
