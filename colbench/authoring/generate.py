"""Generate tasks from web text with an LLM: `colbench tasks generate`.

The recipe of the paper, with our own prompt (prompts.py): each source passage goes to
an LLM that writes one personalised task as JSON (a request ending with the signature
sentence, a reference, 10 test calls, and a naive solution written from the request
alone). Each candidate is parsed leniently (JSON inside code fences or prose, tests as
a list or an object, code inside fences) and then held to every rule of
`validate_tasks`, in the sandbox, against the tasks already stored; only candidates
that pass are kept.

Kept tasks are stored at the end, all in one transaction, with
`source="generated:<model>"` and the passage's file and index in `extra`. If the
endpoint fails midway, nothing is stored.

Sources: a `.jsonl` file gives one passage per record (its "text" field); any other
file is plain text, split at blank lines into paragraphs, which are joined until a
passage has at least MIN_PASSAGE_CHARS characters (a passage is cut at
MAX_PASSAGE_CHARS).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from colbench.progress import Progress
from colbench.errors import FormatError
from colbench.families import DEFAULT_FAMILY, family as family_named
from colbench.families.records import task_from_record
from colbench.official import read_jsonl, read_text
from colbench.tasks.rows import spec_of, task_row
from colbench.protocol import strip_code_fences
from colbench.tasks.spec import TaskSpec
from colbench.authoring.validate import validate_tasks

MIN_PASSAGE_CHARS = 400
MAX_PASSAGE_CHARS = 4000
TESTS_PER_TASK = 10

UNPARSEABLE = "unparseable output"
CUT_OFF = "cut off (max tokens)"


@dataclass
class Passage:
    file: str
    index: int  # 0-based, within its file
    text: str
    line: int | None = None  # JSONL sources: the record's line

    @property
    def where(self) -> str:
        return f"{Path(self.file).name}#{self.index}"


def read_passages(paths: Sequence[Path]) -> list[Passage]:
    passages: list[Passage] = []
    for path in paths:
        path = Path(path)
        if path.suffix.lower() == ".jsonl":
            passages += _jsonl_passages(path)
        else:
            passages += [Passage(str(path), i, chunk) for i, chunk in enumerate(split_passages(read_text(path)))]
    return passages


def _jsonl_passages(path: Path) -> list[Passage]:
    found = []
    for number, record in read_jsonl(path):
        body = record.get("text")
        if not isinstance(body, str):
            raise FormatError(f"{path}:{number}: needs a string field 'text'")
        if body.strip():
            found.append(Passage(str(path), len(found), body.strip()[:MAX_PASSAGE_CHARS], number))
    return found


def split_passages(text: str) -> list[str]:
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", text) if p.strip()]
    passages: list[str] = []
    current = ""
    for paragraph in paragraphs:
        current = f"{current}\n\n{paragraph}" if current else paragraph
        if len(current) >= MIN_PASSAGE_CHARS:
            passages.append(current[:MAX_PASSAGE_CHARS])
            current = ""
    if current:
        if passages and len(current) < MIN_PASSAGE_CHARS // 2:
            passages[-1] = (passages[-1] + "\n\n" + current)[:MAX_PASSAGE_CHARS]
        else:
            passages.append(current)
    return passages


# ---------------------------------------------------------------- parsing a candidate


class CandidateError(ValueError):
    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


_FENCED = re.compile(r"```[a-zA-Z0-9_+-]*[ \t]*\n(.*?)```", re.DOTALL)
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")
_ALIASES = {
    "problem_description": ("problem_description", "description", "problem", "request"),
    "ground_truth": ("ground_truth", "reference", "reference_solution", "reference_implementation", "solution"),
    "test_cases": ("test_cases", "tests", "test_calls"),
    "naive_solution": ("naive_solution", "naive", "naive_implementation"),
}


def _json_objects(text: str):
    """Every JSON object found in the text: fenced blocks first, then anywhere."""
    decoder = json.JSONDecoder()
    chunks = [block for block in _FENCED.findall(text)] + [text]
    for chunk in chunks:
        for candidate in (chunk, _TRAILING_COMMA.sub(r"\1", chunk)):
            start = candidate.find("{")
            while start >= 0:
                try:
                    value, _ = decoder.raw_decode(candidate, start)
                except json.JSONDecodeError:
                    start = candidate.find("{", start + 1)
                    continue
                if isinstance(value, dict):
                    yield value
                start = candidate.find("{", start + 1)


def _code(value: Any) -> Any:
    if isinstance(value, str) and "```" in value:
        return strip_code_fences(value) + "\n"
    return value


def parse_candidate(text: str) -> dict[str, Any]:
    """The official record in an LLM reply. CandidateError(reason, message) if there is none."""
    record = None
    for value in _json_objects(text):
        keys = {k.lower(): k for k in value}
        if any(alias in keys for alias in _ALIASES["ground_truth"] + _ALIASES["problem_description"]):
            record = {
                name: next((value[keys[a]] for a in aliases if a in keys), None) for name, aliases in _ALIASES.items()
            }
            break
    if record is None:
        message = "no JSON object with the task's fields" if "{" in text else "no JSON object in the reply"
        raise CandidateError(UNPARSEABLE, message)
    missing = [name for name in ("problem_description", "ground_truth", "test_cases") if not record.get(name)]
    if missing:
        raise CandidateError("well-formed", f"missing field {missing[0]!r}")
    tests = record["test_cases"]
    if isinstance(tests, list):
        tests = {f"test{i}": call for i, call in enumerate(tests, start=1)}
    if isinstance(tests, dict):
        tests = {str(k): (v.get("call") if isinstance(v, dict) else v) for k, v in tests.items()}
    record["test_cases"] = tests
    record["ground_truth"] = _code(record["ground_truth"])
    record["naive_solution"] = _code(record.get("naive_solution"))
    return {k: v for k, v in record.items() if v is not None}


# ---------------------------------------------------------------- the run


@dataclass
class GenerateSummary:
    model: str
    source: str
    passages: int = 0  # passages sent to the model
    candidates: int = 0
    accepted: int = 0
    stored: int = 0  # accepted and not already in the store
    reasons: dict[str, int] = field(default_factory=dict)  # reject reason → count
    examples: dict[str, str] = field(default_factory=dict)  # reject reason → one message
    rejects: list[dict[str, Any]] = field(default_factory=list)
    task_ids: list[int] = field(default_factory=list)
    sandbox: str | None = None

    @property
    def rejected(self) -> int:
        return self.candidates - self.accepted

    def reject(self, passage: Passage, reason: str, message: str) -> None:
        self.reasons[reason] = self.reasons.get(reason, 0) + 1
        self.examples.setdefault(reason, f"{passage.where}: {message}")
        self.rejects.append({"passage": passage.where, "reason": reason, "message": message})

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "source": self.source,
            "passages": self.passages,
            "candidates": self.candidates,
            "accepted": self.accepted,
            "stored": self.stored,
            "rejected": self.rejected,
            "reasons": self.reasons,
            "rejects": self.rejects,
            "task_ids": self.task_ids,
            "sandbox": self.sandbox,
        }


def generate_tasks(
    db,
    engine,
    passages: Sequence[Passage],
    *,
    model_name: str,
    family: str = DEFAULT_FAMILY,
    split: str = "train",
    n: int | None = None,
    sandbox: str = "auto",
    grader=None,
    batch_size: int = 8,
    temperature: float = 0.7,
    max_new_tokens: int = 2048,
    seed: int | None = None,
    progress: Progress | None = None,
) -> GenerateSummary:
    """Ask `engine` for one task per passage until `n` are accepted (or passages run out)."""
    from colbench.engines import SamplingParams
    from colbench.store import queries

    writer = family_named(family).task_writer()
    if writer is None:
        raise ValueError(f"tasks generate cannot write {family} tasks: the family gives no prompt for it")
    source = f"generated:{model_name}"
    summary = GenerateSummary(model=model_name, source=source)
    with db.read() as session:
        existing = [spec_of(task) for task in queries.tasks_in(session, family=family)]

    own = grader is None
    if own:  # opened first: no sandbox, no point asking the model
        from colbench.grading.grader import Grader

        grader = Grader(sandbox=sandbox, workers=2)
    accepted: list[tuple[TaskSpec, dict]] = []
    try:
        summary.sandbox = grader.backend
        position = 0
        while position < len(passages) and (n is None or len(accepted) < n):
            size = batch_size if n is None else min(batch_size, n - len(accepted))
            batch = passages[position : position + size]
            position += len(batch)
            params = SamplingParams(temperature=temperature, max_new_tokens=max_new_tokens, n=1, seed=seed)
            generations = engine.generate([writer(p.text) for p in batch], params)
            summary.passages += len(batch)
            specs, sources = [], []
            for passage, generation in zip(batch, generations):
                summary.candidates += 1
                sample = generation.samples[0]
                try:
                    record = parse_candidate(sample.text)
                    spec = task_from_record(record, family=family, split=split, source=source, where=passage.where)
                except CandidateError as exc:
                    reason = CUT_OFF if sample.finish_reason == "length" and exc.reason == UNPARSEABLE else exc.reason
                    summary.reject(passage, reason, str(exc))
                    continue
                except FormatError as exc:
                    summary.reject(passage, "well-formed", str(exc).split(": ", 1)[-1])
                    continue
                specs.append(spec)
                sources.append(passage)
            if specs:
                report = validate_tasks(
                    specs,
                    exact_tests=TESTS_PER_TASK,
                    require_naive=True,
                    where=[p.where for p in sources],
                    existing=existing + [spec for spec, _ in accepted],
                    grader=grader,
                )
                for spec, passage, check in zip(specs, sources, report.checks):
                    if check.ok and (n is None or len(accepted) < n):
                        extra = {"passage_file": passage.file, "passage_index": passage.index}
                        if passage.line is not None:
                            extra["passage_line"] = passage.line
                        accepted.append((spec, extra))
                    elif not check.ok:
                        reason = check.first_failed_rule
                        message = next(f.message for f in check.failures if f.rule == reason)
                        summary.reject(passage, reason, message)
                    else:
                        summary.candidates -= 1  # beyond --n: neither kept nor rejected
            if progress:
                progress("generate", summary.passages, len(passages), {"accepted": len(accepted)})
    finally:
        if own:
            grader.close()

    summary.accepted = len(accepted)
    if accepted:
        rows = [task_row(spec, extra) for spec, extra in accepted]
        with db.write() as session:
            ids, summary.stored = queries.add_tasks(session, rows)
        summary.task_ids = [ids[row["content_hash"]] for row in rows]
    return summary


def parse_endpoint(value: str) -> tuple[str, str]:
    """'URL#MODEL' → (URL, MODEL)."""
    url, sep, model = value.rpartition("#")
    if not sep or not url.strip() or not model.strip():
        raise ValueError(
            "--endpoint takes URL#MODEL, e.g. http://localhost:8000/v1#meta-llama/Llama-3.1-70B-Instruct; got"
            f" {value!r}"
        )
    return url.strip(), model.strip()
