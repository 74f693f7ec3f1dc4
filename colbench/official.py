"""The official ColBench / SWEET-RL data formats: read them into the store, write them back.

Task files are JSONL, one task a line: `problem_description`, `ground_truth`,
`test_cases` (backend) and optionally `hidden_information`; colbench's exports add `family`,
which decides the family of a record read back (colbench.families.family_of_record). Offline trajectory files
are JSONL of `{task, dialogue_history, answer, reward?}`, where assistant turns carry
`input` (the full chat-templated prompt) and `output` (the raw generation).

Imports are all-or-nothing per file: every line is parsed and checked first, then
everything goes in one transaction. A bad line names its file and line number.
"""
from __future__ import annotations

from colbench.errors import FormatError

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from colbench.grading.semantics import DEFAULT_GRADING, GRADINGS
from colbench.jsonl import records
from colbench.progress import Progress, Tally
from colbench.store.db import Database
from colbench.store.models import Task, Trajectory, Turn, utcnow
from colbench.store import queries
from colbench.families import family as family_named, family_of_record
from colbench.families.records import task_from_record  # noqa: F401 - also imported from here
from colbench.tasks.rows import spec_of, task_row  # noqa: F401 - also imported from here
from colbench.tasks.spec import LITE_SPLITS, SPLITS, TaskSpec

UNGRADED = {"reward_metric": None, "success": None, "grading": None}
# What a store's dialogue holds beyond the official fields, written by an export with ids under "stored" and given
# back by import's --keep-ids: the rollout slot it fills (a rerun of that rollout finds it done), its grade, and the
# order it was graded in (the order trainers read it in), so a restored store trains the same bits as the first.
STORED_TRAJECTORY = ("policy", "simulator", "setting", "sample_index", "seed", "status", "failure", "reward_metric",
                     "grading", "success", "graded_seq")
STORED_TURN = ("raw",) + queries.TURN_SAMPLER_COLUMNS  # raw: a human turn's whole reply (an agent's is "output")
TASK_FIELDS = ("family", "problem_description", "ground_truth", "test_cases", "hidden_information")


@dataclass
class ImportSummary:
    path: str
    records: int
    added: int
    skipped: int  # already stored (same content)
    tasks_added: int = 0


# ---------------------------------------------------------------- parsing


def read_text(path: Path) -> str:
    """A whole UTF-8 text file, or a FormatError that names it (and the line of a bad byte)."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise FormatError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise FormatError(f"{path}:{line}: not UTF-8 text (byte 0x{data[exc.start]:02x})") from None


def read_jsonl(path: Path) -> Iterator[tuple[int, dict]]:
    """(line number, record) for every non-blank line; FormatError, naming the file and line,
    on bad JSON or bytes that are not UTF-8."""
    try:
        handle = Path(path).open("rb")  # decoded line by line, so a bad byte names its line
    except OSError as exc:
        raise FormatError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    with handle:
        yield from records(handle, path)


def _extra_fields(record: dict) -> dict | None:
    extra = {k: v for k, v in record.items() if k not in TASK_FIELDS}
    return extra or None


def task_record(task: Task) -> dict[str, Any]:
    """The official record of a stored task, with any fields we carried through."""
    record = spec_of(task).to_official()
    for key, value in (task.extra or {}).items():
        if key != "naive_solution":
            record[key] = value
    return record


# ---------------------------------------------------------------- tasks


def import_tasks(
    db: Database, path: Path, *, family: str, split: str, progress: Progress | None = None
) -> ImportSummary:
    if split not in SPLITS:
        raise FormatError(f"split must be one of {', '.join(SPLITS)}")
    tally = Tally(progress, "import")
    rows: list[dict] = []
    for number, record in read_jsonl(path):
        spec = task_from_record(record, family=family, split=split, source=f"import:{path.name}",
                                where=f"{path}:{number}")
        extra = _extra_fields(record)
        if extra and "naive_solution" in extra:
            extra.pop("naive_solution")
        rows.append(task_row(spec, extra or None))
        tally(1)
    with db.write() as session:
        _, added = queries.add_tasks(session, rows)
    return ImportSummary(str(path), len(rows), added, len(rows) - added, tasks_added=added)


# ---------------------------------------------------------------- trajectories


def _trajectory_hash(policy: str, task_hash: str, record: dict, keep_ids: bool = False) -> str:
    """Identity of an imported trajectory: its policy, task, every message's fields, and the answer (and, restored
    under its own ids, its id: two alike dialogues of a scripted policy are two rows there).

    Hashed field by field (not from the line's bytes), so the same record re-exported or
    placed in another file is recognised as already stored.
    """
    digest = hashlib.sha256(f"{policy}\x00{task_hash}".encode())
    if keep_ids:
        digest.update(f"\x03{record['trajectory_id']}".encode())
    for message in record["dialogue_history"]:
        for name in ("role", "content", "input", "output"):
            value = message.get(name)
            digest.update(b"\x00" if value is None else b"\x01" + value.encode() + b"\x02")
    answer = record.get("answer")
    digest.update(b"\x00" if answer is None else answer.encode())
    return digest.hexdigest()


def _family_of(task: dict, family: str | None) -> str:
    return family or family_of_record(task).name


def _stored_ids(record: dict, where: str) -> tuple[int, list[int]]:
    """The trajectory id and the turn ids an export's --ids wrote into a record (for import's --keep-ids)."""
    def an_id(value, name: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise FormatError(f"{where}: --keep-ids needs {name} as a positive integer (an export made with --ids)")
        return value

    history = record["dialogue_history"]
    return (an_id(record.get("trajectory_id"), "'trajectory_id'"),
            [an_id(m.get("turn_id"), f"dialogue_history[{i}].turn_id") for i, m in enumerate(history)])


def _kept_fields(record: dict, policy: str, where: str) -> dict:
    """--keep-ids: the trajectory columns a record's "stored" object restores (an older export without one: its
    dialogue under ``policy``, as a plain import stores it)."""
    kept = dict(_stored(record, STORED_TRAJECTORY, where))
    kept.setdefault("policy", policy)
    for name in ("policy", "simulator", "setting", "status"):
        if name in kept and not isinstance(kept[name], str):
            raise FormatError(f"{where}: stored.{name} must be a string")
    for name in ("sample_index", "seed", "graded_seq"):
        value = kept.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise FormatError(f"{where}: stored.{name} must be a non-negative integer")
    return kept


def _unique_ids(ids: list[tuple[int, list[int]]], path: Path) -> None:
    """No id twice in one file (each line's own ids are checked as it is read)."""
    trajectories = [t for t, _ in ids]
    turns = [i for _, its in ids for i in its]
    for what, found in (("trajectory", trajectories), ("turn", turns)):
        if len(set(found)) != len(found):
            twice = next(i for i in found if found.count(i) > 1)
            raise FormatError(f"{path}: {what} id {twice} is given twice")


def _turn_rows(history: list, where: str) -> list[tuple]:
    """The dialogue as turn rows in queries.TURN_IMPORT_COLUMNS order, checked as they go."""
    rows = []
    previous_prompt = None
    for index, message in enumerate(history):
        if not isinstance(message, dict):
            raise FormatError(f"{where}: dialogue_history[{index}] must be an object")
        role, content = message.get("role"), message.get("content")
        if role not in ("user", "assistant", "system"):
            raise FormatError(f"{where}: dialogue_history[{index}] has role {role!r}; expected user or assistant")
        if not isinstance(content, str):
            raise FormatError(f"{where}: dialogue_history[{index}] needs a string 'content'")
        prompt, output = message.get("input"), message.get("output")
        for name, value in (("input", prompt), ("output", output)):
            if value is not None and not isinstance(value, str):
                raise FormatError(f"{where}: dialogue_history[{index}].{name} must be a string")
        shared, tail = queries.compact_prompt(previous_prompt, prompt)
        if role == "assistant" and prompt is not None:
            previous_prompt = prompt
        stored = _stored(message, STORED_TURN, f"{where}: dialogue_history[{index}]")
        rows.append((index, role, content, output if output is not None else stored.get("raw"), tail, shared,
                     *(stored.get(name) for name in queries.TURN_SAMPLER_COLUMNS)))
    return rows


def _stored(record: dict, fields: tuple[str, ...], where: str) -> dict:
    """A record's "stored" object (what an export with ids adds), checked to name only those fields."""
    if "stored" not in record:  # a plain record (most imports): nothing to check
        return {}
    stored = record["stored"]
    if not isinstance(stored, dict):
        raise FormatError(f"{where}: 'stored' must be an object")
    unknown = sorted(set(stored) - set(fields))
    if unknown:
        raise FormatError(f"{where}: 'stored' has no field {unknown[0]!r} (it holds {', '.join(fields)})")
    return stored


def import_trajectories(
    db: Database,
    path: Path,
    *,
    policy: str | None = None,
    family: str | None = None,
    split: str = "train",
    keep_ids: bool = False,
    progress: Progress | None = None,
) -> ImportSummary:
    """Import an offline trajectory file. Tasks it mentions are added if missing (a lite split's: the whole lite
    tier first, as a rollout stores it, so they keep their built-in ids). ``keep_ids``: every dialogue and turn takes
    the id its record carries (an export's --ids), so that what names them elsewhere (a study's values.jsonl) stays
    valid; an id the store holds for another row is an error, and nothing is written."""
    policy = policy or f"import:{path.stem}"
    tally = Tally(progress, "import")
    parsed: list[tuple[TaskSpec, dict | None, dict, list[dict]]] = []
    ids: list[tuple[int, list[int]]] = []  # with keep_ids: each record's (trajectory id, turn ids)
    kept: list[dict] = []  # with keep_ids: each record's stored trajectory fields, policy always among them
    for number, record in read_jsonl(path):
        where = f"{path}:{number}"
        task = record.get("task")
        if not isinstance(task, dict):
            raise FormatError(f"{where}: field 'task' must be an object with the task's fields")
        spec = task_from_record(task, family=_family_of(task, family), split=split, source=f"import:{path.name}",
                                where=f"{where} (task)")
        history = record.get("dialogue_history")
        if not isinstance(history, list) or not history:
            raise FormatError(f"{where}: field 'dialogue_history' must be a non-empty list")
        reward = record.get("reward")
        if reward is not None and (isinstance(reward, bool) or not isinstance(reward, (int, float))):
            raise FormatError(f"{where}: field 'reward' must be a number")
        answer = record.get("answer")
        if answer is not None and not isinstance(answer, str):
            raise FormatError(f"{where}: field 'answer' must be a string")
        grading = record.get("grading", DEFAULT_GRADING)
        if grading not in GRADINGS:
            raise FormatError(f"{where}: field 'grading' must be one of {', '.join(GRADINGS)}")
        parsed.append((spec, _extra_fields(task), record, _turn_rows(history, where)))
        if keep_ids:
            ids.append(_stored_ids(record, where))
            kept.append(_kept_fields(record, policy, where))
        tally(1)
    if keep_ids:
        _unique_ids(ids, path)
    if split in LITE_SPLITS.values():
        from colbench.families.builtin import ensure_lite_tasks

        ensure_lite_tasks(db)

    with db.write() as session:
        task_ids, tasks_added = queries.add_tasks(session, [task_row(s, e) for s, e, _, _ in parsed])
        policies = [kept[k]["policy"] if keep_ids else policy for k in range(len(parsed))]
        hashes = [_trajectory_hash(p, spec.content_hash, record, keep_ids)
                  for p, (spec, _, record, _) in zip(policies, parsed)]
        stored = queries.existing_trajectory_hashes(session, hashes)
        if keep_ids:
            fresh = [k for k, digest in enumerate(hashes) if digest not in stored]
            _check_free(session, [ids[k] for k in fresh], [kept[k].get("graded_seq") for k in fresh], path)
        next_index = {p: queries.sample_counts(session, p, task_ids.values()) for p in set(policies)}
        stored_tasks = queries.tasks_by_id(session, task_ids.values())
        runs: dict[tuple, int] = {}  # one rollout run per task set, policy and simulator the file touches

        def run_of(task_id: int, row: dict) -> int:
            task = stored_tasks[task_id]
            identity = (f"{task.family}:{task.split}", row["policy"], row["simulator"], row["setting"])
            if identity not in runs:
                runs[identity] = queries.open_rollout_run(
                    session, policy=row["policy"], simulator=row["simulator"], setting=row["setting"],
                    tasks=identity[0], config={"import": str(path)}).id
            return runs[identity]

        db.lock_for_sequence(session)
        seq = max([queries.next_graded_seq(session)] + [row["graded_seq"] + 1 for row in kept
                                                        if row.get("graded_seq") is not None])
        trajectories, turns, turn_ids, now = [], [], [], utcnow()
        for k, ((spec, _, record, turn_rows), digest) in enumerate(zip(parsed, hashes)):
            if digest in stored:
                continue
            stored.add(digest)
            if keep_ids:
                turn_ids.append(ids[k][1])
            task_id = task_ids[spec.content_hash]
            counts = next_index[policies[k]]
            index = counts.get(task_id, 0)
            counts[task_id] = index + 1
            reward = record.get("reward")
            graded = reward is not None
            row = {
                "policy": policies[k],
                "simulator": "import",
                "setting": "",
                "sample_index": index,
                "status": "done",
                **(family_named(spec.family).imported_grade(reward, record, DEFAULT_GRADING) if graded else UNGRADED),
                "graded_seq": seq if graded else None,
            } | (kept[k] if keep_ids else {})
            trajectories.append(
                ({"id": ids[k][0]} if keep_ids else {}) | row | {
                    "task_id": task_id,
                    "rollout_id": run_of(task_id, row),
                    "answer": record.get("answer"),
                    "reward": float(reward) if graded else None,
                    "content_hash": digest,
                    "created_at": now,
                    "finished_at": now,
                }
            )
            seq += row["graded_seq"] == seq  # it took the next number (a restored one keeps its own)
            turns.append(turn_rows)
        added = len(queries.bulk_insert_trajectories(session, trajectories, turns, turn_ids if keep_ids else None))
    return ImportSummary(str(path), len(parsed), added, len(parsed) - added, tasks_added=tasks_added)


def _check_free(session, ids: list[tuple[int, list[int]]], graded: list[int | None], path: Path) -> None:
    """--keep-ids: the ids (and graded order) the new dialogues take must be free (a row holding one is another
    dialogue's)."""
    for what, taken in (
        ("trajectory id", queries.taken(session, Trajectory.id, [t for t, _ in ids])),
        ("turn id", queries.taken(session, Turn.id, [i for _, its in ids for i in its])),
        ("graded order number", queries.taken(session, Trajectory.graded_seq, [g for g in graded if g is not None])),
    ):
        if taken:
            raise FormatError(f"{path}: the store already holds {what} {min(taken)} ({len(taken)} of the file's"
                              f" {what}s): --keep-ids restores into a store that lacks them")


def trajectory_record(task: Task, trajectory: Trajectory, turns: list, ids: bool = False) -> dict[str, Any]:
    """The official record of a stored dialogue; ``ids``: with its trajectory's id and each message's turn id, and
    under "stored" the rest of their rows (STORED_TRAJECTORY, the sampler's fields): not official fields, what
    import's --keep-ids restores."""
    history = []
    for turn in turns:
        message: dict[str, Any] = {"role": turn.role, "content": turn.content}
        if ids:
            message["turn_id"] = turn.id
        if turn.prompt is not None:
            message["input"] = turn.prompt
        if turn.raw is not None and turn.role == "assistant":
            message["output"] = turn.raw
        if ids:
            own = STORED_TURN[1:] if turn.role == "assistant" else STORED_TURN  # an agent's raw is its "output"
            stored = {name: value for name in own if (value := getattr(turn, name)) is not None}
            if stored:
                message["stored"] = stored
        history.append(message)
    record: dict[str, Any] = {"task": task_record(task), "dialogue_history": history, "answer": trajectory.answer}
    if trajectory.reward is not None:
        record["reward"] = trajectory.reward
        if trajectory.grading:
            record["grading"] = trajectory.grading  # not an official field: which semantics made the reward
    if ids:
        record["trajectory_id"] = trajectory.id
        record["stored"] = {name: getattr(trajectory, name) for name in STORED_TRAJECTORY}
    return record


# ---------------------------------------------------------------- export


@dataclass
class ExportSummary:
    files: dict[str, int]  # path → records written


def export_official(
    db: Database,
    out_dir: Path,
    *,
    family: str | None = None,
    split: str | None = None,
    policy: str | None = None,
    ids: bool = False,
    progress: Progress | None = None,
) -> ExportSummary:
    """Write `<family>_<split>_tasks.jsonl` per family and split, and `trajectories.jsonl` (``ids``: with every
    trajectory's and turn's id, see trajectory_record).

    Files are written whole to a temporary name and renamed, so an interrupted export
    never leaves a half file behind under the real name.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    tally = Tally(progress, "export")
    files: dict[str, int] = {}
    with db.read() as session:
        tasks = queries.tasks_in(session, family=family, split=split)
        groups: dict[tuple[str, str], list[Task]] = {}
        for task in tasks:
            groups.setdefault((task.family, task.split), []).append(task)
        for (fam, spl), members in groups.items():
            target = out_dir / f"{fam}_{spl}_tasks.jsonl"
            files[str(target)] = _write_jsonl(target, (task_record(t) for t in members))
            tally(len(members))

        flt = queries.TrajectoryFilter(policy=policy, family=family, split=split, limit=None)
        found = sorted(queries.find_trajectories(session, flt), key=lambda row: row[0].id)
        trajectory_ids = [t.id for t, _, _ in found]
        turns = queries.turns_for(session, trajectory_ids)

        def records():
            for trajectory, task, _ in found:
                yield trajectory_record(task, trajectory, turns[trajectory.id], ids)
                tally(1)

        if found:
            target = out_dir / "trajectories.jsonl"
            files[str(target)] = _write_jsonl(target, records())
    return ExportSummary(files)


def _write_jsonl(target: Path, records) -> int:
    temporary = target.with_name(target.name + ".part")
    count = 0
    with temporary.open("w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
            count += 1
    temporary.replace(target)
    return count
