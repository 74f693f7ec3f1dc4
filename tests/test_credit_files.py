"""A study's scored dialogues and same-state candidates outlive their store: saved to files (`colbench export --ids`,
`colbench credit export`) and restored into a fresh SQLite store (`trajectories import --keep-ids`, `credit import`),
they are the same rows under the same ids, and `credit eval` gives the same figures and values on both."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from colbench.store import queries
from colbench.store.db import Database
from tests.conftest import command_line

POLICIES = ("scripted:mixed@0.6", "scripted:expert")
TASKS = ("--tasks", "backend-lite:train")
FIGURES = ("dialogues", "turns", "turn_auc", "question_auc", "answer_accuracy", "pair_accuracy",
           "question_pair_accuracy", "answer_pair_accuracy")


@pytest.fixture
def cli(sqlite_url, capsys, monkeypatch):
    return command_line(None, capsys, monkeypatch)  # each call names its store


@pytest.fixture
def saved(cli, sqlite_url, tmp_path) -> dict:
    """A store with two scripted agents' dialogues on three lite tasks and a candidates run on them, saved: a
    dialogue file per policy and the candidates file."""
    db = ("--db", sqlite_url)
    for policy in POLICIES:
        code, out, err = cli(*db, "rollout", "--engine", policy, *TASKS, "--limit", "3", "--sandbox", "bwrap",
                             "--json")
        assert code == 0 and out["finished"] == 3, err
    give_prompts(Database(sqlite_url))
    code, made, err = cli(*db, "credit", "sample", *TASKS, "--candidates", "4", "--sandbox", "bwrap", "--name",
                          "cands", "--json")
    assert code == 0 and made["pairs"] > 0 and made["question_pairs"] > 0, err
    files = {}
    for n, policy in enumerate(POLICIES):
        code, out, err = cli(*db, "export", "--split", "lite-train", "--policy", policy, "--ids", "--out",
                             str(tmp_path / f"d{n}"), "--json")
        assert code == 0, err
        files[policy] = tmp_path / f"d{n}" / "trajectories.jsonl"
    code, out, err = cli(*db, "credit", "export", "cands", "--out", str(tmp_path / "cands.jsonl"), "--json")
    assert code == 0 and out["candidates"] == made["states"] * 4, err
    return {"dialogues": files, "candidates": tmp_path / "cands.jsonl", "made": made}


def give_prompts(db: Database) -> None:
    """Scripted agents see no templated prompt: give each agent turn one, each the previous one and more, as a
    tokenizer's are (stored compacted), so that the files are shown to carry them."""
    from sqlmodel import select

    from colbench.store.models import Turn

    with db.write() as session:
        shown: dict[int, str] = {}
        for turn in session.exec(select(Turn).order_by(Turn.trajectory_id, Turn.index)):
            so_far = shown.get(turn.trajectory_id, f"<s>{turn.trajectory_id}")
            if turn.role == "assistant":
                turn.prompt, turn.prompt_shared = so_far + "<|assistant|>", None
                session.add(turn)
            shown[turn.trajectory_id] = so_far + f"<|{turn.role}|>{turn.content}"
    db.close()


def restore(cli, url: str, saved: dict) -> None:
    for policy, path in saved["dialogues"].items():
        code, out, err = cli("--db", url, "trajectories", "import", str(path), "--policy", policy, "--split",
                             "lite-train", "--keep-ids", "--json")
        assert code == 0 and out["added"] == 3, err


def dialogues(url: str) -> list:
    """Every stored dialogue as its rows say: ids, task, policy, sample, reward, and each turn's id, role, content and
    prompt, in id order."""
    db = Database(url)
    with db.read() as session:
        ids = sorted(i for i, _ in queries.graded_trajectory_ids(session, family="backend", split="lite-train"))
        found = queries.trajectories_by_id(session, ids)
        turns = queries.turns_for(session, ids)
    db.close()
    return [(i, found[i].task_id, found[i].policy, found[i].sample_index, found[i].reward,
             [(t.id, t.index, t.role, t.content, t.prompt) for t in turns[i]]) for i in ids]


def scored(cli, url: str, values: Path) -> list[dict]:
    code, rows, err = cli("--db", url, "credit", "eval", "--credit", "oracle", "--credit", "random", *TASKS,
                          "--pairs-from", "cands", "--sandbox", "bwrap", "--values-out", str(values), "--json")
    assert code == 0, err
    return [{name: row[name] for name in FIGURES} | {"credit": row["credit"]} for row in rows]


def value_rows(path: Path) -> list[dict]:
    """values.jsonl's rows, less the seconds each credit took."""
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for row in rows:
        for timing in ("seconds", "candidate_seconds"):
            row.get("summary", {}).pop(timing, None)
    return rows


def stored_counts(url: str) -> tuple[int, int, int]:
    """(trajectories, training runs, candidates) a store holds: what a refused restore must leave alone."""
    db = Database(url)
    with db.read() as session:
        counts = (len(queries.trajectories_by_id(session, range(1, 1000))),
                  len(queries.training_runs(session)),
                  sum(len(c) for run, _ in queries.training_runs(session)
                      for c in queries.candidates_of_run(session, run.id).values()))
    db.close()
    return counts


def test_saved_dialogues_and_candidates_restore_the_same_rows_ids_and_figures(cli, sqlite_url, saved, tmp_path):
    fresh = f"sqlite:///{tmp_path / 'restored.db'}"
    restore(cli, fresh, saved)
    # The same dialogues under the same trajectory and turn ids (the rollout wrote the turns of its dialogues
    # interleaved, so only ids carried in the file give them back), with their prompts and rewards.
    original = dialogues(sqlite_url)
    assert dialogues(fresh) == original and len(original) == 6
    assert all(t[4] for d in original for t in d[5] if t[2] == "assistant")  # with their prompts
    assert sorted(t[0] for d in original for t in d[5]) != [t[0] for d in original for t in d[5]]  # interleaved
    code, out, err = cli("--db", fresh, "credit", "import", str(saved["candidates"]), "--json")
    assert code == 0, err
    assert out == {**saved["made"], "sampled": 0}  # the same run's figures, under the same id in a fresh store
    # `credit sample` with the same flags finds the restored run: its config and dialogues are the original's.
    again = cli("--db", fresh, "credit", "sample", *TASKS, "--candidates", "4", "--sandbox", "bwrap", "--name",
                "cands", "--json")[1]
    assert again == out
    assert cli("--db", fresh, "credit", "import", str(saved["candidates"]), "--json")[1] == out  # found, not remade
    assert scored(cli, fresh, tmp_path / "restored.jsonl") == scored(cli, sqlite_url, tmp_path / "original.jsonl")
    assert value_rows(tmp_path / "restored.jsonl") == value_rows(tmp_path / "original.jsonl")


def test_a_bad_candidates_file_or_one_of_other_dialogues_writes_nothing(cli, saved, tmp_path):
    fresh = f"sqlite:///{tmp_path / 'restored.db'}"
    restore(cli, fresh, saved)
    before = stored_counts(fresh)
    lines = saved["candidates"].read_text().splitlines()
    head, row = lines[0], json.loads(lines[1])
    other = json.loads(lines[2]) | {"dialogue": "0" * 32 + "#0"}
    cases = {
        "truncated": ([head, lines[1], lines[2][:40]], "bad.jsonl:3"),
        "no header": (lines[1:], "not a candidates file"),
        "bad field": ([head, json.dumps(row | {"sampler_logp": "high"})], "'sampler_logp' as a number"),
        "no such state": ([head, lines[1], json.dumps(other)], "is no agent turn of the stored dialogues"),
        "past the dialogue": ([head, json.dumps(row | {"turn": 99})], "agent turn 99) is no agent turn"),
    }
    for name, (content, said) in cases.items():
        bad = tmp_path / "bad.jsonl"
        bad.write_text("\n".join(content) + "\n")
        code, _, err = cli("--db", fresh, "credit", "import", str(bad))
        assert code != 0 and said in err and len(err.strip().splitlines()) == 1, (name, err)
        assert err.startswith("error: ") and stored_counts(fresh) == before, name
    # A store holding one policy's dialogues only lacks the other's states: refused whole.
    half = f"sqlite:///{tmp_path / 'half.db'}"
    policy, path = next(iter(saved["dialogues"].items()))
    assert cli("--db", half, "trajectories", "import", str(path), "--policy", policy, "--split", "lite-train",
               "--keep-ids")[0] == 0
    half_before = stored_counts(half)
    code, _, err = cli("--db", half, "credit", "import", str(saved["candidates"]))
    assert code != 0 and "import the dialogues it was saved with first" in err and stored_counts(half) == half_before
    # Dialogues restored under their ids into a store holding other rows at those ids are refused whole too: here
    # the same dialogues under another policy (an export without its stored fields, so --policy names them).
    other = tmp_path / "other-policy.jsonl"
    other.write_text("".join(json.dumps({k: v for k, v in json.loads(line).items() if k != "stored"}) + "\n"
                             for line in path.read_text().splitlines()))
    code, _, err = cli("--db", fresh, "trajectories", "import", str(other), "--policy", "another", "--split",
                       "lite-train", "--keep-ids")
    assert code != 0 and "already holds trajectory id" in err and stored_counts(fresh) == before


def test_dialogues_restored_under_their_ids_leave_later_rows_fresh_ids(db, tmp_path):
    """On SQLite and PostgreSQL: records carrying ids far apart (another store's) take exactly those, and a plain
    import after them takes ids of its own (PostgreSQL's sequences are moved past the restored rows)."""
    from colbench.official import import_trajectories
    from officialdata import backend_task, trajectory
    from tests.conftest import write_jsonl

    records = [trajectory(backend_task(i), turns=2) for i in range(2)]
    for n, record in enumerate(records):
        record["trajectory_id"] = 40 + 7 * n
        for k, message in enumerate(record["dialogue_history"]):
            message["turn_id"] = 500 + 2 * k + n  # interleaved, as a rollout writes them
    kept = write_jsonl(tmp_path / "kept.jsonl", records)
    assert import_trajectories(db, kept, policy="p", keep_ids=True).added == 2
    import_trajectories(db, write_jsonl(tmp_path / "plain.jsonl", [trajectory(backend_task(5))]), policy="q")
    with db.read() as session:
        found = queries.trajectories_by_id(session, range(1, 100))
        turns = queries.turns_for(session, list(found))
    restored = sorted(i for i, t in found.items() if t.policy == "p")
    assert restored == [40, 47]
    assert [[t.id for t in turns[i]] for i in restored] == [[500 + 2 * k + n for k in range(len(turns[i]))]
                                                           for n, i in enumerate(restored)]
    [plain] = [i for i, t in found.items() if t.policy == "q"]
    assert plain > 47 and min(t.id for t in turns[plain]) > max(t.id for i in restored for t in turns[i])
