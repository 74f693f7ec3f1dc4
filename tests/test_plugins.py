"""A plugin package extends colbench without editing it (tests/plugin_package: colbench_secret_word, a task family,
an engine, a turn credit and a policy algorithm; colbench_arith_chat, the family graded by hidden tests and the engine
of docs/plugins.md), each one module, found through their entry points. conftest.py installs both packages, in this
process and in every process it starts, so the whole suite runs with them; the commands here run in processes of
their own, as a user's would.

The secret-word family runs end to end: rollout with the plugin engine and the family's own simulated human, and with
an LLM simulator over the loopback server (told the family's hidden information by the generic brief); eval, inspect
and export; a critic and the plugin algorithm trained on its dialogues. arith-chat, graded in the sandbox, runs the
chain a user meets: its tasks listed on a fresh store, rollout, grade, eval, export, the export imported again, a
critic. The family contract (tests/test_families.py) runs over both, as over every registered family."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from colbench import families

HERE = Path(__file__).resolve().parent
PLUGIN = HERE / "plugin_package"
COLBENCH = [sys.executable, "-m", "colbench.cli.app"]
TINY = ["--lora-rank", "4", "--max-len", "160", "--epochs", "1", "--lr", "1e-3", "--device", "cpu"]


def plugged_env(db_url: str) -> dict:
    path = os.pathsep.join(p for p in (str(PLUGIN), os.environ.get("PYTHONPATH", "")) if p)
    return dict(os.environ, PYTHONPATH=path, COLBENCH_DB=db_url, COLUMNS="400")  # help lines unwrapped


def unplugged_env(db_url: str) -> dict:
    """This process's environment less the plugin packages: colbench as shipped."""
    path = os.pathsep.join(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(PLUGIN))
    return dict(os.environ, PYTHONPATH=path, COLBENCH_DB=db_url)


@pytest.fixture
def colbench(tmp_path):
    """Run `colbench ARGS` with the plugin installed; (exit code, stdout parsed when --json, stderr)."""
    env = plugged_env(f"sqlite:///{tmp_path / 'plugged.db'}")

    def run(*args, timeout=600):
        done = subprocess.run([*COLBENCH, *args], capture_output=True, text=True, env=env, cwd=tmp_path,
                              timeout=timeout)
        out = json.loads(done.stdout) if "--json" in args and done.returncode == 0 else done.stdout
        return done.returncode, out, done.stderr

    return run


def test_the_plugin_is_offered_beside_the_shipped_choices(colbench):
    code, out, err = colbench("rollout", "--help")
    assert code == 0, err
    assert "secret-guesser" in out and "secret-word:train" in out  # its engine, and its family's tasks
    code, out, err = colbench("policy", "fit", "--help")
    assert code == 0 and "rft-strict" in out and "secret-word" in out  # its algorithm, and its family's data
    # And without the package, none of it exists: an unknown engine is one line.
    done = subprocess.run([*COLBENCH, "rollout", "--engine", "secret-guesser", "--tasks", "backend:test"],
                          capture_output=True, text=True, env=unplugged_env("sqlite:///unused.db"), cwd=PLUGIN.parent)
    assert done.returncode != 0 and "got 'secret-guesser'" in done.stderr and "scripted" in done.stderr


def test_the_secret_word_family_end_to_end(colbench, tiny_model_dir, tmp_path):
    # Rollouts: the plugin engine asks and says the word; its blurting mode answers at once with a guess.
    code, asked, err = colbench("rollout", "--tasks", "secret-word:train", "--engine", "secret-guesser", "--json")
    assert code == 0 and asked["finished"] == 10 and asked["success_rate"] == 1.0, err
    code, blurted, err = colbench("rollout", "--tasks", "secret-word:train", "--engine", "secret-guesser:blurt",
                                  "--json")
    assert code == 0 and blurted["success_rate"] == 0.0, err
    # eval reports the family's headline, success, per policy.
    code, results, err = colbench("eval", "--tasks", "secret-word:train", "--json")
    assert code == 0, err
    success = {r["policy"]: r["success"]["mean"] for r in results}
    assert success == {"secret-guesser:ask": 1.0, "secret-guesser:blurt": 0.0}
    # inspect shows a dialogue: the question, the person's reply, the answer.
    code, shown, err = colbench("inspect", "1", "--json")
    assert code == 0, err
    said = [turn["content"] for turn in shown["turns"]]
    assert said[1] == "What is the secret word?" and said[2].startswith("The secret word is ")
    assert said[3] == f"I WANT TO ANSWER: {said[2].split()[-1].rstrip('.')}"
    # export writes the official format, its reward included.
    code, _, err = colbench("export", "--out", str(tmp_path / "exported"), "--family", "secret-word", "--split",
                            "train")
    assert code == 0, err
    exported = [json.loads(line) for line in (tmp_path / "exported" / "trajectories.jsonl").read_text().splitlines()]
    assert len(exported) == 20 and {r["reward"] for r in exported} == {0.0, 1.0}
    # A critic on its pairs (a success against a failure of each task), then the plugin algorithm on its successes.
    code, critic, err = colbench("critic", "fit", "--family", "secret-word", "--model", str(tiny_model_dir), *TINY,
                                 "--json")
    assert code == 0, err
    assert critic["metrics"]["pairs"] == 10 and critic["checkpoint"].startswith("ckpt:")
    code, policy, err = colbench("policy", "fit", "--algo", "rft-strict", "--family", "secret-word", "--model",
                                 str(tiny_model_dir), *TINY, "--json")
    assert code == 0, err
    assert policy["metrics"]["trajectories"] == 10  # the ten that said the word
    code, runs, err = colbench("runs", "ls", "--json")
    assert code == 0 and {"policy:rft-strict", "critic"} <= {r.get("what") for r in runs}, (runs, err)


def test_a_model_plays_the_secret_word_human_from_the_generic_brief(colbench, openai_server):
    def person(request):
        prompt = request["messages"][-1]["content"]
        hidden = prompt.split("HIDDEN INFORMATION (only you can see this):\n", 1)[1].split("\n", 1)[0]
        return hidden  # "The secret word is <w>."

    openai_server.set_responder(person)
    code, stats, err = colbench("rollout", "--tasks", "secret-word:test", "--engine", "secret-guesser", "--simulator",
                                f"endpoint:{openai_server.base_url}#person", "--json")
    assert code == 0 and stats["success_rate"] == 1.0 and stats["no_replies"] == 0, err
    prompt = openai_server.requests[0]["messages"][-1]["content"]
    assert "I am thinking of a secret word" in prompt and "What is the secret word?" in prompt


def test_the_family_contract_runs_over_the_plugin_families():
    """tests/test_families.py runs over every registered family of this process: the plugins' among them."""
    assert {"secret-word", "brevity", "arith-chat"} <= set(families.names())
    assert families.names()[:2] == ("backend", "frontend")


def test_the_arith_chat_family_graded_by_tests_end_to_end(colbench, tiny_model_dir, tmp_path):
    # A fresh store lists the built-in tasks, split by the family's own rule: one in three is a test task.
    code, listed, err = colbench("tasks", "ls", "--family", "arith-chat", "--json")
    assert code == 0, err
    assert [t["split"] for t in listed] == ["train", "train", "test"] * 2 and {t["tests"] for t in listed} == {3}
    code, listed, err = colbench("tasks", "ls", "--all", "--json")
    assert code == 0 and {"backend", "frontend", "arith-chat", "secret-word"} <= {t["family"] for t in listed}, err
    # Rollouts graded by the task's tests in the sandbox: asking for the number solves every task, guessing none.
    code, asked, err = colbench("rollout", "--tasks", "arith-chat:train", "--engine", "arith-solver", "--sandbox",
                                "bwrap", "-k", "2", "--json")
    assert code == 0 and asked["finished"] == 8 and asked["success_rate"] == 1.0, err
    assert asked["graded_by"] == "bwrap"
    code, guessed, err = colbench("rollout", "--tasks", "arith-chat:train", "--engine", "arith-solver:guess",
                                  "--sandbox", "bwrap", "-k", "2", "--json")
    assert code == 0 and guessed["success_rate"] == 0.0, err
    code, _, err = colbench("rollout", "--tasks", "arith-chat:test", "--engine", "arith-solver", "--sandbox", "bwrap",
                            "--json")
    assert code == 0, err  # the test split holds the family's test tasks
    # grade re-grades the family's answers in the sandbox, as backend's; a family that cannot is refused in one line.
    code, graded, err = colbench("grade", "--sandbox", "bwrap", "--json")
    assert code == 0, err
    assert graded["families"]["arith-chat"]["graded"] == 18 and graded["families"]["backend"]["graded"] == 0
    assert graded["families"]["arith-chat"]["success_rate"] == pytest.approx(10 / 18)
    code, _, err = colbench("grade", "--family", "frontend")
    assert code != 0 and len(err.strip().splitlines()) == 1 and "frontend family does not re-grade" in err
    # eval reports success per policy; the tests' outcomes are stored per trajectory.
    code, results, err = colbench("eval", "--tasks", "arith-chat:train", "--json")
    assert code == 0, err
    assert {r["policy"]: r["success"]["mean"] for r in results} == {"arith-solver:ask": 1.0, "arith-solver:guess": 0.0}
    # The export names its family, so importing it again needs no --family, though backend claims records with tests.
    out = tmp_path / "exported"
    code, _, err = colbench("export", "--out", str(out), "--family", "arith-chat", "--split", "train")
    assert code == 0, err
    exported = [json.loads(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]
    assert len(exported) == 16 and {r["task"]["family"] for r in exported} == {"arith-chat"}
    code, imported, err = colbench("--db", f"sqlite:///{tmp_path / 'again.db'}", "trajectories", "import",
                                   str(out / "trajectories.jsonl"), "--json")
    assert code == 0 and imported["added"] == 8, err  # a rule-following engine's two samples are one dialogue
    unnamed = tmp_path / "unnamed.jsonl"
    unnamed.write_text(json.dumps(dict(exported[0], task={k: v for k, v in exported[0]["task"].items()
                                                             if k != "family"})) + "\n")
    code, _, err = colbench("--db", f"sqlite:///{tmp_path / 'again.db'}", "trajectories", "import", str(unnamed))
    assert code != 0 and "backend, arith-chat claim this task record: name its family (--family)" in err
    # A critic on its pairs: each task's success against its failure.
    code, critic, err = colbench("critic", "fit", "--family", "arith-chat", "--model", str(tiny_model_dir), *TINY,
                                 "--json")
    assert code == 0, err
    assert critic["metrics"]["pairs"] > 0 and critic["checkpoint"].startswith("ckpt:")


def test_an_empty_split_says_the_familys_rule(sqlite_url, monkeypatch):
    from colbench.store.db import Database
    from colbench.wiring import select_tasks

    arith = families.family("arith-chat")
    monkeypatch.setattr(type(arith), "test_every", 7)  # more than its 6 tasks: none is a test task
    with pytest.raises(ValueError) as err:
        select_tasks(Database(sqlite_url), "arith-chat:test", None)
    assert str(err.value) == ("no arith-chat tasks in the test split (built-in task k of arith-chat (from 0, across its"
                              " files in name order) is a test task when k % 7 == 6, else train); import some with"
                              " `colbench tasks import`")
