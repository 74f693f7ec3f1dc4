"""A plugin package extends colbench without editing it (tests/plugin_package: a task family, an engine and a policy
algorithm, each one module, found through their entry points). Every command runs in its own colbench process with the
package on its path, as an installed plugin would be; this process's registries never see it.

The secret-word family runs end to end: rollout with the plugin engine and the family's own simulated human, and with
an LLM simulator over the loopback server (told the family's hidden information by the generic brief); eval, inspect
and export; a critic and the plugin algorithm trained on its dialogues. The family contract (tests/test_families.py)
runs over it too."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
PLUGIN = HERE / "plugin_package"
COLBENCH = [sys.executable, "-m", "colbench.cli.app"]
TINY = ["--lora-rank", "4", "--max-len", "160", "--epochs", "1", "--lr", "1e-3", "--device", "cpu"]


def plugged_env(db_url: str) -> dict:
    path = os.pathsep.join(p for p in (str(PLUGIN), os.environ.get("PYTHONPATH", "")) if p)
    return dict(os.environ, PYTHONPATH=path, COLBENCH_DB=db_url, COLUMNS="400")  # help lines unwrapped


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
                          capture_output=True, text=True, env=dict(os.environ, COLBENCH_DB="sqlite:///unused.db"),
                          cwd=PLUGIN.parent)
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


def test_the_family_contract_holds_for_the_plugin_family():
    """tests/test_families.py, run over every registered family with the plugin installed."""
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "secret-word",
                           str(HERE / "test_families.py")], capture_output=True, text=True,
                          env=plugged_env("sqlite:///unused.db"), cwd=HERE.parent, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:]
    assert " passed" in done.stdout and " failed" not in done.stdout
