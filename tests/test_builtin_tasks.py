"""The built-in task sets: loaded as package data, split 5:1, stored idempotently, and valid."""
from __future__ import annotations

import time
from importlib import resources

import pytest

from colbench.grading.sandboxes.bwrap import BwrapBackend
from colbench.store import queries
from colbench.families import family
from colbench.families.builtin import builtin_files, builtin_tasks, ensure_builtin_tasks, load_builtin
from colbench.authoring.validate import RULES, validate_tasks


def test_files_are_package_data_and_the_split_is_one_in_six():
    files = builtin_files("backend")
    assert [f.name for f in files] == sorted(f.name for f in files)
    on_disk = sorted(
        p.name for p in resources.files("colbench.tasks.builtin").iterdir() if p.name.startswith("backend_")
    )
    assert [f.name for f in files] == on_disk
    loaded = load_builtin("backend")
    assert len(loaded) >= 300
    test = [t for t in loaded if t.spec.split == "test"]
    assert len(test) == len(loaded) // 6
    if len(loaded) == 300:
        assert len(test) == 50 and len(loaded) - len(test) == 250
    assert [family("backend").builtin_split(i) for i in range(7)] == ["train"] * 5 + ["test", "train"]
    assert all(t.spec.source == "builtin" and t.spec.naive_solution for t in loaded)
    assert len(builtin_tasks("backend", split="test")) == len(test)
    assert builtin_tasks("frontend") == [] or all(s.family == "frontend" for s in builtin_tasks("frontend"))


def test_ensure_builtin_tasks_is_idempotent(db):
    total = len(load_builtin("backend"))
    assert ensure_builtin_tasks(db, "backend") == total
    assert ensure_builtin_tasks(db, "backend") == 0
    with db.read() as session:
        test = queries.tasks_in(session, family="backend", split="test")
        train = queries.tasks_in(session, family="backend", split="train")
    assert len(test) == total // 6 and len(train) == total - total // 6
    assert all(t.source == "builtin" and t.naive_solution and t.extra["builtin"].startswith("backend_") for t in test)


@pytest.mark.skipif(BwrapBackend.check() is not None, reason=f"bwrap unusable: {BwrapBackend.check()}")
def test_every_builtin_backend_task_passes_validation():
    loaded = load_builtin("backend")
    started = time.monotonic()
    report = validate_tasks(
        [t.spec for t in loaded], where=[t.where for t in loaded], sandbox="bwrap", exact_tests=10, require_naive=True
    )
    share = report.naive_pass_share
    print(
        f"\nbuilt-in backend: {len(loaded)} tasks validated in {time.monotonic() - started:.1f} s; naive solution"
        f" passes every test on {report.naive_passing} of {report.naive_checked} ({100 * (share or 0):.1f}%)"
    )
    failures = [f"{c.label}: {f.rule}: {f.message}" for c in report.failed for f in c.failures]
    assert not failures, "\n".join(failures)
    assert all(report.counts()[rule]["failed"] == 0 for rule in RULES)
    assert report.naive_checked == len(loaded)
    assert len(loaded) >= 300


def test_every_builtin_frontend_task_renders_offline_and_matches_itself():
    loaded = load_builtin("frontend")
    report = validate_tasks([t.spec for t in loaded], where=[t.where for t in loaded])
    failures = [f"{c.label}: {f.rule}: {f.message}" for c in report.failed for f in c.failures]
    assert not failures, "\n".join(failures)
    counts = report.counts()
    assert counts["fits the protocol"]["passed"] == counts["deterministic"]["passed"] == len(loaded) >= 60


def test_frontend_validation_catches_a_page_that_fetches_and_one_that_moves():
    from colbench.tasks.spec import TaskSpec

    fetching = "<html><body><iframe src='https://example.org/embed'></iframe><h1>Hi</h1></body></html>"
    # A random colour over the whole page: two renders match by chance once in 16 million (a clock-driven
    # offset could land on the same pixel twice, since both renders take about as long).
    moving = (
        "<html><body style='margin:0'><div id='t' style='height:400px'>x</div><script>"
        "const [r, g, b] = crypto.getRandomValues(new Uint8Array(3));"
        "document.getElementById('t').style.background = `rgb(${r},${g},${b})`</script></body></html>"
    )
    specs = [
        TaskSpec(family="frontend", problem_description=f"page {i}", ground_truth=page)
        for i, page in enumerate([fetching, moving])
    ]
    report = validate_tasks(specs)
    by_rule = [{f.rule for f in check.failures} for check in report.checks]
    assert "fits the protocol" in by_rule[0] and "deterministic" in by_rule[1]
