"""`colbench view` in a real browser (Playwright driving Debian's Chromium): pages load, filters
work, a dialogue renders with its critic scores, tests and per-turn pages beside the reference,
hostile model output stays text, and no request leaves loopback.

COLBENCH_DOCS=1 also writes the README's screenshots (docs/viewer-*.png) from this browser."""
from __future__ import annotations

import io
import math
import os
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from sqlmodel import select

from colbench.official import import_tasks
from colbench.render.browser import CHROMIUM, CHROMIUM_ARGS
from colbench.render.storage import ScreenshotStore
from colbench.store import queries
from colbench.store.db import Database
from colbench.store.models import Checkpoint, CriticScore, Screenshot, Task, TrainingRun, Trajectory, Turn
from conftest import command_line, write_jsonl

HOSTILE = "<script>window.pwned = 1</script><img src='http://203.0.113.9/steal.png'> I WANT TO ANSWER: def f(): pass"
DOCS = Path(__file__).resolve().parent.parent / "docs"
PAGE = "<html><body style='background:#123'><h1 style='color:#fff'>Rosa's Bakery</h1></body></html>"


@pytest.fixture
def store(sqlite_url, tmp_path, capsys, monkeypatch):
    """Two named scripted rollouts, a critic's scores and per-step curve, a hostile turn, and a
    frontend dialogue whose agent turn showed a page."""
    colbench = command_line(sqlite_url, capsys, monkeypatch)
    for engine, name in (("scripted:expert", "expert"), ("scripted:mixed@0.5", "mixed")):
        code, _, err = colbench("rollout", "--engine", engine, "--tasks", "backend-lite:test", "--limit", "6",
                                "-k", "2", "--sandbox", "bwrap", "--name", name)
        assert code == 0, err
    db = Database(sqlite_url)
    import_tasks(db,
                 write_jsonl(tmp_path / "front.jsonl",
                             [{"problem_description": "A bakery page.", "ground_truth": PAGE}]),
                 family="frontend", split="test")
    from PIL import Image

    image = io.BytesIO()
    Image.new("RGB", (640, 400), (200, 40, 40)).save(image, format="PNG")
    sha, path = ScreenshotStore(db.folder / "screenshots").put(image.getvalue())
    with db.write() as session:
        run = TrainingRun(kind="critic", base_model="smollm2", config={"beta": 0.1}, status="done", name="critic-a")
        session.add(run)
        session.flush()
        checkpoint = Checkpoint(run_id=run.id, kind="critic", base_model="smollm2", path=str(tmp_path / "ckpt"))
        session.add(checkpoint)
        session.flush()
        curve = [(s, 1 + s // 20,
                  {"loss": 0.69 * math.exp(-s / 25) + 0.04 * math.sin(1.7 * s),
                   "lr": 1e-5 * math.cos(s / 40 * math.pi / 2)})
                 for s in range(1, 41)]  # the shape of a run: a falling, noisy loss under a cosine schedule
        queries.add_training_steps(session, run.id, curve)
        mixed, clean = session.exec(
            select(Trajectory).where(Trajectory.policy == "scripted:mixed@0.5").order_by(Trajectory.id)
        ).all()[:2]
        for trajectory, score in ((mixed, 0.4321), (clean, -0.2)):
            agent_turns = session.exec(select(Turn).where(Turn.trajectory_id == trajectory.id,
                                                          Turn.role == "assistant").order_by(Turn.index)).all()
            for k, turn in enumerate(agent_turns):
                session.add(CriticScore(turn_id=turn.id, checkpoint_id=checkpoint.id, score=score + 0.3 * k))
        agent_turn = session.exec(select(Turn).where(Turn.trajectory_id == mixed.id,
                                                     Turn.role == "assistant").order_by(Turn.index)).first()
        agent_turn.content = HOSTILE
        front_task = session.exec(select(Task).where(Task.family == "frontend")).one()
        session.add(Screenshot(sha256=sha, path=str(path), width=640, height=400))
        page_dialogue = Trajectory(task_id=front_task.id, policy="designer", simulator="builtin", status="done",
                                   reward=0.61,
                                   reward_metric="ssim-edges", screenshot=sha, answer=PAGE)
        session.add(page_dialogue)
        session.flush()
        session.add(Turn(trajectory_id=page_dialogue.id, index=0, role="user", content="A bakery page."))
        session.add(Turn(trajectory_id=page_dialogue.id, index=1, role="assistant", content=f"OUTPUT: {PAGE}",
                         screenshot=sha))
        ids = {"mixed": mixed.id, "clean": clean.id, "front": page_dialogue.id}
    return db, ids


@pytest.fixture
def served(store):
    from colbench.viewer import make_server

    db, ids = store
    server = make_server(db, 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", ids
    server.shutdown()
    server.server_close()
    server.viewer.close()


@pytest.fixture
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        # The renderer's flags, with names still resolving to nothing but loopback itself.
        args = [a for a in CHROMIUM_ARGS if not a.startswith("--host-resolver-rules")] + [
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"
        ]
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=args)
        yield chromium
        chromium.close()


def click_and_wait(page, selector):
    # A locator's all_inner_texts() does not wait: read the old page and a loaded machine fails the test.
    with page.expect_navigation():
        page.click(selector)


def test_the_viewer_in_a_browser(served, browser):
    base, ids = served
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    requests, alerts = [], []
    page.on("request", lambda request: requests.append(request.url))
    page.on("dialog", lambda dialog: (alerts.append(dialog.message), dialog.dismiss()))

    page.goto(base + "/")
    names = page.locator("#runs tbody tr td:nth-child(2)").all_inner_texts()
    assert {"expert", "mixed", "critic-a"} <= set(names)
    page.select_option("select[name=kind]", "train")
    click_and_wait(page, "button[type=submit]")
    assert page.locator("#runs tbody tr td:first-child").all_inner_texts() == ["train:1"]

    page.goto(base + "/run/critic-a")
    assert page.locator("#curves tbody tr").count() == 2 and page.locator("#curves svg polyline").count() == 2
    page.goto(base + "/run/mixed")
    click_and_wait(page, "text=its trajectories")
    runs = page.locator("#trajectories tbody tr td:nth-child(3)").all_inner_texts()
    assert len(runs) == 12 and set(runs) == {"rollout:2"}
    page.fill("input[name=min_reward]", "1")
    click_and_wait(page, "button[type=submit]")
    rewards = page.locator("#trajectories tbody tr td:nth-child(8)").all_inner_texts()
    assert rewards and all(float(r) >= 1.0 for r in rewards) and len(rewards) < 12
    assert "run=rollout%3A2" in page.url or "run=rollout:2" in page.url

    page.goto(f"{base}/trajectory/{ids['mixed']}")
    text = page.inner_text("main")
    assert "critic ckpt:1 +0.4321" in text and "human · task description" in text and "agent · turn 1" in text
    assert "<script>window.pwned = 1</script>" in text  # shown as text...
    assert page.evaluate("window.pwned") is None and alerts == []  # ...never run
    assert page.locator("#tests tbody tr").count() == 10 and "graded answer" in text
    if os.environ.get("COLBENCH_DOCS"):
        DOCS.mkdir(exist_ok=True)
        page.goto(f"{base}/trajectory/{ids['clean']}")
        page.screenshot(path=str(DOCS / "viewer-dialogue.png"))
        page.goto(base + "/run/critic-a")
        page.screenshot(path=str(DOCS / "viewer-run.png"))

    page.goto(f"{base}/trajectory/{ids['front']}")
    images = page.locator(".pages img")
    assert images.count() == 2
    page.wait_for_function("[...document.querySelectorAll('.pages img')].every(i => i.complete && i.naturalWidth > 0)")
    widths = page.evaluate("[...document.querySelectorAll('.pages img')].map(i => i.naturalWidth)")
    assert widths == [640, 1280]  # the page the turn showed, and the reference rendered by the browser
    if os.environ.get("COLBENCH_DOCS"):
        page.goto(base + "/")
        page.screenshot(path=str(DOCS / "viewer-runs.png"))

    assert requests and all(url.startswith(base + "/") for url in requests), [
        u for u in requests if not u.startswith(base)
    ]


def test_the_viewer_only_reads_and_only_on_loopback(served):
    base, _ = served
    assert base.startswith("http://127.0.0.1:")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(urllib.request.Request(base + "/", data=b"x", method="POST"))
    assert refused.value.code == 405
    with urllib.request.urlopen(base + "/trajectory/1") as response:
        policy = response.headers["Content-Security-Policy"]
    assert "default-src 'none'" in policy and "img-src 'self'" in policy
    for missing in ("/trajectory/99999", "/run/nosuch", "/screenshot/" + "0" * 64, "/reference/1.png"):
        with pytest.raises(urllib.error.HTTPError) as absent:
            urllib.request.urlopen(base + missing)
        assert absent.value.code == 404, missing


def test_colbench_view_serves_until_ctrl_c(sqlite_url, tmp_path):
    """The command itself: it says where it listens, serves, and stops cleanly on SIGINT or SIGTERM."""
    import signal
    import subprocess
    import sys
    import time

    for stop in (signal.SIGINT, signal.SIGTERM):
        process = subprocess.Popen([sys.executable, "-m", "colbench.cli.app", "--db", sqlite_url, "view", "--port",
                                    "0"],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
        line = process.stdout.readline()
        assert line.startswith("colbench view: http://127.0.0.1:"), line + process.stderr.read()
        address = line.split()[2]
        with urllib.request.urlopen(address) as response:
            assert response.status == 200 and b"runs" in response.read()
        process.send_signal(stop)
        out, err = process.communicate(timeout=20)
        assert process.returncode == 0 and "stopped" in out and err == "", (stop, out, err)
        time.sleep(0.1)
