"""Frontend rollouts end to end: a served agent, the real browser, the built-in frontend human."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlmodel import select

from colbench.engines.openai import OpenAIEngine
from colbench.families.frontend import FrontendEnv
from colbench.official import import_tasks, spec_of
from colbench.protocol import ANSWER_MARKER
from colbench.render.browser import Renderer
from colbench.render.storage import ScreenshotStore
from colbench.rollout import Rollout
from colbench.rollout_config import RolloutConfig
from colbench.similarity import make_similarity
from colbench.simulators.rulebased.frontend import FrontendBuiltinSimulator
from colbench.store import queries
from colbench.store.db import Database
from colbench.store.models import Screenshot, Task, Trajectory
from conftest import write_jsonl

PAGES = {
    "bakery": """<html><head><script src="https://cdn.tailwindcss.com"></script></head>
<body class="bg-white"><header class="bg-blue-900 text-white p-8"><h1 class="text-4xl font-bold">Rosa's \
Bakery</h1></header>
<section class="p-8 grid grid-cols-3 gap-4"><div class="bg-yellow-100 p-4">Sourdough</div><div class="bg-yellow-100 \
p-4">Croissant</div>
<div class="bg-yellow-100 p-4">Rye</div></section><footer class="bg-gray-800 text-gray-100 p-4">Open 7am to \
3pm</footer></body></html>""",
    "clinic": """<html><head><script src="https://cdn.tailwindcss.com"></script></head>
<body class="bg-gray-100"><nav class="bg-green-700 text-white p-6 text-2xl">Smile Dental</nav>
<main class="p-10"><h2 class="text-3xl text-green-900">Book a check-up</h2><p class="mt-4 text-lg">Family dentistry \
since 1998.</p>
<button class="mt-6 bg-green-600 text-white px-6 py-3 rounded">Book now</button></main></body></html>""",
}
FIRST_TRY = "<html><body><h1>My page</h1></body></html>"


def served_designer(request: dict) -> str:
    """Shows a rough page first, then answers with the page the human has in mind."""
    messages = request["messages"]
    name = "bakery" if "bakery" in messages[1]["content"] else "clinic"
    if sum(m["role"] == "assistant" for m in messages) == 0:
        return f"A simple start. OUTPUT: {FIRST_TRY}"
    return f"{ANSWER_MARKER}\n{PAGES[name]}"


@pytest.fixture(scope="module")
def renderer():
    with Renderer(pool_size=2) as r:
        yield r


def bakery_and_clinic(db, tmp_path) -> list:
    """The bakery and the clinic pages as stored frontend test tasks, in that order."""
    records = [
        {"problem_description": "A page for a small family bakery.", "ground_truth": PAGES["bakery"]},
        {"problem_description": "A page for a dental clinic.", "ground_truth": PAGES["clinic"]},
    ]
    import_tasks(db, write_jsonl(tmp_path / "front.jsonl", records), family="frontend", split="test")
    with db.read() as session:
        return list(session.exec(select(Task).order_by(Task.id)))


def test_frontend_rollout_renders_each_turn_and_scores_the_final_page(sqlite_url, tmp_path, openai_server, renderer):
    db = Database(sqlite_url)
    tasks = bakery_and_clinic(db, tmp_path)
    openai_server.set_responder(served_designer)
    env = FrontendEnv(renderer, make_similarity(None), ScreenshotStore(tmp_path / "screenshots"))
    progress = []
    stats = Rollout(db, OpenAIEngine("designer", openai_server.base_url), FrontendBuiltinSimulator(), env,
                    RolloutConfig(),
                    on_progress=lambda *report: progress.append(report)).run(tasks)
    assert stats.graded == 2 and stats.no_replies == 0
    # The bar moves with every turn (not only when a whole page is graded) and reports similarity, not success.
    stage, done, total, figures = progress[-1]
    assert (done, total, figures["turns"], figures["graded"]) == (2, 2, 4, 2) and figures["tokens_per_s"] > 0
    assert figures["similarity"] == pytest.approx(1.0) and "success" not in figures
    # The first report comes before any turn, once the total is known (a piped progress line shows 0/2 at once).
    assert progress[0][1:3] == (0, 2) and progress[0][3]["turns"] == 0
    first_turn = next(report for report in progress if report[3]["turns"] >= 1)
    assert first_turn[1] == 0 and first_turn[3]["graded"] == 0
    # Before any dialogue ends, a bound on the time left: every dialogue left at most 10 turns at the rate so far.
    first = first_turn[3]
    assert first["eta_at_most_s"] == pytest.approx((2 * 10 - first["turns"]) / first["turns_per_s"], rel=0.05)
    assert "eta_at_most_s" not in figures  # once dialogues end, the bar's own estimate takes over

    with db.read() as session:
        for trajectory in session.exec(select(Trajectory)):
            assert trajectory.reward == pytest.approx(1.0) and trajectory.reward_metric == "ssim-edges"
            assert trajectory.success is None  # frontend has a similarity, not a pass/fail
            turns = queries.turns_of(session, trajectory.id)
            assert [t.role for t in turns] == ["user", "assistant", "user", "assistant"]
            first, reply, final = turns[1], turns[2], turns[3]
            assert first.screenshot and final.screenshot and first.screenshot != final.screenshot
            assert final.screenshot == trajectory.screenshot
            assert 0 < len(reply.content) <= 1000 and "<" not in reply.content  # differences, never HTML
            shot = session.get(Screenshot, first.screenshot)
            png = Path(shot.path).read_bytes()
            assert png.startswith(b"\x89PNG") and shot.width == 1280


def test_wrong_page_scores_lower_than_the_right_one(tmp_path, renderer):
    from colbench.tasks.spec import TaskSpec

    env = FrontendEnv(renderer, make_similarity(None), ScreenshotStore(tmp_path))
    task = TaskSpec(family="frontend", problem_description="bakery", ground_truth=PAGES["bakery"])
    right = env.grade(task, f"{ANSWER_MARKER} {PAGES['bakery']}").result()
    wrong = env.grade(task, f"{ANSWER_MARKER} {PAGES['clinic']}").result()
    empty = env.grade(task, "I could not do it").result()
    assert right.reward == pytest.approx(1.0) and wrong.reward < 0.8 and empty.reward == 0.0
    assert empty.error == "no page in the answer"


def test_frontend_rollout_cli_on_builtin_tasks(sqlite_url, tiny_model_dir, tmp_path):
    env = dict(os.environ, COLBENCH_DB=sqlite_url)
    args = ["rollout", "--tasks", "frontend:test", "--limit", "1", "--model", str(tiny_model_dir), "--max-new-tokens",
            "4", "--json"]
    result = subprocess.run([sys.executable, "-m", "colbench.cli.app", *args], capture_output=True, text=True, env=env,
                            timeout=600)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert (
        summary["graded"] == 1 and summary["simulator"] == "builtin-frontend" and summary["graded_by"] == "ssim-edges"
    )
    with Database(sqlite_url).read() as session:
        (trajectory,) = session.exec(select(Trajectory)).all()
    assert trajectory.reward == 0.0 and trajectory.failure.startswith(
        "grading: no page"
    )  # a random model writes no page


def bakery_task(db, tmp_path) -> list:
    """The bakery page as the one stored frontend test task."""
    import_tasks(db,
                 write_jsonl(tmp_path / "f.jsonl",
                             [{"problem_description": "A page for a small family bakery.",
                               "ground_truth": PAGES["bakery"]}]), family="frontend", split="test")
    with db.read() as session:
        return list(session.exec(select(Task)))


def test_inspect_shows_page_paths_and_writes_side_by_side(sqlite_url, tmp_path, openai_server, renderer):
    db = Database(sqlite_url)
    tasks = bakery_task(db, tmp_path)
    openai_server.set_responder(served_designer)
    env = FrontendEnv(renderer, make_similarity(None), ScreenshotStore(tmp_path / "screenshots"))
    Rollout(db, OpenAIEngine("designer", openai_server.base_url), FrontendBuiltinSimulator(), env,
            RolloutConfig()).run(tasks)
    out = tmp_path / "pair.png"
    cli = [sys.executable, "-m", "colbench.cli.app", "inspect", "1", "--side-by-side", str(out)]
    result = subprocess.run(cli, capture_output=True, text=True,
                            env=dict(os.environ, COLBENCH_DB=sqlite_url, COLUMNS="200"), timeout=300)
    assert result.returncode == 0, result.stderr
    assert (
        "ssim-edges" in result.stdout
        and "final page" in result.stdout
        and str(tmp_path / "screenshots") in result.stdout
    )
    from PIL import Image

    with Image.open(out) as pair:
        assert pair.width > 2 * 1280 - 100  # agent and reference side by side
    strip = tmp_path / "strip.png"
    result = subprocess.run(cli[:-2] + ["--side-by-side", str(strip), "--filmstrip"], capture_output=True, text=True,
                            env=dict(os.environ, COLBENCH_DB=sqlite_url), timeout=300)
    assert result.returncode == 0, result.stderr
    with Image.open(strip) as frames:
        assert frames.width == 3 * 480 + 2 * 16  # the agent's two pages, then the reference


def test_critic_trains_on_frontend_pairs_a_tenth_apart(sqlite_url, tmp_path, tiny_model_dir):
    from colbench.official import import_trajectories
    from colbench.store.models import Lineage
    from colbench.training.critic import CriticConfig, fit_critic
    from officialdata import frontend_task, trajectory

    db = Database(sqlite_url)
    records = [
        trajectory(frontend_task(i), turns, reward)
        for i in range(3)
        for turns, reward in ((1, 0.9), (2, 0.85), (3, 0.4))
    ]
    import_trajectories(db, write_jsonl(tmp_path / "pages.jsonl", records), policy="designer")
    result = fit_critic(db,
                        CriticConfig(family="frontend", epochs=1, batch_size=4, max_len=160, lora_rank=4,
                                     heldout_fraction=0.0, device="cpu"), base_model=str(tiny_model_dir))
    with db.read() as session:
        used = {row.trajectory_id for row in session.exec(select(Lineage).where(Lineage.run_id == result.run_id))}
    assert len(used) == 9  # per task: 0.9 and 0.85 each pair with 0.4, but not with each other
    assert result.metrics["pairs"] == 6


@pytest.mark.parametrize("algo", ["rft", "mtdpo"])
def test_policy_trains_on_frontend_trajectories(sqlite_url, tmp_path, tiny_model_dir, algo):
    from colbench.official import import_trajectories
    from colbench.store.models import Checkpoint, Lineage
    from colbench.training.policy import fit_policy
    from colbench.training.trainer import PolicyConfig
    from officialdata import frontend_task, trajectory

    db = Database(sqlite_url)
    records = [trajectory(frontend_task(i), turns, reward) for i in range(3) for turns, reward in ((1, 0.9), (2, 0.3))]
    import_trajectories(db, write_jsonl(tmp_path / "pages.jsonl", records), policy="designer")
    config = PolicyConfig(family="frontend", batch_size=4, max_len=192, lora_rank=4, device="cpu", lr=1e-3)
    result = fit_policy(db, config, algo, base_model=str(tiny_model_dir))
    with db.read() as session:
        assert session.get(Checkpoint, result.checkpoint_id).kind == "policy"
        used = {row.trajectory_id for row in session.exec(select(Lineage).where(Lineage.run_id == result.run_id))}
        rewards = {session.get(Trajectory, t).reward for t in used}
    # rft: the best page per task at or above the threshold (0.8); mtdpo: pairs 0.1 apart use both.
    assert rewards == ({0.9} if algo == "rft" else {0.9, 0.3})


def page_then_plain_answer(request: dict) -> str:
    """Shows the page asked for in turn 1 (the bakery) or never shows one (the clinic); then
    checks in, and answers without HTML."""
    messages = request["messages"]
    bakery = "bakery" in messages[1]["content"]
    turn = sum(m["role"] == "assistant" for m in messages)
    if turn == 0:
        return f"Here is my first version. OUTPUT: {PAGES['bakery']}" if bakery else "What colours do you like?"
    if turn == 1:
        return "Is this what you had in mind?"
    return f"{ANSWER_MARKER} looks good"


def _stop(db, where: str) -> None:
    """Put the store back as a process killed at `where` would have left it."""
    from sqlmodel import delete

    from colbench.store.models import Turn

    with db.write() as session:
        for trajectory in session.exec(select(Trajectory)):
            trajectory.graded_seq = trajectory.reward = trajectory.screenshot = trajectory.failure = None
            if where == "before the second turn":  # turns from the second agent turn on are lost
                session.exec(delete(Turn).where(Turn.trajectory_id == trajectory.id, Turn.index >= 3))
                trajectory.status, trajectory.answer, trajectory.worker, trajectory.heartbeat_at = (
                    "running", None, None, None
                )
            session.add(trajectory)


@pytest.mark.parametrize("stopped", [None, "before grading", "before the second turn"])
def test_reward_is_the_last_page_shown_in_any_turn(sqlite_url, tmp_path, openai_server, renderer, stopped):
    """As officially: an answer with no HTML keeps the page of an earlier turn; no page at all is black.
    Also when the episode is rebuilt from its stored turns (a process stopped before grading, or mid-dialogue)."""
    from colbench.simulators.rulebased.frontend import ALL_GOOD

    db = Database(sqlite_url)
    tasks = bakery_and_clinic(db, tmp_path)
    openai_server.set_responder(page_then_plain_answer)
    engine = OpenAIEngine("designer", openai_server.base_url)

    def new_env():  # a fresh process: nothing rendered in memory
        return FrontendEnv(renderer, make_similarity(None), ScreenshotStore(tmp_path / "screenshots"))

    stats = Rollout(db, engine, FrontendBuiltinSimulator(), new_env(), RolloutConfig()).run(tasks)
    assert stats.graded == 2
    if stopped:
        _stop(db, stopped)
        again = Rollout(db, engine, FrontendBuiltinSimulator(), new_env(), RolloutConfig()).run(tasks)
        assert again.graded == 2

    env = new_env()
    black = env.similarity.score(renderer.black(), env.reference(spec_of(tasks[1])).png_bytes)
    with db.read() as session:
        bakery, clinic = (session.exec(select(Trajectory).where(Trajectory.task_id == t.id)).one() for t in tasks)
        turns = queries.turns_of(session, bakery.id)
        assert [t.role for t in turns] == ["user", "assistant", "user", "assistant", "user", "assistant"]
        assert turns[1].screenshot and not turns[3].screenshot and not turns[5].screenshot
        # The human answers each turn on that turn's page (re-rendered after a resume), and, as
        # officially, is shown no page for a turn without HTML: it describes the page it wants.
        assert turns[2].content == ALL_GOOD
        assert turns[4].content != ALL_GOOD and "Rosa's Bakery" in turns[4].content
        assert bakery.answer.strip() == "looks good" and bakery.reward == pytest.approx(1.0)
        assert bakery.screenshot == turns[1].screenshot and bakery.failure is None
        assert clinic.reward == pytest.approx(black) and clinic.failure == "grading: no page in any turn"
        assert session.get(Screenshot, clinic.screenshot) is not None


def thinks_then_shows(request: dict) -> str:
    """The agent's thinking before OUTPUT: holds a secret the human must never see."""
    if request["model"] == "vision-human":
        return "Make the header dark blue, please."
    if sum(m["role"] == "assistant" for m in request["messages"]) == 0:
        return f"XYZZY-SECRET-PLAN: start rough, fix later. OUTPUT: A first version. {FIRST_TRY}"
    return f"{ANSWER_MARKER}\n{PAGES['bakery']}"


def test_thinking_before_output_never_reaches_the_simulator(sqlite_url, tmp_path, openai_server, renderer):
    from colbench.simulators.vision import VisionEndpointSimulator

    db = Database(sqlite_url)
    tasks = bakery_task(db, tmp_path)
    openai_server.set_responder(thinks_then_shows)
    human = VisionEndpointSimulator("vision-human", openai_server.base_url, max_retries=0)
    env = FrontendEnv(renderer, make_similarity(None), ScreenshotStore(tmp_path / "screenshots"))
    stats = Rollout(db, OpenAIEngine("designer", openai_server.base_url), human, env, RolloutConfig()).run(tasks)
    assert stats.graded == 1

    seen_by_human = [r for r in openai_server.chat_requests if r["model"] == "vision-human"]
    assert len(seen_by_human) == 1
    text = " ".join(
        part["text"] for m in seen_by_human[0]["messages"] for part in m["content"] if part["type"] == "text"
    )
    assert "A first version." in text and "XYZZY" not in text
    later_agent_prompts = [r for r in openai_server.chat_requests if r["model"] == "designer"][1:]
    assert later_agent_prompts and "XYZZY" not in json.dumps(later_agent_prompts)
    with db.read() as session:
        (trajectory,) = session.exec(select(Trajectory)).all()
        first = queries.turns_of(session, trajectory.id)[1]
    assert "XYZZY" in first.raw and "XYZZY" not in first.content  # the store keeps the raw generation
