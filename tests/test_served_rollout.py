"""Asynchronous rollouts against a loopback OpenAI-compatible server (policy and simulated
human both served): concurrency really reached and bounded, a slow request holding up only
its own episode, Retry-After honoured, kill -9 and Ctrl-C while requests are in flight."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from sqlmodel import select

from colbench.rollout import run
from colbench.rollout_config import RolloutConfig
from colbench.store import queries
from colbench.store.db import Database
from colbench.store.models import Trajectory, Turn

COLBENCH = [sys.executable, "-m", "colbench.cli.app"]


def served(server, **overrides) -> RolloutConfig:
    options = dict(
        model="policy", engine="openai", base_url=server.base_url, simulator=f"endpoint:{server.base_url}#human",
        tasks="backend:test", limit=4, samples_per_task=3, sandbox="bwrap", max_new_tokens=32,
    )
    return RolloutConfig(**{**options, **overrides})


def first_requests(request) -> bool:
    """The policy's first turn: the system prompt and the task, nothing else yet."""
    return request["model"] == "policy" and len(request["messages"]) == 2


def trajectories(db: Database) -> list[Trajectory]:
    with db.read() as session:
        return list(session.exec(select(Trajectory)))


def test_concurrency_is_reached_and_bounded(openai_server, sqlite_url):
    openai_server.set_delay(lambda request: 0.05)
    db = Database(sqlite_url)
    result = run(db, served(openai_server, concurrency=8))
    assert result.stats.finished == 12 and result.stats.agent_turns == 12 * 10
    # 12 episodes, 8 live at once, each with one request out at a time: exactly 8 in flight at the peak.
    assert openai_server.in_flight_peak == 8

    openai_server.reset_in_flight_peak()
    run(Database(sqlite_url.replace("colbench.db", "again.db")), served(openai_server, concurrency=3))
    assert openai_server.in_flight_peak == 3


def test_a_slow_request_holds_up_only_its_own_episode(openai_server, sqlite_url):
    """One episode's first request takes 3 s; every other episode finishes meanwhile (in
    lock-step each of their turns would have waited for it)."""
    slow_task = []

    def delay(request):
        if first_requests(request) and not slow_task:
            slow_task.append(request["messages"][1]["content"])
        if first_requests(request) and request["messages"][1]["content"] == slow_task[0]:
            return 3.0
        return 0.02

    openai_server.set_delay(delay)
    db = Database(sqlite_url)
    started = time.monotonic()
    run(db, served(openai_server, samples_per_task=1, concurrency=8))
    assert time.monotonic() - started < 3.0 + 2.5
    done = sorted(trajectories(db), key=lambda t: t.finished_at)
    slow, others = done[-1], done[:-1]
    assert all(t.status == "done" for t in done)
    with db.read() as session:
        first = queries.turns_of(session, slow.id)[1]
    assert first.role == "assistant" and first.latency_s >= 3.0
    # Everyone else was done before the slow episode even had its first turn back.
    assert all((slow.finished_at - t.finished_at).total_seconds() > 0.3 for t in others)


def test_retry_after_is_honoured(openai_server, sqlite_url):
    openai_server.fail_next(1, 429, retry_after=1)
    db = Database(sqlite_url)
    result = run(db, served(openai_server, limit=1, samples_per_task=1))
    assert result.stats.finished == 1
    with db.read() as session:
        (trajectory,) = trajectories(db)
        first = queries.turns_of(session, trajectory.id)[1]
    assert 1.0 <= first.latency_s < 5.0  # the SDK waited as the server asked, then tried again
    assert len(openai_server.chat_requests) == 19 + 1  # 10 agent turns, 9 replies, one retry


def _cli(db_url: str, server, *extra: str) -> subprocess.Popen:
    env = dict(os.environ, COLBENCH_DB=db_url)
    args = ["rollout", "--engine", "openai", "--model", "policy", "--base-url", server.base_url,
            "--simulator", f"endpoint:{server.base_url}#human", "--tasks", "backend:test", "--limit", "4", "-k", "3",
            "--sandbox", "bwrap", "--json", *extra]
    return subprocess.Popen(COLBENCH + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def test_kill_9_mid_run_then_rerun_gives_each_trajectory_once(openai_server, sqlite_url):
    openai_server.set_delay(lambda request: 0.02)
    db = Database(sqlite_url)
    process = _cli(sqlite_url, openai_server)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with db.read() as session:
            if len(session.exec(select(Turn).where(Turn.role == "assistant")).all()) >= 20:
                break
        time.sleep(0.05)
    process.kill()
    process.wait()
    with db.read() as session:
        before = {(t.trajectory_id, t.index): t.content for t in session.exec(select(Turn))}
    assert any(t.status == "running" for t in trajectories(db))

    rerun = _cli(sqlite_url, openai_server)
    out, err = rerun.communicate(timeout=120)
    assert rerun.returncode == 0, err
    rows = trajectories(db)
    assert len(rows) == 12 and all(t.status == "done" and t.graded_seq for t in rows)
    assert len({(t.task_id, t.sample_index) for t in rows}) == 12
    with db.read() as session:
        after = {(t.trajectory_id, t.index): t.content for t in session.exec(select(Turn))}
    assert all(after[key] == content for key, content in before.items())  # nothing lost or rewritten
    for row in rows:
        indexes = sorted(index for trajectory_id, index in after if trajectory_id == row.id)
        assert indexes == list(range(20))  # contiguous: opening, 10 agent turns, 9 replies


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_stopping_while_the_server_hangs_takes_under_two_seconds(openai_server, sqlite_url, stop):
    openai_server.set_delay(lambda request: 0.02 if first_requests(request) else 60)
    db = Database(sqlite_url)
    process = _cli(sqlite_url, openai_server, "--request-timeout", "120")
    deadline = time.monotonic() + 60
    def hung() -> int:
        return sum(r["model"] == "human" for r in openai_server.chat_requests)

    while time.monotonic() < deadline and (hung() < 12 or openai_server.in_flight < 12):
        time.sleep(0.05)
    assert hung() == 12 and openai_server.in_flight == 12  # every episode waits on its hung human
    sent = time.monotonic()
    process.send_signal(stop)
    _, err = process.communicate(timeout=30)
    assert time.monotonic() - sent < 2.0
    assert process.returncode == 130
    assert err.strip().splitlines()[-1].startswith("error: interrupted") and "Traceback" not in err, err
    rows = trajectories(db)
    assert rows and "running" not in {t.status for t in rows}  # claims handed back
    with db.read() as session:
        assert len(session.exec(select(Turn).where(Turn.role == "assistant")).all()) == 12  # first turns kept


def test_request_timeout_and_retries_are_flags(openai_server, sqlite_url):
    """A hung server fails the run after --request-timeout x (--retries + 1), with one line."""
    openai_server.set_delay(lambda request: 30)
    started = time.monotonic()
    process = _cli(sqlite_url, openai_server, "--limit", "1", "-k", "1", "--request-timeout", "0.5", "--retries", "1")
    _, err = process.communicate(timeout=60)
    assert process.returncode == 1 and time.monotonic() - started < 20
    assert "timed out after 2 tries" in err.strip().splitlines()[-1], err
    json.dumps(err)  # plain text
