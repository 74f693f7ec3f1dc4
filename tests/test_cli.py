"""The `colbench` command as a user types it: a real process, a real database file."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlmodel import select

from colbench.store.db import Database
from colbench.store.models import CriticScore, Checkpoint, TestResult, TrainingRun, Turn
from conftest import write_jsonl
from officialdata import backend_task, trajectory

COLBENCH = [sys.executable, "-m", "colbench.cli.app"]


def run(*args: str, db_url: str | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS="160", NO_COLOR="1")
    env.pop("COLBENCH_DEBUG", None)
    if db_url:
        env["COLBENCH_DB"] = db_url
    return subprocess.run(COLBENCH + list(args), capture_output=True, text=True, env=env, cwd=cwd, timeout=120)


def assert_one_line_error(result: subprocess.CompletedProcess, *fragments: str) -> None:
    assert result.returncode != 0
    lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr and lines[0].startswith("error:")
    for fragment in fragments:
        assert fragment in lines[0]


@pytest.fixture
def stocked(db_url, tmp_path):
    """A database with 4 tasks and 4 imported trajectories (rewards 1, 0.25, 1, 0.25)."""
    records = [trajectory(backend_task(i), turns=2, reward=1.0 if i % 2 == 0 else 0.25) for i in range(4)]
    path = write_jsonl(tmp_path / "offline.jsonl", records)
    result = run("trajectories", "import", str(path), "--policy", "llama", db_url=db_url)
    assert result.returncode == 0, result.stderr
    assert "4 trajectories added" in result.stdout
    return db_url


def test_default_database_is_a_sqlite_file_in_the_working_directory(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "COLBENCH_DB"}
    result = subprocess.run(COLBENCH + ["db", "upgrade"], capture_output=True, text=True, cwd=tmp_path, env=env,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "colbench.db").exists()
    status = subprocess.run(COLBENCH + ["db", "status", "--json"], capture_output=True, text=True, cwd=tmp_path,
                            env=env, timeout=120)
    payload = json.loads(status.stdout)
    assert payload["up_to_date"] and payload["revision"] == payload["head"]


def test_tasks_import_and_ls(db_url, tmp_path):
    path = write_jsonl(tmp_path / "tasks.jsonl", [backend_task(i) for i in range(3)])
    result = run("tasks", "import", str(path), "--family", "backend", "--split", "test", db_url=db_url)
    assert result.returncode == 0 and "3 tasks added" in result.stdout
    listing = json.loads(run("tasks", "ls", "--all", "--json", db_url=db_url).stdout)
    imported = [t for t in listing if t["source"] == "import:tasks.jsonl"]
    assert [t["split"] for t in imported] == ["test"] * 3 and all(t["tests"] == 10 for t in imported)
    assert {t["source"] for t in listing} == {"import:tasks.jsonl", "builtin"}  # and the built-in ones, never rolled
    table = run("tasks", "ls", "--family", "backend", "--split", "test", db_url=db_url).stdout
    assert "shop number 2" in table


def test_malformed_import_is_one_line_naming_file_and_line(sqlite_url, tmp_path):
    path = tmp_path / "broken.jsonl"
    path.write_text(json.dumps(backend_task(0)) + "\n{oops\n")
    result = run("tasks", "import", str(path), "--family", "backend", "--split", "train", db_url=sqlite_url)
    assert_one_line_error(result, "broken.jsonl:2")
    listing = json.loads(run("tasks", "ls", "--all", "--json", db_url=sqlite_url).stdout)
    assert listing and {t["source"] for t in listing} == {"builtin"}  # nothing of the file


def test_missing_file_is_one_line(sqlite_url, tmp_path):
    result = run("trajectories", "import", str(tmp_path / "nope.jsonl"), db_url=sqlite_url)
    assert_one_line_error(result, "nope.jsonl")


def test_ls_filters_and_json(stocked):
    everything = json.loads(run("ls", "--json", db_url=stocked).stdout)
    assert len(everything) == 4 and {t["policy"] for t in everything} == {"llama"}
    high = json.loads(run("ls", "--json", "--min-reward", "0.5", db_url=stocked).stdout)
    assert sorted(t["reward"] for t in high) == [1.0, 1.0]
    low = json.loads(run("ls", "--json", "--max-reward", "0.5", "--status", "done", db_url=stocked).stdout)
    assert [t["reward"] for t in low] == [0.25, 0.25]
    one_task = json.loads(run("ls", "--json", "--task", str(everything[0]["task_id"]), db_url=stocked).stdout)
    assert [t["id"] for t in one_task] == [everything[0]["id"]]
    assert json.loads(run("ls", "--json", "--policy", "other", db_url=stocked).stdout) == []
    table = run("ls", db_url=stocked).stdout
    assert "llama" in table and "0.250" in table


def _add_scores_and_tests(db_url: str, trajectory_id: int) -> None:
    db = Database(db_url)
    with db.write() as session:
        run_row = TrainingRun(kind="critic", base_model="tiny")
        session.add(run_row)
        session.flush()
        ckpt = Checkpoint(run_id=run_row.id, kind="critic", base_model="tiny", path="/tmp/x")
        session.add(ckpt)
        session.flush()
        turns = session.exec(select(Turn).where(Turn.trajectory_id == trajectory_id, Turn.role == "assistant")).all()
        session.add(CriticScore(turn_id=turns[0].id, checkpoint_id=ckpt.id, score=0.4321))
        session.add(TestResult(trajectory_id=trajectory_id, name="test1", call="f(1)", expected="int:3", actual="int:4",
                               passed=False, error=None, duration_s=0.002))
        session.add(TestResult(trajectory_id=trajectory_id, name="test2", call="f(2)", expected="int:5", actual="int:5",
                               passed=True, duration_s=0.001))


def test_inspect_shows_turns_scores_tests_and_hides_the_reference(stocked):
    first = json.loads(run("ls", "--json", db_url=stocked).stdout)[-1]
    _add_scores_and_tests(stocked, first["id"])
    shown = run("inspect", str(first["id"]), db_url=stocked)
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert "policy" in out and "llama" in out and "reward" in out
    assert "agent · turn 1" in out and "human · task description" in out
    assert "critic ckpt:1 +0.4321" in out
    assert "test results" in out and "f(1)" in out and "pass" in out
    assert "return round(base" in out  # the agent's answer, as code
    assert (
        "agent · turn 2 · graded answer" in out
        and "graded answer" in out.split("test results")[0].rsplit("human", 1)[-1]
    )
    assert "reward 1.000 (tests) · success" in out or "reward 0.250 (tests) · not solved" in out
    assert "hidden reference" not in out.replace("hidden reference not shown", "")
    revealed = run("inspect", str(first["id"]), "--reveal", db_url=stocked).stdout
    assert "hidden reference" in revealed and "def shipping_cost_0" in revealed
    as_json = json.loads(run("inspect", str(first["id"]), "--json", db_url=stocked).stdout)
    assert "ground_truth" not in as_json and as_json["turns"][1]["critic_scores"] == {"ckpt:1": 0.4321}
    assert [t["passed"] for t in as_json["tests"]] == [False, True]


def test_inspect_says_once_why_every_test_failed(stocked):
    first = json.loads(run("ls", "--json", db_url=stocked).stdout)[-1]
    with Database(stocked).write() as session:
        for i in range(10):
            session.add(TestResult(trajectory_id=first["id"], name=f"test{i}", call=f"f({i})", expected="int:1",
                                   passed=False,
                                   error="SyntaxError: invalid syntax (line 3)"))
    out = run("inspect", str(first["id"]), db_url=stocked).stdout
    assert "all 10 tests failed the same way: SyntaxError: invalid syntax (line 3)" in out
    assert out.count("SyntaxError") == 1 and "test results" not in out


def test_inspect_unknown_id(stocked):
    assert_one_line_error(run("inspect", "999", db_url=stocked), "no trajectory with id 999")


def test_newer_database_is_refused_in_one_line(sqlite_url):
    from sqlalchemy import text

    db = Database(sqlite_url)
    with db.engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = 'abc123'"))
    assert_one_line_error(run("ls", db_url=sqlite_url), "revision abc123", "newer than this colbench")


def test_export_round_trip_through_the_cli(stocked, tmp_path):
    out = tmp_path / "out"
    result = run("export", "--format", "official", "--out", str(out), db_url=stocked)
    assert result.returncode == 0, result.stderr
    exported = [json.loads(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]
    original = [json.loads(line) for line in (tmp_path / "offline.jsonl").read_text().splitlines()]
    # Every graded record names its grading (an official file's rewards are the official grader's).
    assert [r.pop("grading", None) for r in exported] == ["official" if "reward" in r else None for r in original]
    assert [r["task"].pop("family") for r in exported] == ["backend"] * len(original)  # and each task its family
    assert exported == original


def test_unreachable_database_is_one_line(tmp_path):
    result = run("ls", db_url="postgresql+psycopg://nobody@127.0.0.1:9/none")
    assert_one_line_error(result, "127.0.0.1:9")


def test_a_bad_flag_value_is_one_line_naming_the_flag_exit_2(tmp_path):
    result = run("rollout", "--batch-size", "0", cwd=tmp_path)
    assert result.returncode == 2
    assert_one_line_error(result, "--batch-size", "colbench rollout --help")
    result = run("critic", "fit", "--no-such-flag", cwd=tmp_path)
    assert result.returncode == 2
    assert_one_line_error(result, "--no-such-flag")
    assert not (tmp_path / "colbench.db").exists()  # refused before anything opened the store


# ---------------------------------------------------------------- bad input that once slipped through


@pytest.mark.parametrize("args",
                         [("tasks", "ls", "--limit", "-5"), ("tasks", "ls", "--limit", "0"), ("ls", "--limit", "0"),
                                  ("rollout", "--limit", "0"), ("rollout", "--limit", "-1")])
def test_counts_below_one_are_refused(args, sqlite_url):
    result = run(*args, db_url=sqlite_url)
    assert result.returncode == 2
    assert_one_line_error(result, "--limit")


def test_ls_all_lists_every_row(stocked):
    assert len(json.loads(run("ls", "--limit", "1", "--json", db_url=stocked).stdout)) == 1
    assert len(json.loads(run("ls", "--all", "--json", db_url=stocked).stdout)) == 4


def test_a_file_that_is_not_utf8_names_its_file_and_line(sqlite_url, tmp_path):
    path = tmp_path / "latin1.jsonl"
    good = json.dumps(backend_task(0)).encode()
    path.write_bytes(good + b"\n" + json.dumps(backend_task(1)).encode().replace(b"def", b"d\xe9f", 1) + b"\n")
    assert_one_line_error(run("tasks", "import", str(path), "--family", "backend", "--split", "train",
                              db_url=sqlite_url),
                          f"{path}:2", "not UTF-8", "0xe9")
    with Database(sqlite_url).read() as session:
        assert session.exec(select(TrainingRun)).all() == []


def test_an_empty_import_file_warns(sqlite_url, tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_text("\n")
    result = run("tasks", "import", str(path), "--family", "backend", "--split", "train", db_url=sqlite_url)
    assert result.returncode == 0 and "holds no records" in result.stderr and "warning" in result.stderr


def test_a_read_only_store_is_read_and_a_write_is_refused_as_read_only(stocked, tmp_path):
    """In a folder mounted read-only (bwrap): no -shm file can be made, yet ls, inspect and
    export read it; a command that writes says the store is read-only."""
    if not stocked.startswith("sqlite"):
        pytest.skip("a SQLite file's folder")
    path = Path(stocked.removeprefix("sqlite:///"))
    Database(stocked).engine.dispose()
    for suffix in ("-wal", "-shm"):  # a cleanly closed store leaves none
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    folder = tmp_path / "ro"
    folder.mkdir()
    (folder / "c.db").write_bytes(path.read_bytes())
    url = f"sqlite:///{folder / 'c.db'}"
    env = dict(os.environ, COLUMNS="160", NO_COLOR="1", COLBENCH_DB=url)
    env.pop("COLBENCH_DEBUG", None)

    def read_only(*args: str) -> subprocess.CompletedProcess:
        sandbox = ["bwrap", "--dev-bind", "/", "/", "--ro-bind", str(folder), str(folder)]
        return subprocess.run(sandbox + COLBENCH + list(args), capture_output=True, text=True, env=env, timeout=120)

    listed = read_only("ls", "--json")
    assert listed.returncode == 0 and len(json.loads(listed.stdout)) == 4, listed.stderr
    assert read_only("inspect", "1").returncode == 0
    exported = read_only("export", "--format", "official", "--out", str(tmp_path / "out"))
    assert exported.returncode == 0, exported.stderr
    assert_one_line_error(read_only("rollout", "--engine", "scripted:expert", "--tasks", "backend-lite:train",
                                    "--limit", "1"), "read-only")


def test_db_status_on_a_newer_database_says_so_and_fails(sqlite_url):
    from sqlalchemy import text

    db = Database(sqlite_url)
    with db.engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = 'abc123'"))
    result = run("db", "status", db_url=sqlite_url)
    assert (
        result.returncode != 0
        and "newer than this colbench" in result.stderr
        and "db upgrade" not in result.stdout + result.stderr
    )
    assert json.loads(run("db", "status", "--json", db_url=sqlite_url).stdout)["newer"] is True


def test_training_refused_before_its_run_is_recorded(stocked):
    for args in (("critic", "fit", "--model", "no-such-model"), ("critic", "fit", "--model", "org/not-downloadable"),
                 ("policy", "fit", "--algo", "rft", "--model", "no-such-model"), ("critic", "fit", "--lr", "-1")):
        result = run(*args, "--device", "cpu", db_url=stocked)
        assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr
    with Database(stocked).read() as session:
        assert session.exec(select(TrainingRun)).all() == []


def test_the_store_options_go_anywhere_and_a_file_path_is_a_sqlite_store(tmp_path):
    """`colbench ls --db runs.db` as people type it: after the command, and a plain path."""
    records = [trajectory(backend_task(i), turns=2, reward=1.0) for i in range(2)]
    path = write_jsonl(tmp_path / "offline.jsonl", records)
    (tmp_path / "stores").mkdir()
    imported = run("trajectories", "import", str(path), "--policy", "llama", "--db", "stores/runs.db", cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr
    assert (tmp_path / "stores" / "runs.db").is_file() and not (tmp_path / "colbench.db").exists()
    listed = run("ls", "--json", f"--db={tmp_path / 'stores' / 'runs.db'}")
    assert listed.returncode == 0, listed.stderr
    assert {row["policy"] for row in json.loads(listed.stdout)} == {"llama"}
    assert_one_line_error(run("ls", "--db", cwd=tmp_path), "--db needs a value")


def test_renamed_flags_keep_their_old_names_hidden(stocked):
    """grade --grade-workers, eval --max-k and tasks generate --max-new-tokens match rollout's names;
    the old names still work and are gone from --help."""
    new, old = run("eval", "--tasks", "backend:train", "--max-k", "1", "--json", db_url=stocked), run(
        "eval", "--tasks", "backend:train", "--k", "1", "--json", db_url=stocked
    )
    assert new.returncode == old.returncode == 0, new.stderr + old.stderr
    assert json.loads(new.stdout)[0]["pass_at_k"] == json.loads(old.stdout)[0]["pass_at_k"] == {"1": 0.5}
    helps = {cmd: run(*cmd.split(), "--help").stdout for cmd in ("grade", "eval", "tasks generate")}
    assert "--grade-workers" in helps["grade"] and "--workers" not in helps["grade"]
    assert "--max-k" in helps["eval"] and "--k " not in helps["eval"]
    assert "--max-new-tokens" in helps["tasks generate"] and "--max-tokens" not in helps["tasks generate"]
    for flag in ("--workers", "--grade-workers"):
        graded = run("grade", flag, "1", "--sandbox", "bwrap", "--json", db_url=stocked)
        assert graded.returncode == 0 and json.loads(graded.stdout)["graded"] == 4, graded.stderr


def test_an_empty_eval_names_what_there_is_to_evaluate(stocked):
    from colbench.store.models import Trajectory

    with Database(stocked).write() as session:  # one trajectory as if rolled out again with another seed
        session.get(Trajectory, 1).setting = "seed=5"
    assert_one_line_error(run("eval", "--tasks", "backend:train", "--policy", "nosuch", db_url=stocked),
                          "no graded trajectories on backend:train match --policy 'nosuch'", "llama (3)",
                          "llama [seed=5] (1)")
    assert_one_line_error(run("eval", db_url=stocked), "no graded trajectories on backend:test",
                          "are on backend:train (--tasks)")
