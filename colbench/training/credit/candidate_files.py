"""A candidates run in a file and back (`colbench credit export` / `credit import`): a study's same-state pairs
outlive the store they were sampled in.

The file is JSONL: a first line naming the format and the run (its name and config, so that the restored run is the
one `credit sample` with the same flags finds), then a line per candidate with what `sweet_candidate` holds of it.
A candidate names its state by nothing a store decides (ids, policy references): its dialogue's key (dialogue_keys)
and the agent turn's number in that dialogue (1 is the first). Restored, the states are looked up among the stored
graded dialogues of the run's tasks, so the dialogues go in first (`colbench trajectories import`, any policy name).
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from colbench.errors import FormatError
from colbench.training.credit.base import CreditError
from colbench.training.credit.candidates import KIND, CandidatesResult, counted, sampling_key

FORMAT = "colbench-candidates/1"
FIELDS = {"content": str, "token_ids": list, "finish_reason": str, "sampler_logp": (int, float),
          "score": (int, float, type(None))}


def dialogue_keys(db, trajectory_ids) -> dict[int, str]:
    """trajectory id → its dialogue's key: its task's content hash and every message's role and content, hashed, and
    its place among alike dialogues by id (``#0`` for the first: a scripted policy's samples can be alike)."""
    from colbench.store import queries

    ids = sorted(trajectory_ids)
    with db.read() as session:
        trajectories = queries.trajectories_by_id(session, ids)
        tasks = queries.tasks_by_id(session, {t.task_id for t in trajectories.values()})
        turns = queries.turns_for(session, ids)
    keys: dict[int, str] = {}
    seen: dict[str, int] = {}
    for i in ids:
        digest = hashlib.sha256(tasks[trajectories[i].task_id].content_hash.encode())
        for turn in turns[i]:
            digest.update(json.dumps([turn.role, turn.content]).encode())
        base = digest.hexdigest()[:32]
        keys[i] = f"{base}#{seen.get(base, 0)}"
        seen[base] = seen.get(base, 0) + 1
    return keys


def states_of(db, tasks: str) -> dict[tuple[str, int], tuple[int, str]]:
    """(dialogue key, agent turn number) → (its turn id, the policy of its dialogue), for every agent turn of the
    graded lite dialogues of ``tasks`` (the run's): how a file's state is found in a store. Keyed among all of them on
    both sides, so that alike dialogues are numbered alike when every one of them is restored, in order."""
    from colbench.store import queries
    from colbench.training.credit.evaluate import graded_lite_dialogues

    keys = dialogue_keys(db, graded_lite_dialogues(db, tasks))
    with db.read() as session:
        trajectories = queries.trajectories_by_id(session, list(keys))
        turns = queries.turns_for(session, list(keys))
    return {(keys[i], n): (turn.id, trajectories[i].policy) for i in keys
            for n, turn in enumerate((t for t in turns[i] if t.role == "assistant"), start=1)}


def save_candidates(db, run_id: int, path: Path) -> int:
    """Write the candidates run ``run_id`` to ``path`` (whole, or not at all); returns how many candidates."""
    from colbench.store import queries

    with db.read() as session:
        found = queries.training_runs(session, run_id=run_id)
        by_turn = queries.candidates_of_run(session, run_id)
    if not found or found[0][0].kind != KIND:
        raise CreditError(f"train:{run_id} is not a candidates run (`colbench credit sample` makes them)")
    run = found[0][0]
    if run.status != "done":
        raise CreditError(f"train:{run_id} is {run.status}: finish it first (the same `credit sample` again)")
    state_of = {turn: key for key, (turn, _) in states_of(db, run.config["tasks"]).items()}
    if lost := sorted(set(by_turn) - set(state_of)):
        raise CreditError(f"train:{run_id}: {len(lost)} of its states (turn {lost[0]}, ...) are no longer turns of"
                          f" graded dialogues of {run.config['tasks']}")
    rows = [{"dialogue": state_of[turn][0], "turn": state_of[turn][1], "index": c.index, "content": c.content,
             "token_ids": c.token_ids, "finish_reason": c.finish_reason, "sampler_logp": c.sampler_logp,
             "score": c.score} for turn in sorted(by_turn) for c in by_turn[turn]]
    head = {"format": FORMAT, "run": {"name": run.name, "config": run.config}}
    temporary = path.with_name(path.name + ".part")
    with temporary.open("w", encoding="utf-8") as handle:
        for row in [head, *rows]:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    temporary.replace(path)  # a file under the real name is always whole
    return len(rows)


def read_candidates(path: Path) -> tuple[dict, list[tuple[int, dict]]]:
    """(the run's line, [(line number, candidate)]), every line checked; FormatError naming the file and line."""
    from colbench.official import read_jsonl

    lines = list(read_jsonl(path))
    if not lines or lines[0][1].get("format") != FORMAT or not isinstance(lines[0][1].get("run"), dict):
        raise FormatError(f"{path}:{lines[0][0] if lines else 1}: not a candidates file (`colbench credit export`"
                          f" writes one: its first line names the format {FORMAT})")
    head = lines[0][1]["run"]
    if not isinstance(head.get("config"), dict) or not isinstance(head["config"].get("tasks"), str):
        raise FormatError(f"{path}:{lines[0][0]}: the run's line needs its config, with the tasks it sampled")
    for number, row in lines[1:]:
        where = f"{path}:{number}"
        if not isinstance(row.get("dialogue"), str):
            raise FormatError(f"{where}: needs 'dialogue', its dialogue's key")
        for name in ("turn", "index"):
            if isinstance(row.get(name), bool) or not isinstance(row.get(name), int) or row[name] < (name == "turn"):
                raise FormatError(f"{where}: needs '{name}' as an integer of at least {int(name == 'turn')}")
        for name, kinds in FIELDS.items():
            if name not in row or isinstance(row[name], bool) or not isinstance(row[name], kinds):
                raise FormatError(f"{where}: needs '{name}' as a {_kind_names(kinds)}")
    return head, lines[1:]


def _kind_names(kinds) -> str:
    names = {str: "string", list: "list", int: "number", float: "number", type(None): "null"}
    return " or ".join(dict.fromkeys(names[k] for k in (kinds if isinstance(kinds, tuple) else (kinds,))))


def restore_candidates(db, path: Path) -> CandidatesResult:
    """The candidates run saved in ``path``, again in this store, attached to the agent turns of its stored
    dialogues; all of it in one transaction, or nothing (a state that no stored dialogue has is an error). The run
    its name already names, restored before, is found, not made again."""
    from colbench.store import queries

    head, rows = read_candidates(path)
    config, name = head["config"], head.get("name")
    stored = states_of(db, config["tasks"])
    for number, row in rows:
        if (row["dialogue"], row["turn"]) not in stored:
            raise CreditError(f"{path}:{number}: its state (dialogue {row['dialogue']}, agent turn {row['turn']}) is"
                              f" no agent turn of the stored dialogues of {config['tasks']}: import the dialogues it"
                              " was saved with first (`colbench trajectories import`)")
    placed = [(stored[(row["dialogue"], row["turn"])], row) for _, row in rows]
    with db.write() as session:
        existing = _restored_before(session, name, config)
        if existing is not None:
            return _figures(existing, placed)
        policies = sorted({policy for (_, policy), _ in placed})
        run_id = queries.start_run(session, kind=KIND, base_model=",".join(policies), parent_checkpoint_id=None,
                                   config=config, name=name)
        for policy in policies:
            mine = [(turn, row) for (turn, p), row in placed if p == policy]
            queries.replace_sweet_candidates(session, sampling_key(run_id, policy), sorted({t for t, _ in mine}),
                                             [_candidate_row(run_id, policy, turn, row) for turn, row in mine])
        result = _figures(run_id, placed)
        queries.end_run(session, run_id, result.as_dict())
    return result


def _restored_before(session, name: str | None, config: dict) -> int | None:
    """The run a previous restore of this file made (its name, kind and config); a name another run holds is an
    error."""
    from colbench.store import queries

    holder = name and queries.name_holder(session, name)
    if not holder:
        return None
    done = queries.unfinished_run(session, KIND, config, name=name, status="done")
    if done is None:
        raise CreditError(f"the name {name!r} is taken by {holder}, which is not this file's candidates run")
    return done.id


def _candidate_row(run_id: int, policy: str, turn_id: int, row: dict) -> dict:
    return {"run_id": run_id, "sampling_key": sampling_key(run_id, policy), "turn_id": turn_id, "index": row["index"],
            **{name: row[name] for name in FIELDS}}


def _figures(run_id: int, placed) -> CandidatesResult:
    """The run's figures, as `credit sample` counts them, from the candidates placed at their turns."""
    from types import SimpleNamespace

    by_turn: dict[int, list] = {}
    numbers: dict[int, int] = {}
    dialogues = set()
    for (turn, _), row in sorted(placed, key=lambda p: (p[0][0], p[1]["index"])):
        by_turn.setdefault(turn, []).append(SimpleNamespace(content=row["content"], score=row["score"]))
        numbers[turn] = row["turn"]
        dialogues.add(row["dialogue"])
    return counted(run_id, len(dialogues), by_turn, numbers, 0)
