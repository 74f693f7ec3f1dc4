"""colbench.integrations.verifiers: verifiers' own evaluation loop (``Environment.evaluate_sync`` through its OpenAI
chat client) against the loopback OpenAI-compatible server, on backend-lite with the built-in simulated human and the
bwrap sandbox; then ``colbench rollout`` holds the same dialogues with the same server, and each reward verifiers
reports must be the one colbench's own rollout graded. The same for the frontend family, its pages rendered in the
real browser and scored against the reference.
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


def stored(url: str) -> dict[int, tuple[float, list[tuple[str, str]]]]:
    """A store's dialogues: task id → (reward, the turns as (role, content))."""
    from colbench.store import queries
    from colbench.store.db import Database

    with Database(url).read() as session:
        found = queries.find_trajectories(session, queries.TrajectoryFilter())
        return {task.id: (t.reward, [(turn.role, turn.content) for turn in queries.turns_of(session, t.id)])
                for t, task, _ in found}


def test_verifiers_evaluation_rewards_are_colbenchs(openai_server, bwrap, tmp_path, monkeypatch):
    from verifiers.types import ClientConfig

    from colbench import protocol, rollout
    from colbench.integrations.verifiers import ColBenchEnv
    from colbench.rollout_config import RolloutConfig
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


def test_frontend_pages_are_rendered_and_scored_as_a_rollout_scores_them(openai_server, tmp_path, monkeypatch):
    """The frontend family through verifiers: each shown page is rendered in the real browser (its screenshot is
    the turn's), the final page scored against the reference; the right page scores 1, the other less, and a
    `colbench rollout` of the same served designer stores the same dialogues and scores."""
    from verifiers.types import ClientConfig

    from colbench import rollout
    from colbench.integrations.verifiers import ColBenchEnv
    from colbench.official import import_tasks
    from colbench.rollout_config import RolloutConfig
    from colbench.store import queries
    from colbench.store.db import Database
    from colbench.store.models import Screenshot
    from conftest import write_jsonl
    from test_frontend_rollout import FIRST_TRY, PAGES

    pages = tmp_path / "front.jsonl"
    write_jsonl(pages, [{"problem_description": "A page for a small family bakery.", "ground_truth": PAGES["bakery"]},
                        {"problem_description": "A page for a dental clinic.", "ground_truth": PAGES["clinic"]}])
    vf_url, rollout_url = f"sqlite:///{tmp_path / 'vf.db'}", f"sqlite:///{tmp_path / 'rollout.db'}"
    for url in (vf_url, rollout_url):
        import_tasks(Database(url), pages, family="frontend", split="test")

    def designer(request):
        """A rough page first, then the bakery's page whatever was asked: right for one task, wrong for the other."""
        if not any(m["role"] == "assistant" for m in request["messages"]):
            return f"A simple start. OUTPUT: {FIRST_TRY}"
        return "I WANT TO ANSWER:\n" + PAGES["bakery"]

    openai_server.set_responder(designer)
    monkeypatch.setenv("LOOPBACK_API_KEY", "unused")
    env = ColBenchEnv("frontend:test", db=vf_url, limit=2, record=True, policy="vf:designer")
    try:
        results = env.evaluate_sync(ClientConfig(api_base_url=openai_server.base_url, api_key_var="LOOPBACK_API_KEY"),
                                    model="designer", num_examples=2, rollouts_per_example=1)
    finally:
        env.close()
    outputs = results["outputs"]
    assert [o.get("error") for o in outputs] == [None] * 2
    by_task = {int(o["info"]["task_id"]): o["reward"] for o in outputs}
    named = {env.bench.tasks[task_id].problem_description: task_id for task_id in by_task}
    bakery, clinic = named["A page for a small family bakery."], named["A page for a dental clinic."]
    assert by_task[bakery] == pytest.approx(1.0) and by_task[clinic] < 0.8  # the two imported tasks, in order

    rollout.run(Database(rollout_url), RolloutConfig(model="designer", engine="openai", base_url=openai_server.base_url,
                                                     tasks="frontend:test", limit=2, samples_per_task=1))
    graded, recorded = stored(rollout_url), stored(vf_url)
    assert {task_id: reward for task_id, (reward, _) in recorded.items()} == pytest.approx(by_task)
    assert {task_id: reward for task_id, (reward, _) in graded.items()} == pytest.approx(by_task)
    assert {k: turns for k, (_, turns) in recorded.items()} == {k: turns for k, (_, turns) in graded.items()}
    # Each agent turn's page was rendered: two screenshots a dialogue, PNGs on disk, the rough one unlike the final.
    with Database(vf_url).read() as session:
        for trajectory, task, _ in queries.find_trajectories(session, queries.TrajectoryFilter()):
            turns = queries.turns_of(session, trajectory.id)
            first, final = [session.get(Screenshot, turn.screenshot) for turn in turns if turn.role == "assistant"]
            assert first is not None and final is not None and first.sha256 != final.sha256, task.problem_description
            assert (tmp_path / final.path).read_bytes().startswith(b"\x89PNG")  # beside the store
