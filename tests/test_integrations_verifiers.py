"""colbench.integrations.verifiers: verifiers' own evaluation loop (``Environment.evaluate_sync`` through its OpenAI
chat client) against the loopback OpenAI-compatible server, on backend-lite with the built-in simulated human and the
bwrap sandbox; then ``colbench rollout`` holds the same dialogues with the same server, and each reward verifiers
reports must be the one colbench's own rollout graded.
"""
from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("verifiers")

QUESTION = "What rate should I apply? How should I round?"


def scripted_policy(tasks: dict):
    """A policy that thinks, asks one question, then answers: the right function for the first task, one with a
    wrong constant for the others (so the rewards differ between tasks)."""
    first = min(tasks)
    answers = {spec.problem_description: spec.ground_truth if task_id == first else spec.ground_truth.replace(
        "100", "90") for task_id, spec in tasks.items()}

    def respond(request):
        messages = request["messages"]
        if len(messages) == 2:  # the system prompt and the human's opening
            return "I need two details. OUTPUT: " + QUESTION
        return "I WANT TO ANSWER:\n" + answers[messages[1]["content"]]

    return respond


def test_verifiers_evaluation_rewards_are_colbenchs(openai_server, bwrap, tmp_path, monkeypatch):
    from verifiers.types import ClientConfig

    from colbench import protocol, rollout
    from colbench.integrations.verifiers import ColBenchEnv
    from colbench.rollout_config import RolloutConfig
    from colbench.store import queries
    from colbench.store.db import Database

    vf_url, rollout_url = f"sqlite:///{tmp_path / 'vf.db'}", f"sqlite:///{tmp_path / 'rollout.db'}"
    env = ColBenchEnv("backend-lite:train", db=vf_url, limit=3, sandbox=bwrap, record=True, policy="vf:scripted")
    openai_server.set_responder(scripted_policy(env.bench.tasks))
    monkeypatch.setenv("LOOPBACK_API_KEY", "unused")
    try:
        results = env.evaluate_sync(ClientConfig(api_base_url=openai_server.base_url, api_key_var="LOOPBACK_API_KEY"),
                                    model="policy", num_examples=3, rollouts_per_example=1)
    finally:
        env.close()
    outputs = results["outputs"]
    assert [o.get("error") for o in outputs] == [None] * 3
    by_task = {int(o["info"]["task_id"]): o["reward"] for o in outputs}
    assert sorted(by_task) == env.bench.task_ids

    # The same dialogues through colbench's normal path: a rollout of the same served policy, graded as ever.
    rollout.run(Database(rollout_url), RolloutConfig(
        model="policy", engine="openai", base_url=openai_server.base_url, simulator="builtin",
        tasks="backend-lite:train", limit=3, samples_per_task=1, sandbox=bwrap))

    def stored(url):
        db = Database(url)
        with db.read() as session:
            found = queries.find_trajectories(session, queries.TrajectoryFilter())
            return {task.id: (t.reward, [(turn.role, turn.content) for turn in queries.turns_of(session, t.id)])
                    for t, task, _ in found}

    graded, recorded = stored(rollout_url), stored(vf_url)
    assert by_task == {task_id: reward for task_id, (reward, _) in graded.items()}
    assert recorded == graded  # the dialogues verifiers held, turn by turn, are the rollout's; so are the grades
    first = min(by_task)
    assert by_task[first] == 1.0 and all(reward < 1.0 for task_id, reward in by_task.items() if task_id != first)
    # The human was asked (the thinking before OUTPUT: never reached it) and answered with the hidden details.
    dialogue = graded[first][1]
    assert [role for role, _ in dialogue] == ["user", "assistant", "user", "assistant"]
    assert dialogue[1][1] == " " + QUESTION and dialogue[2][1] != protocol.NO_RESPONSE


def test_without_verifiers_the_integration_is_refused_in_one_line():
    code = ("import sys; sys.modules['verifiers'] = None\n"
            "from colbench.integrations import MissingIntegration\n"
            "try:\n    import colbench.integrations.verifiers\n"
            "except MissingIntegration as err:\n    print(str(err))\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert len(lines) == 1 and "verifiers" in lines[0] and "pip install 'colbench[integrations]'" in lines[0]
