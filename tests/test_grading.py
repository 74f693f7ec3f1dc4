"""Grading in real sandboxes (bwrap and Docker, see plugins/sandboxes.py): the verdicts,
and what each backend sets up on the host. Hostile answers: test_sandbox_attacks.py.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from colbench.grading.grader import Grader, SandboxUnavailable
from colbench.grading.sandboxes import cgroups
from colbench.grading.sandboxes.bwrap import BwrapBackend
from colbench.tasks.spec import TaskSpec
from gradingcases import ADD, ADD_ANSWER, BENIGN, backend_task, rows

NO_BWRAP = BwrapBackend.check()


# Strict grading: the module semantics these verdicts were written for (the official
# grading's outcomes have their own tests, test_grading_differential.py).
@pytest.fixture(scope="module")
def grader(sandbox):
    with Grader(sandbox=sandbox, workers=2, test_timeout_s=1.0, grading="strict") as grader:
        yield grader


@pytest.fixture(scope="module")
def bwrap_grader():
    if NO_BWRAP:
        pytest.skip(f"bwrap unusable: {NO_BWRAP}")
    with Grader(sandbox="bwrap", workers=2, test_timeout_s=1.0, grading="strict") as grader:
        yield grader


# ------------------------------------------------------------------ verdicts

def test_backend_is_resolved(grader, sandbox):
    assert grader.backend == sandbox


def test_correct_answer_passes_with_exact_rows(grader):
    (report,) = grader.grade([(ADD, ADD_ANSWER)])
    assert report.success and report.fraction_passed == 1.0 and report.error is None
    assert [t.name for t in report.tests] == [f"test{i}" for i in range(1, 11)]  # test10 last
    first = report.tests[0]
    assert (first.call, first.expected, first.actual, first.passed, first.error) == ("add(1, 3)", "4", "4", True, None)
    assert all(0 <= t.duration_s < 1.0 for t in report.tests)


def test_incorrect_and_partially_correct_answers(grader):
    wrong, partial = grader.grade([
        (ADD, "def add(a, b):\n    return a * b"),
        (ADD, "def add(a, b):\n    if a % 3 == 0:\n        raise KeyError(a)\n    return a + b if a < 8 else a - b"),
    ])
    assert wrong.fraction_passed == 0.0 and not wrong.success
    assert rows(wrong)[1] == ("test2", "8", "12", False, None)
    assert [t.passed for t in partial.tests] == [True, True, False, True, True, False, True, False, False, False]
    assert partial.fraction_passed == 0.5 and partial.error is None
    assert rows(partial)[2] == ("test3", "12", None, False, "KeyError: 3")
    assert rows(partial)[7] == ("test8", "32", "-16", False, None)


def test_fences_are_stripped_and_task_order_is_natural(grader):
    shuffled = TaskSpec("backend", "d", ADD.ground_truth,
                        {"test10": "add(1, 1)", "test2": "add(2, 2)", "test1": "add(0, 0)"})
    answer = "Here it is:\n```py\ndef add(a, b):\n    return a + b\n```\nDone."
    (report,) = grader.grade([(shuffled, answer)])
    assert [t.name for t in report.tests] == ["test1", "test2", "test10"]
    assert report.success and report.grading == "strict"


def test_syntax_error_is_a_task_error(grader):
    (report,) = grader.grade([(ADD, "def add(a, b)\n    return a + b")])
    assert report.error.startswith("syntax error: ") and report.fraction_passed == 0.0
    assert all(t.error == report.error and t.actual is None for t in report.tests)


def test_reference_output_none_never_passes(grader):
    task = backend_task("def f(x):\n    return None if x == 0 else x\n", ["f(0)", "f(2)"])
    (report,) = grader.grade([(task, "def f(x):\n    return None if x == 0 else x")])
    assert rows(report) == [
        ("test1", "None", "None", False, "reference output is None"),
        ("test2", "2", "2", True, None),
    ]
    assert report.fraction_passed == 0.5 and not report.success


def test_builtin_equality_semantics_in_the_sandbox(grader):
    task = backend_task(
        """
        def f(kind):
            return {"num": 1.0, "dict": {"a": 1, "b": 2}, "set": {1, 2}, "tuple": (1, 2), "nan": float("nan")}[kind]
        """,
        ["f('num')", "f('dict')", "f('set')", "f('tuple')", "f('nan')"],
    )
    answer = """
def f(kind):
    return {"num": True, "dict": {"b": 2, "a": 1}, "set": frozenset({2, 1}), "tuple": [1, 2], "nan": float("nan")}[kind]
"""
    (report,) = grader.grade([(task, answer)])
    assert [t.passed for t in report.tests] == [True, True, True, False, False]
    assert [t.expected for t in report.tests] == ["1", "{'a': 1, 'b': 2}", "{1, 2}", "(1, 2)", "nan"]


def test_runtime_errors_are_one_short_line(grader):
    task = backend_task("def f(x):\n    return x\n", ["f(1)", "f(2)"])
    (report,) = grader.grade(
        [(task, "def f(x):\n    if x == 1:\n        return undefined_name\n    raise ValueError('bad\\nvalue ' * 100)")]
    )
    assert report.tests[0].error == "NameError: name 'undefined_name' is not defined"
    assert report.tests[1].error.startswith("ValueError: bad value bad value")
    assert "\n" not in report.tests[1].error and len(report.tests[1].error) <= 200


def test_large_outputs_travel_as_digests(grader):
    task = backend_task("def f(n):\n    return list(range(n))\n", ["f(100_000)", "f(3)"])
    (report,) = grader.grade([(task, "def f(n):\n    return [i for i in range(n)]")])
    assert report.success
    assert report.tests[0].expected.startswith("<sha256 ") and report.tests[0].expected.endswith(
        f" of {len(repr(list(range(100_000))))} chars>"
    )
    assert report.tests[1].expected == "[0, 1, 2]"


def test_reference_runs_once_per_task(grader):
    task = backend_task("def g():\n    return 7\n", ["g()"], "cached")
    first = grader.submit(task, "def g(): return 7")
    cached = grader._reference_runs[task.content_hash]
    second = grader.submit(task, "def g(): return 8")
    assert grader._reference_runs[task.content_hash] is cached
    assert first.result().success and not second.result().success


def test_submit_returns_futures(grader):
    futures = [grader.submit(task, answer) for task, answer in BENIGN * 3]
    assert all(f.result(timeout=60).success for f in futures)


# ------------------------------------------------------------------ what graded code may import

LIBRARIES = r"""
import errno, os, sys

def probe(what):
    if what == "preloaded":  # before this code imports anything: the server did (it names numpy and pandas)
        return sorted(name for name in ("numpy", "pandas") if name in sys.modules)
    if what == "numpy":  # BLAS and LAPACK through Debian's alternatives
        import numpy as np
        return [round(float(np.linalg.det(np.array([[2.0, 1.0], [1.0, 3.0]]))), 9), np.__file__]
    if what == "pandas":
        import pandas as pd
        return int(pd.DataFrame({"a": [1, 2, 3]}).a.sum())
    if what == "zones":
        import pytz, dateutil.tz, zoneinfo
        return [str(pytz.timezone("Europe/Paris")), dateutil.tz.gettz("Asia/Tokyo") is not None, str(zoneinfo.ZoneInfo("UTC"))]
    if what == "write":
        import numpy
        try:
            open(numpy.__file__, "a").close()
        except OSError as error:
            return errno.errorcode[error.errno]
        return "written"
    if what == "env":
        return dict(os.environ)
    if what == "path":
        return [path for path in sys.path if "packages" in path]
    outcomes = {}
    for name in what.split():
        try:
            __import__(name)
            outcomes[name] = "imported"
        except ImportError as error:
            outcomes[name] = type(error).__name__
    return outcomes
"""  # noqa: E501 (a line of the code above, which the sandbox runs as given)
LIBRARY_CALLS = {
    "preloaded": "probe('preloaded')",
    "numpy": "probe('numpy')",
    "pandas": "probe('pandas')",
    "zones": "probe('zones')",
    "write": "probe('write')",
    "env": "probe('env')",
    "path": "probe('path')",
    # in the host's dist-packages (which bwrap shows), but not offered
    "others": "probe('yaml apt cryptography six')",
}


def test_graded_code_imports_the_offered_libraries_and_nothing_else_of_the_host(grader):
    import ast

    from colbench.grading.runner import LIBRARY_PATH
    from colbench.grading.sandboxes.base import sandbox_env

    task = backend_task("def probe(what):\n    return 0\n", list(LIBRARY_CALLS.values()), "libraries")
    (report,) = grader.grade([(task, LIBRARIES)])
    found = {
        name: ast.literal_eval(test.actual) if test.actual else test.error
        for name, test in zip(LIBRARY_CALLS, report.tests)
    }
    assert found["preloaded"] == ["numpy", "pandas"]  # so importing them costs no test any time
    assert found["numpy"] == [5, f"{LIBRARY_PATH}/numpy/__init__.py"]
    assert found["pandas"] == 6
    assert found["zones"] == ["Europe/Paris", 1, "UTC"]
    assert found["write"] in ("EACCES", "EROFS")  # not the sandbox's file, on a read-only mount
    # Only what we set, and what the interpreter (LC_CTYPE), bwrap (PWD) or Docker (HOSTNAME, HOME) add.
    env = found["env"]
    assert {name: env[name] for name in env if name not in ("LC_CTYPE", "PWD", "HOSTNAME", "HOME")} == sandbox_env()
    assert found["path"] == []
    assert found["others"] == {"yaml": "ModuleNotFoundError", "apt": "ModuleNotFoundError",
                               "cryptography": "ModuleNotFoundError",
                               "six": "imported"}


def test_unknown_sandbox_and_missing_sandbox_messages(monkeypatch):
    with pytest.raises(ValueError):
        Grader(sandbox="chroot")
    from colbench.grading import sandboxes

    monkeypatch.setattr(sandboxes.DockerBackend, "check", staticmethod(lambda: "no engine"))
    monkeypatch.setattr(sandboxes.BwrapBackend, "check", staticmethod(lambda: "bwrap is not installed"))
    with pytest.raises(SandboxUnavailable, match="install bubblewrap .* --sandbox none"):
        Grader(sandbox="auto")


def test_docker_without_engine_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    with pytest.raises(SandboxUnavailable, match="--sandbox docker is unavailable: no Docker engine answers"):
        Grader(sandbox="docker")


def test_auto_picks_bwrap_when_no_docker_engine(monkeypatch, tmp_path):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    with Grader(sandbox="auto", workers=1) as grader:
        assert grader.backend == "bwrap"  # no engine answers here
        assert grader.grade([BENIGN[0]])[0].success


def host_uid(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(status.split("\nUid:")[1].split()[0])


def descendants(pid: int) -> list[int]:
    children = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        kids = children.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


@pytest.mark.skipif(os.geteuid() != 0, reason="the uid drop and cgroups apply when grading as root")
def test_bwrap_sandboxes_run_as_an_unprivileged_uid_in_a_capped_cgroup(bwrap_grader):
    """As root, bwrap's user namespace is not enough: we drop to a slot uid first. Our
    server is the sandbox's pid 1 (bwrap's monitor outside, nothing else), and the
    sandbox sits in a cgroup leaf of its own whose memory cap the kernel enforces."""
    bwrap_grader.grade(BENIGN)
    workers = [w for w in bwrap_grader._answers._workers + bwrap_grader._references._workers if w.channel]
    assert workers
    hierarchies = 1 if (cgroups.ROOT / "cgroup.controllers").exists() else 3  # v2, or v1's memory, pids, cpu
    for worker in workers:
        leaves = cgroups.ours(f"{os.getpid()}-{worker.slot}-")
        assert len(leaves) == hierarchies
        jailed = set()
        for leaf in leaves:
            jailed.update(int(pid) for pid in (leaf / "cgroup.procs").read_text().split())
            for limit in ("memory.limit_in_bytes", "memory.max"):
                if (leaf / limit).exists():
                    assert int((leaf / limit).read_text()) == (1024 + 256) << 20
        bwrap = worker.channel.process.pid
        processes = [bwrap] + descendants(bwrap)
        assert processes == [bwrap, worker.channel.server_pid()]  # bwrap's monitor, our server
        assert all(host_uid(pid) not in (0, os.geteuid()) for pid in processes)
        assert set(processes) <= jailed


def test_none_sandbox_warns_loudly(capsys):
    with pytest.warns(RuntimeWarning, match="without a sandbox"):
        with Grader(sandbox="none", workers=1) as grader:
            assert grader.backend == "none"
            assert grader.grade([BENIGN[0]])[0].success
    assert "--sandbox none" in capsys.readouterr().err


def test_reports_say_what_kind_of_failure_without_parsing_messages():
    """Callers (tasks validate) read the kind from fields, not from message prefixes."""
    task = backend_task("def f(x):\n    return x\n", ["f(1)", "f(2)"])
    with Grader(sandbox="bwrap", workers=1, grading="official") as official:
        banned, slow = official.grade(
            [
                (task, "def f(x):\n    return x  # import os"),
                (task, "def f(x):\n    while x == 2:\n        pass\n    return x")
            ]
        )
    assert banned.banned == "import os" and banned.fraction_passed == 0.0 and not banned.sandbox_failed
    assert [t.timed_out for t in slow.tests] == [False, True] and slow.banned is None, [
        (t.error, t.actual) for t in slow.tests
    ]


def test_a_sandbox_whose_process_1_is_not_our_server_is_replaced(sandbox):
    """The host's tripwire: before trusting a reply, it checks that the sandbox's process
    1 is still the server it started (same process, untraced, running Python). Here the
    record is made to disagree, as a takeover would, and the task fails as tampered."""
    from colbench.grading.runner import TAMPERED
    from colbench.grading.sandboxes.base import server_intact

    with Grader(sandbox=sandbox, workers=1, grading="strict") as grader:
        assert grader.grade([BENIGN[0]])[0].success
        worker = grader._answers._workers[0]
        pid, started = worker._server
        assert server_intact(pid, started)
        worker._server = (pid, str(int(started) + 1))  # as if pid 1 were another process now
        (report,) = grader.grade([BENIGN[0]])
        assert report.error == TAMPERED and report.fraction_passed == 0.0 and not report.sandbox_failed
        assert grader.grade([BENIGN[0]])[0].success  # a fresh sandbox, with its own record
        assert worker._server[0] != pid


def test_sandboxes_are_replaced_every_few_hundred_jobs(sandbox, monkeypatch):
    """Nothing lives in one sandbox for long: after RECYCLE_AFTER jobs a slot starts afresh."""
    from colbench.grading import pool

    monkeypatch.setattr(pool, "RECYCLE_AFTER", 3)
    with Grader(sandbox=sandbox, workers=1, grading="strict") as grader:
        worker = grader._answers._workers[0]
        servers = []
        for _ in range(7):
            assert grader.grade([BENIGN[0]])[0].success
            servers.append(worker._server[0])
    assert [len(set(servers[i:i + 3])) for i in (0, 3)] == [1, 1] and len(set(servers)) == 3
