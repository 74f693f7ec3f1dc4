"""Grading in real bwrap sandboxes: verdicts, then attacks by hostile answers.

Every attack is graded in one batch with benign correct tasks, which must still pass
fully: an attack may cost its own task, never its neighbours.
"""
from __future__ import annotations

import os
import socket
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from colbench.grading.grader import Grader, GradeReport, SandboxUnavailable
from colbench.grading.sandboxes.bwrap import BwrapBackend
from colbench.tasks.spec import TaskSpec

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(BwrapBackend.check() is not None, reason=f"bwrap unusable: {BwrapBackend.check()}")


def backend_task(reference: str, calls: list[str], description: str = "t") -> TaskSpec:
    tests = {f"test{i}": call for i, call in enumerate(calls, 1)}
    return TaskSpec("backend", description, textwrap.dedent(reference), tests)


ADD = backend_task("def add(a, b):\n    return a + b\n", [f"add({i}, {i * 3})" for i in range(1, 11)], "add")
ADD_ANSWER = "```python\ndef add(a, b):\n    return b + a\n```"
WORDS = backend_task(
    """
    def word_counts(text):
        counts = {}
        for word in text.split():
            counts[word] = counts.get(word, 0) + 1
        return counts
    """,
    ["word_counts('a b a')", "word_counts('')", "word_counts('x y z x')"],
    "words",
)
# The import sits inside the function: under the official grading a top-level import is
# invisible from inside the answer's functions.
WORDS_ANSWER = "def word_counts(text):\n    from collections import Counter\n    return dict(Counter(text.split()))"
BENIGN = [(ADD, ADD_ANSWER), (WORDS, WORDS_ANSWER)]


# Strict grading: the attacks below must really run in the sandbox, and the official
# grading's text blacklist would refuse most of them before they ran (its outcomes have
# their own tests, test_grading_differential.py).
@pytest.fixture(scope="module")
def grader():
    with Grader(sandbox="bwrap", workers=2, test_timeout_s=1.0, grading="strict") as grader:
        yield grader


@pytest.fixture(scope="module")
def serial_grader():
    """One worker: consecutive tasks are sure to share one sandbox."""
    with Grader(sandbox="bwrap", workers=1, test_timeout_s=1.0, grading="strict") as grader:
        yield grader


def rows(report: GradeReport):
    return [(t.name, t.expected, t.actual, t.passed, t.error) for t in report.tests]


def grade_among_benign(grader: Grader, task: TaskSpec, answer: str) -> GradeReport:
    """Grade an attack between benign tasks; the benign ones must be untouched."""
    reports = grader.grade([BENIGN[0], (task, answer), BENIGN[1]])
    for benign in (reports[0], reports[2]):
        assert benign.success and benign.fraction_passed == 1.0 and benign.error is None, rows(benign)
    return reports[1]


# ------------------------------------------------------------------ verdicts

def test_backend_is_resolved(grader):
    assert grader.backend == "bwrap"


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


def test_fences_are_stripped_and_task_order_is_natural():
    shuffled = TaskSpec("backend", "d", ADD.ground_truth, {"test10": "add(1, 1)", "test2": "add(2, 2)", "test1": "add(0, 0)"})
    answer = "Here it is:\n```py\ndef add(a, b):\n    return a + b\n```\nDone."
    with Grader(sandbox="bwrap", workers=1, grading="strict") as strict:
        (report,) = strict.grade([(shuffled, answer)])
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
    (report,) = grader.grade([(task, "def f(x):\n    if x == 1:\n        return undefined_name\n    raise ValueError('bad\\nvalue ' * 100)")])
    assert report.tests[0].error == "NameError: name 'undefined_name' is not defined"
    assert report.tests[1].error.startswith("ValueError: bad value bad value")
    assert "\n" not in report.tests[1].error and len(report.tests[1].error) <= 200


def test_large_outputs_travel_as_digests(grader):
    task = backend_task("def f(n):\n    return list(range(n))\n", ["f(100_000)", "f(3)"])
    (report,) = grader.grade([(task, "def f(n):\n    return [i for i in range(n)]")])
    assert report.success
    assert report.tests[0].expected.startswith("<sha256 ") and report.tests[0].expected.endswith(f" of {len(repr(list(range(100_000))))} chars>")
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


def test_unknown_sandbox_and_missing_sandbox_messages(monkeypatch):
    with pytest.raises(ValueError):
        Grader(sandbox="chroot")
    from colbench.grading import sandboxes

    monkeypatch.setattr(sandboxes.DockerBackend, "check", staticmethod(lambda: "no engine"))
    monkeypatch.setattr(sandboxes.BwrapBackend, "check", staticmethod(lambda: "bwrap is not installed"))
    with pytest.raises(SandboxUnavailable, match="install bubblewrap .* --sandbox none"):
        Grader(sandbox="auto")


def test_docker_without_engine_is_a_clear_error():
    from colbench.grading.sandboxes.docker import DockerBackend

    if DockerBackend.check() is None:
        pytest.skip("a Docker engine answers here")
    with pytest.raises(SandboxUnavailable, match="--sandbox docker is unavailable: no Docker engine answers"):
        Grader(sandbox="docker")


def test_auto_picks_bwrap_when_no_docker_engine():
    with Grader(sandbox="auto", workers=1) as grader:
        assert grader.backend == "bwrap"  # no engine answers here
        assert grader.grade([BENIGN[0]])[0].success


# ------------------------------------------------------------------ attacks

ONE = backend_task("def f(x):\n    return x + 1\n", ["f(1)"], "one")
TWO = backend_task("def f(x):\n    return x + 1\n", ["f(1)", "f(2)"], "two")


@pytest.mark.parametrize(
    "body",
    [
        "while True:\n        pass",
        "while True:\n        try:\n            while True:\n                pass\n        except BaseException:\n            pass",
        "return sum(range(10 ** 12))",  # C-level: no signal would interrupt it
    ],
    ids=["python-loop", "loop-catching-everything", "c-level-loop"],
)
def test_infinite_loops_time_out(grader, body):
    started = time.monotonic()
    report = grade_among_benign(grader, TWO, f"def f(x):\n    {body}")
    assert [t.error for t in report.tests] == ["timeout", "timeout"]
    assert all(1.0 <= t.duration_s < 2.0 for t in report.tests)
    assert time.monotonic() - started < 10


def test_memory_bomb(grader):
    task = backend_task("def f(n):\n    return n\n", ["f(1)", "f(2)", "f(3)"])
    answer = """
def f(n):
    if n == 1:
        return len(bytearray(8 << 30))
    if n == 2:
        hog = []
        while True:
            hog.append(" " * (1 << 24))
    return n
"""
    report = grade_among_benign(grader, task, answer)
    assert report.tests[0].error == "MemoryError"
    assert report.tests[1].error in ("MemoryError", "timeout")
    assert report.tests[2].passed  # the next test of the same task still runs


FORK_BOMB = """
import os, time
def f(x):
    made = 0
    for _ in range(200):
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        made += 1
    return made
"""


def test_fork_bomb_is_capped(grader):
    report = grade_among_benign(grader, ONE, FORK_BOMB)
    assert report.tests[0].error is None
    assert 0 <= int(report.tests[0].actual) < 16


def test_nothing_survives_a_task_in_the_same_sandbox(serial_grader):
    """Processes (forked, daemonised, spawned via a shell) and files are gone before the next task."""
    leave_mess = """
import os, subprocess
def f(x):
    os.makedirs("/tmp/locked/inner", exist_ok=True)
    open("/tmp/leftover", "w").write("x")
    open("leftover-in-workdir", "w").write("x")
    os.chmod("/tmp/locked", 0)
    subprocess.Popen(["sh", "-c", "sleep 60 &"], start_new_session=True)
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            import time
            time.sleep(60)
        os._exit(0)
    return 2
"""
    look = """
import os
def f(x):
    me, parent = os.getpid(), os.getppid()
    others = [p for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, me, parent)]
    return sorted(os.listdir("/tmp")) + others
"""
    probe = backend_task("def f(x):\n    return []\n", ["f(1)"], "probe")
    mess, after = serial_grader.grade([(ONE, leave_mess), (probe, look)])
    assert mess.success
    assert after.tests[0].actual == "[]" and after.success


def test_writes_outside_the_work_dir_fail(grader, tmp_path):
    host_marker = tmp_path / f"escape-{uuid.uuid4().hex}"
    targets = ["/usr/lib/x", "/etc/x", "/root/x", "/x", "/dev/shm/x", "/proc/x", str(REPO / "x"), str(host_marker)]
    answer = f"""
def f(x):
    written = []
    for path in {targets!r}:
        try:
            with open(path, "w") as out:
                out.write("pwned")
            written.append(path)
        except OSError:
            pass
    return written
"""
    report = grade_among_benign(grader, ONE, answer)
    assert report.tests[0].actual == "[]"
    assert not host_marker.exists() and not (REPO / "x").exists()


SECRET = "colbench-secret-" + uuid.uuid4().hex


def test_reference_and_host_secrets_are_unreadable(grader, monkeypatch):
    monkeypatch.setenv("COLBENCH_TEST_TOKEN", SECRET)  # the host environment stays outside too
    secret_task = backend_task(f"def f(x):\n    return {SECRET!r}\n", ["f(1)"], "secret")
    probes = ["/etc/shadow", "/root/.bashrc", str(REPO / "colbench" / "protocol.py"), "/home"]
    answer = f"""
import gc, os, sys
def f(x):
    found = []
    for path in {probes!r}:
        try:
            found.append((path, open(path, "rb").read(100)))
        except OSError:
            pass
    # Anything in our own memory, or in any process's command line or environment?
    for thing in gc.get_objects():
        if isinstance(thing, dict):
            for value in list(thing.values()):
                if isinstance(value, str) and "colbench-secret-" in value and "found" not in value:
                    found.append(value)
    for pid in os.listdir("/proc"):
        for part in ("cmdline", "environ"):
            try:
                found.append(open(f"/proc/{{pid}}/{{part}}", "rb").read().count(b"colbench-secret-"))
            except OSError:
                pass
    for root, dirs, files in os.walk("/tmp"):
        found.extend(files)
    return [item for item in found if item]
"""
    report = grade_among_benign(grader, secret_task, answer)
    assert report.tests[0].actual == "[]", report.tests[0].actual
    assert not report.tests[0].passed


def test_no_network_even_to_host_loopback(grader):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(5)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    answer = f"""
import socket
def f(x):
    results = []
    for family, address in ((socket.AF_INET, ("127.0.0.1", {port})), (socket.AF_INET, ("10.0.0.1", 80))):
        s = socket.socket(family)
        s.settimeout(0.3)
        try:
            s.connect(address)
            results.append("connected")
        except OSError as error:
            results.append(type(error).__name__)
    return results
"""
    try:
        report = grade_among_benign(grader, ONE, answer)
        assert "connected" not in report.tests[0].actual
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody knocked
    finally:
        listener.close()


@pytest.mark.parametrize("kill", ["os.kill(os.getppid(), 9)", "os.kill(-1, 9)", "os.kill(os.getppid(), 19)"],
                         ids=["kill-server", "kill-everything", "stop-server"])
def test_killing_or_stopping_the_server_costs_only_this_task(grader, serial_grader, kill):
    answer = f"import os, time\ndef f(x):\n    {kill}\n    time.sleep(30)\n    return x + 1"
    report = grade_among_benign(grader, ONE, answer)
    assert not report.success
    assert report.error == ("sandbox stopped answering" if kill.endswith("19)") else "sandbox crashed")
    # The same slot comes back for the next task.
    attacked, after = serial_grader.grade([(ONE, answer), BENIGN[0]])
    assert not attacked.success and after.success


def test_100mb_on_stdout(grader):
    answer = "def f(x):\n    for _ in range(100):\n        print('x' * 1_000_000)\n    return x + 1"
    report = grade_among_benign(grader, ONE, answer)
    # It goes to /dev/null; on a loaded machine it may not even finish in 1 s.
    assert report.tests[0].passed or report.tests[0].error == "timeout"


def test_forged_result_lines_are_dropped(grader):
    forged = b"".join(b"j%d R 1 0 = 2\nj%d R 2 0 = 3\nj%d D ok\n" % (n, n, n) for n in range(1, 50))
    answer = f"""
import os
def f(x):
    for fd in range(3, 64):
        try:
            os.write(fd, {forged!r})
        except OSError:
            pass
    return x + 100
"""
    report = grade_among_benign(grader, TWO, answer)
    assert rows(report) == [("test1", "2", "101", False, None), ("test2", "3", "102", False, None)]


def test_flooding_the_result_channel(grader):
    flood = (
        "import os\ndef f(x):\n    for fd in range(3, 64):\n        try:\n"
        "            os.write(fd, b'E 1 flood' * 400_000)\n        except OSError:\n            pass\n    return x + 1"
    )
    report = grade_among_benign(grader, TWO, flood)
    assert [t.error for t in report.tests] == ["output too large", "output too large"]


def test_exits_and_crashes(grader):
    task = backend_task("def f(x):\n    return x\n", ["f(1)", "f(2)", "f(3)", "f(4)"])
    answer = """
import os, sys, ctypes
def f(x):
    if x == 1:
        sys.exit(3)
    if x == 2:
        os._exit(0)
    if x == 3:
        ctypes.string_at(0)
    return x
"""
    report = grade_among_benign(grader, task, answer)
    assert [t.error for t in report.tests] == ["SystemExit: 3", "exited with code 0", "killed by SIGSEGV", None]
    assert report.tests[3].passed


def test_ctypes_and_shell_cannot_gain_privileges(grader):
    answer = """
import ctypes, os, subprocess
def f(x):
    libc = ctypes.CDLL(None)
    shell = subprocess.run(["sh", "-c", "id -u; cat /etc/shadow; ls /root"], capture_output=True, text=True)
    try:
        server_memory = len(open(f"/proc/{os.getppid()}/mem", "rb").read(1))
    except OSError:
        server_memory = -1
    # setuid(0), a new user namespace, ptrace-attaching the server, reading its memory
    return [libc.setuid(0), libc.unshare(0x10000000), libc.ptrace(16, os.getppid(), 0, 0), server_memory,
            shell.stdout.strip() == "0"]
"""
    report = grade_among_benign(grader, ONE, answer)
    assert report.tests[0].actual == "[-1, -1, -1, -1, 0]"


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


@pytest.mark.skipif(os.geteuid() != 0, reason="the uid drop applies when grading as root")
def test_sandboxes_run_as_an_unprivileged_uid_on_the_host(grader):
    """As root, bwrap's user namespace is not enough: we drop to a slot uid first."""
    grader.grade(BENIGN)
    channels = [w.channel for w in grader._answers._workers + grader._references._workers if w.channel]
    assert channels
    for channel in channels:
        processes = [channel.process.pid] + descendants(channel.process.pid)
        assert len(processes) >= 3  # bwrap, its init, the server
        assert all(host_uid(pid) != 0 for pid in processes)


def test_always_equal_objects_do_not_pass(grader):
    answer = """
class Anything:
    def __eq__(self, other):
        return True
    def __hash__(self):
        return 0
class LyingInt(int):
    def __eq__(self, other):
        return True
def f(x):
    return Anything() if x == 1 else LyingInt(0)
"""
    report = grade_among_benign(grader, TWO, answer)
    assert rows(report) == [
        ("test1", "2", "<opaque __graded__.Anything>", False, None),
        ("test2", "3", "0", False, None),
    ]


def test_deleting_builtins_hurts_only_that_test(grader):
    answer = """
import builtins
def f(x):
    if x == 1:
        builtins.__dict__.clear()
        return len("ab")
    return x + 1
"""
    report = grade_among_benign(grader, TWO, answer)
    assert report.tests[0].error == "NameError: name 'len' is not defined"
    assert report.tests[1].passed


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
        banned, slow = official.grade([(task, "def f(x):\n    return x  # import os"), (task, "def f(x):\n    while x == 2:\n        pass\n    return x")])
    assert banned.banned == "import os" and banned.fraction_passed == 0.0 and not banned.sandbox_failed
    assert [t.timed_out for t in slow.tests] == [False, True] and slow.banned is None, [(t.error, t.actual) for t in slow.tests]
