"""Rollouts end to end: real engines, real simulators, the real sandbox, a real database."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from sqlmodel import select

from colbench.engines.openai import OpenAIEngine
from colbench.eval import evaluate
from colbench.families.backend import BackendEnv
from colbench.grading.grader import Grader
from colbench.official import import_tasks, import_trajectories, spec_of
from colbench.protocol import ANSWER_MARKER, MAX_AGENT_TURNS, NO_RESPONSE
from colbench.rollout import Rollout, turn_seed
from colbench.rollout_config import RolloutConfig
from colbench.simulators.rulebased.backend import BuiltinSimulator
from colbench.simulators.endpoint import EndpointSimulator
from colbench.store import queries
from colbench.store.db import Database
from colbench.store.models import Task, TestResult, Trajectory, Turn
from conftest import write_jsonl
from officialdata import backend_task

COLBENCH = [sys.executable, "-m", "colbench.cli.app"]


@pytest.fixture(scope="module")
def env():
    with Grader(sandbox="bwrap", workers=2) as grader:
        yield BackendEnv(grader)


def stored_tasks(db, tmp_path, n=3):
    import_tasks(db, write_jsonl(tmp_path / "tasks.jsonl", [backend_task(i) for i in range(n)]), family="backend",
                 split="test")
    with db.read() as session:
        return list(session.exec(select(Task).order_by(Task.id)))


def scripted_agent(request: dict) -> str:
    """A served 'model' that asks one question, then answers with the right code."""
    messages = request["messages"]
    description = messages[1]["content"]
    number = int(description.split("shop number ")[1].split()[0])
    if sum(m["role"] == "assistant" for m in messages) == 0:
        return "Is the weight in kilograms, and what does express do?"
    return ANSWER_MARKER + "\n```python\n" + backend_task(number)["ground_truth"] + "```"


def test_tiny_model_rollout_writes_every_turn_and_grades(sqlite_url, tmp_path, tiny_engine, env):
    db = Database(sqlite_url)
    tasks = stored_tasks(db, tmp_path, n=2)
    config = RolloutConfig(samples_per_task=2, max_new_tokens=6, batch_size=3)
    stats = Rollout(db, tiny_engine, BuiltinSimulator(), env, config).run(tasks)
    assert (stats.total, stats.finished, stats.graded) == (4, 4, 4)

    with db.read() as session:
        trajectories = session.exec(select(Trajectory)).all()
        assert {(t.task_id, t.sample_index) for t in trajectories} == {(task.id, i) for task in tasks for i in range(2)}
        for trajectory in trajectories:
            turns = queries.turns_of(session, trajectory.id)
            agent = [t for t in turns if t.role == "assistant"]
            human = [t for t in turns if t.role == "user"]
            # A random tiny model never says the marker: 10 agent turns, the last taken as the answer.
            assert trajectory.status == "done" and len(agent) == MAX_AGENT_TURNS
            assert len(human) == MAX_AGENT_TURNS  # the opening plus 9 replies
            assert [t.index for t in turns] == list(range(2 * MAX_AGENT_TURNS))
            assert trajectory.answer == agent[-1].content  # the last reply, exactly as the dialogue keeps it
            for turn in agent:
                assert turn.prompt.startswith("<|im_start|>system") and turn.prompt.endswith("<|im_start|>assistant\n")
                assert turn.completion_tokens >= 1 and turn.logprob_sum < 0
                assert turn.logprob_mean == pytest.approx(turn.logprob_sum / turn.completion_tokens)
            assert agent[3].prompt == tiny_engine.render_prompt(
                [{"role": "system", "content": agent[0].prompt.split("<|im_start|>system\n")[1].split("<|im_end|>")[0]}]
                + [{"role": t.role, "content": t.content} for t in turns[: agent[3].index]]
            )
            assert all(len(t.content) <= 400 for t in human)
            rows = session.exec(select(TestResult).where(TestResult.trajectory_id == trajectory.id)).all()
            assert len(rows) == 10 and trajectory.reward == sum(r.passed for r in rows) / 10
            assert trajectory.graded_seq is not None


def test_the_time_left_counts_the_turns_left_not_the_dialogues_finished(sqlite_url, tmp_path, openai_server, env):
    """Dialogues run side by side and end close together: the count of finished ones says little about the time
    left (it read 13 h for a best-of-8 validation of about 800 turns at 0.2 a second). Once one ends, the estimate
    is the turns the dialogues left will take (as many as the finished ones took, less those the running ones have
    taken) at the turn rate."""
    db = Database(sqlite_url)
    tasks = stored_tasks(db, tmp_path, n=6)
    openai_server.set_responder(scripted_agent)  # every dialogue: two agent turns
    reports = []
    Rollout(db, OpenAIEngine("scripted", openai_server.base_url), BuiltinSimulator(), env,
            RolloutConfig(concurrency=2, batch_size=2), on_progress=lambda *report: reports.append(report)).run(tasks)
    figures = [report[3] for report in reports]
    all_turns = figures[-1]["turns"]
    assert all_turns == 12
    estimates = [f for f in figures if "eta_s" in f]
    assert estimates and all(f.get("eta_at_most_s") is None for f in estimates)
    for f in estimates:  # the scripted agent's turns are known: the estimate of the turns left is exact
        assert f["eta_s"] * f["turns_per_s"] == pytest.approx(all_turns - f["turns"], rel=1e-3), f
    assert figures.index(estimates[0]) > max(i for i, f in enumerate(figures) if "eta_at_most_s" in f)


def test_served_agent_solves_tasks_and_rerun_duplicates_nothing(sqlite_url, tmp_path, openai_server, env):
    db = Database(sqlite_url)
    tasks = stored_tasks(db, tmp_path, n=3)
    openai_server.set_responder(scripted_agent)
    engine = OpenAIEngine("scripted", openai_server.base_url)
    config = RolloutConfig(batch_size=2)
    stats = Rollout(db, engine, BuiltinSimulator(), env, config).run(tasks)
    assert stats.graded == 3 and stats.success_rate == 1.0
    with db.read() as session:
        trajectories = session.exec(select(Trajectory)).all()
        assert all(t.reward == 1.0 and t.success for t in trajectories)
        assert all(len(queries.turns_of(session, t.id)) == 4 for t in trajectories)  # opening, ask, reply, answer
        human_reply = queries.turns_of(session, trajectories[0].id)[2]
        assert human_reply.role == "user" and human_reply.raw and "def " not in human_reply.content
        n_turns = len(session.exec(select(Turn)).all())
        # The server templated the prompts itself (chat API): none is stored as if the policy had read it,
        # so the trainers render the policy's own template, as for an import.
        agent = [t for t in session.exec(select(Turn)).all() if t.role == "assistant"]
        assert agent and all(t.prompt is None and t.prompt_shared is None and not t.token_ids for t in agent)

    again = Rollout(db, engine, BuiltinSimulator(), env, config).run(tasks)
    assert (again.already_done, again.finished, again.agent_turns) == (3, 0, 0)
    with db.read() as session:
        assert len(session.exec(select(Turn)).all()) == n_turns
        assert len(session.exec(select(Trajectory)).all()) == 3


def agent_and_flaky_human(request: dict) -> str:
    """The scripted agent, and a served human model that is down for shop number 1's task."""
    if request["model"] != "human":
        return scripted_agent(request)
    if "shop number 1 " in request["messages"][0]["content"]:
        raise RuntimeError("the human model is down")
    return "Kilograms; express costs one and a half times as much."


def test_simulator_failure_goes_on_with_no_response_and_is_graded(sqlite_url, tmp_path, openai_server, env):
    # As officially: the human's reply becomes "No response.", the dialogue goes on, the trajectory
    # is graded and counted, and the failure is kept on that human turn.
    db = Database(sqlite_url)
    tasks = stored_tasks(db, tmp_path, n=3)
    openai_server.set_responder(agent_and_flaky_human)
    engine = OpenAIEngine("scripted", openai_server.base_url)
    human = EndpointSimulator("human", openai_server.base_url, max_retries=1)
    stats = Rollout(db, engine, human, env, RolloutConfig()).run(tasks)
    assert (stats.finished, stats.graded, stats.no_replies) == (3, 3, 1)
    with db.read() as session:
        for trajectory in session.exec(select(Trajectory)):
            assert trajectory.status == "done" and trajectory.graded_seq is not None
            assert trajectory.reward == 1.0 and trajectory.success and trajectory.failure is None
            reply = queries.turns_of(session, trajectory.id)[2]
            assert reply.role == "user"
            if trajectory.task_id == tasks[1].id:
                assert reply.content == NO_RESPONSE and reply.raw is None
                assert "responder failed: the human model is down" in reply.error
            else:
                assert reply.content.startswith("Kilograms") and reply.error is None
    answering = [r for r in openai_server.chat_requests if r["model"] == "scripted" and len(r["messages"]) > 2]
    assert sum(r["messages"][-1]["content"] == NO_RESPONSE for r in answering) == 1  # the agent was told

    rows = evaluate(db, "backend", "test", record=False)
    assert [(r.n_trajectories, r.simulator_failures) for r in rows] == [(3, 1)]
    cli_env = dict(os.environ, COLBENCH_DB=sqlite_url, COLUMNS="200")
    shown = subprocess.run(COLBENCH + ["eval", "--json"], capture_output=True, text=True, env=cli_env, timeout=120)
    assert shown.returncode == 0, shown.stderr
    (row,) = json.loads(shown.stdout)
    assert (row["n_trajectories"], row["simulator_failures"], row["success"]["mean"]) == (3, 1, 1.0)
    assert row["grading"] == "official"
    table = subprocess.run(COLBENCH + ["eval"], capture_output=True, text=True, env=cli_env, timeout=120)
    assert "sim. failures" in table.stdout and "No response." in table.stdout


def _rollout_cli(db_url: str, model_dir, *extra: str) -> subprocess.Popen:
    env = dict(os.environ, COLBENCH_DB=db_url)
    args = ["rollout", "--model", str(model_dir), "--tasks", "backend:test", "--limit", "3", "--max-new-tokens", "4",
            "--batch-size", "2", "--sandbox", "bwrap", "--json", *extra]
    return subprocess.Popen(COLBENCH + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def test_the_default_engine_on_a_cpu_is_ct2_sampling_the_policy_itself(sqlite_url, tmp_path, tiny_model_dir,
                                                                       tiny_engine):
    db = Database(sqlite_url)
    stored_tasks(db, tmp_path, n=3)
    out, err = _rollout_cli(sqlite_url, tiny_model_dir, "--device", "cpu").communicate(timeout=300)
    fast = json.loads(out)
    assert (fast["engine"], fast["finished"]) == ("ct2", 3), err
    # The same policy as the transformers engine's: its stored turns are the policy's own
    # samples, with the log-probs transformers gives them.
    assert fast["policy"] == tiny_engine.model_ref
    with db.read() as session:
        turns = [
            t
            for trajectory in session.exec(select(Trajectory))
            for t in queries.turns_of(session, trajectory.id)
            if t.role == "assistant"
        ]
    forced = tiny_engine.logprobs([t.prompt for t in turns], [t.token_ids for t in turns])
    assert len(turns) == 3 * MAX_AGENT_TURNS
    assert all(abs(t.logprob_sum - sum(f)) <= 1e-3 * len(f) for t, f in zip(turns, forced))
    # The run records what computed the policy's numbers here: CTranslate2's GEMM backends, as it states them.
    from colbench.engines.ct2_cpu import ct2_backend
    from colbench.store.models import RolloutRun

    with db.read() as session:
        arithmetic = session.exec(select(RolloutRun)).one().config["arithmetic"]
    assert arithmetic == {"compute_type": "float32", "device": "cpu", "ct2_cpu": ct2_backend().summary(),
                          **ct2_backend().as_dict()}
    # So an hf run of the same policy continues it: the first sample of each task is done.
    out, err = _rollout_cli(sqlite_url, tiny_model_dir, "--engine", "hf", "-k", "2").communicate(timeout=300)
    exact = json.loads(out)
    assert (exact["engine"], exact["policy"], exact["already_done"], exact["finished"]) == (
        "hf",
        fast["policy"],
        3,
        3
    ), err


def test_kill_9_mid_rollout_loses_no_turn_and_rerun_completes(sqlite_url, tmp_path, tiny_model_dir):
    db = Database(sqlite_url)
    stored_tasks(db, tmp_path, n=3)
    process = _rollout_cli(sqlite_url, tiny_model_dir, "-k", "2")
    deadline = time.time() + 120
    while time.time() < deadline:  # wait until some turns are stored, then kill hard
        with db.read() as session:  # some turns stored and a trajectory under way: kill it mid-dialogue
            stored = len(session.exec(select(Turn).where(Turn.role == "assistant")).all())
            if stored >= 8 and session.exec(select(Trajectory).where(Trajectory.status == "running")).first():
                break
        time.sleep(0.2)
    process.send_signal(signal.SIGKILL)
    process.wait()
    with db.read() as session:
        before = {(t.trajectory_id, t.index): t.content for t in session.exec(select(Turn))}
        assert any(t.status == "running" for t in session.exec(select(Trajectory)))

    rerun = _rollout_cli(sqlite_url, tiny_model_dir, "-k", "2")
    out, err = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, err
    with db.read() as session:
        trajectories = session.exec(select(Trajectory)).all()
        after = {(t.trajectory_id, t.index): t.content for t in session.exec(select(Turn))}
    assert len(trajectories) == 6 and all(t.status == "done" and t.graded_seq for t in trajectories)
    assert all(after[key] == content for key, content in before.items())  # nothing lost or rewritten
    per_trajectory = {}
    for trajectory_id, index in after:
        per_trajectory.setdefault(trajectory_id, []).append(index)
    assert all(sorted(v) == list(range(len(v))) for v in per_trajectory.values())  # no gaps, no doubles


def test_two_processes_share_one_rollout_without_overlap(sqlite_url, tmp_path, tiny_model_dir):
    db = Database(sqlite_url)
    stored_tasks(db, tmp_path, n=3)
    first, second = (_rollout_cli(sqlite_url, tiny_model_dir, "-k", "2") for _ in range(2))
    outputs = [json.loads(p.communicate(timeout=300)[0]) for p in (first, second)]
    assert first.returncode == 0 and second.returncode == 0
    assert sum(o["finished"] for o in outputs) == 6  # each trajectory finished by exactly one process
    with db.read() as session:
        trajectories = session.exec(select(Trajectory)).all()
        turns = session.exec(select(Turn)).all()
    assert len(trajectories) == 6 and all(t.status == "done" for t in trajectories)
    assert len({(t.trajectory_id, t.index) for t in turns}) == len(turns) == 6 * 2 * MAX_AGENT_TURNS


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_or_sigterm_releases_claims_keeps_turns_and_says_one_line(stop, sqlite_url, tmp_path, tiny_model_dir):
    db = Database(sqlite_url)
    stored_tasks(db, tmp_path, n=3)
    process = _rollout_cli(sqlite_url, tiny_model_dir)
    deadline = time.time() + 120
    while time.time() < deadline:
        with db.read() as session:
            if len(session.exec(select(Turn).where(Turn.role == "assistant")).all()) >= 4:
                break
        time.sleep(0.2)
    process.send_signal(stop)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith(("Loading", "Writing"))]
    assert lines and lines[-1].startswith("error: interrupted") and "Traceback" not in err, err
    with db.read() as session:
        statuses = {t.status for t in session.exec(select(Trajectory))}
        kept = len(session.exec(select(Turn).where(Turn.role == "assistant")).all())
    assert "running" not in statuses and kept >= 4  # claims handed back, turns kept
    rerun = _rollout_cli(sqlite_url, tiny_model_dir)
    rerun.communicate(timeout=300)
    with db.read() as session:
        assert all(t.status == "done" for t in session.exec(select(Trajectory)))


def test_best_of_n_keeps_the_candidate_the_critic_ranks_highest(sqlite_url, tmp_path, tiny_model_dir, tiny_engine, env):
    from colbench.engines.base import SamplingParams
    from colbench.training.critic import CriticConfig, fit_critic
    from colbench.training.scoring import CriticModel
    from officialdata import trajectory

    db = Database(sqlite_url)
    training = [trajectory(backend_task(i), turns, reward) for i in range(3) for turns, reward in ((2, 1.0), (1, 0.0))]
    import_trajectories(db, write_jsonl(tmp_path / "train.jsonl", training))
    fitted = fit_critic(db, CriticConfig(epochs=1, batch_size=4, max_len=160, lora_rank=4, device="cpu"),
                        base_model=str(tiny_model_dir))
    critic = CriticModel.from_checkpoint(db, f"ckpt:{fitted.checkpoint_id}", device="cpu")
    tasks = stored_tasks(db, tmp_path, n=2)[-2:]  # two of the tasks the critic trained on
    config = RolloutConfig(max_new_tokens=5, candidates=4, rerank_critic=f"ckpt:{fitted.checkpoint_id}")
    Rollout(db, tiny_engine, BuiltinSimulator(), env, config, critic=critic).run(tasks)

    # Replay the first turns: both episodes' first turns make one batch, seeded by the first's.
    with db.read() as session:
        trajectories = sorted(
            session.exec(select(Trajectory).where(Trajectory.setting == config.setting())),
            key=lambda t: (t.task_id, t.sample_index)
        )
        kept = [queries.turns_of(session, t.id)[1].content for t in trajectories]
    specs = {task.id: spec_of(task) for task in tasks}
    episodes = [BackendEnv.episode_class(t.id, specs[t.task_id]) for t in trajectories]
    seed = turn_seed(config.seed, trajectories[0].id, 0)
    generations = tiny_engine.generate([e.conversation() for e in episodes],
                                       SamplingParams(temperature=1.0, max_new_tokens=5, n=4, seed=seed))
    for episode, generation, text in zip(episodes, generations, kept):
        scores = critic.score_candidates(critic.context(generation.prompt_text, episode.task.hidden).ids,
                                         [s.token_ids for s in generation.samples])
        best = max(range(4), key=lambda i: scores[i].advantage)
        assert text == generation.samples[best].text
        assert len({s.text for s in generation.samples}) > 1  # there was a choice to make
