"""Hostile answers against each sandbox (bwrap, Docker): every breach the red team found,
and the classic ones. Each attack is graded in one batch beside benign answers, which
must still score 1.0; what it may cost is its own task.

Strict grading throughout: the official grading's text blacklist would refuse most of
these before they ran, and they must really run.
"""
from __future__ import annotations

import os
import socket
import time
import uuid
from pathlib import Path

import pytest

from colbench.grading.grader import Grader
from colbench.grading.runner import DENIED_ERRNO, DENIED_SYSCALLS, NAMESPACE_FLAGS, TAMPERED
from gradingcases import BENIGN, ONE, TEN, TWO, assert_benign, backend_task, grade_among_benign, rows
from plugins.sandboxes import sandbox_remains, shmem_kb

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def grader(sandbox):
    with Grader(sandbox=sandbox, workers=2, test_timeout_s=1.0, grading="strict") as grader:
        yield grader


@pytest.fixture(scope="module")
def serial_grader(sandbox):
    """One worker: consecutive tasks are sure to share one sandbox."""
    with Grader(sandbox=sandbox, workers=1, test_timeout_s=1.0, grading="strict") as grader:
        yield grader


# ------------------------------------------------------------ breach 1: taking over pid 1

TAKE_OVER_PID_1 = """
import ctypes, os, signal
def f(x):
    libc = ctypes.CDLL(None, use_errno=True)
    won = []
    for pid in [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]:
        for request in (16, 0x4206):  # PTRACE_ATTACH, PTRACE_SEIZE
            if libc.ptrace(request, pid, 0, 0) == 0:
                won.append(("ptrace", pid))
        for mode in ("rb", "r+b"):
            try:
                open(f"/proc/{pid}/mem", mode).close()
                won.append(("mem", pid, mode))
            except OSError:
                pass
        try:
            won.append(("fds", pid, os.listdir(f"/proc/{pid}/fd")))
        except OSError:
            pass
    for number in (signal.SIGKILL, signal.SIGSTOP, signal.SIGTERM):
        try:
            os.kill(1, number)
        except OSError:
            pass
    won.append(open("/proc/1/cmdline", "rb").read().split(b"\\0")[0].decode())
    return won
"""


def test_process_1_is_our_server_and_cannot_be_taken_over(serial_grader):
    """The red team's critical breach: ptrace pid 1, then read later jobs and write their
    results. Now pid 1 is our undumpable server, ptrace is filtered, and the 20 correct
    answers graded after the attacker in the same sandbox all score 1.0."""
    wrong = (BENIGN[0][0], "def add(a, b):\n    return a - b")
    reports = serial_grader.grade([(ONE, TAKE_OVER_PID_1)] + BENIGN * 10 + [wrong])
    attack, benign, wrong_report = reports[0], reports[1:-1], reports[-1]
    assert attack.tests[0].actual == "['/usr/bin/python3']", attack.tests[0]
    for report in benign:
        assert_benign(report)
    assert wrong_report.fraction_passed == 0.0


def test_denied_syscalls_fail_with_the_filters_errno(grader):
    """Each call the seccomp filter denies answers ENOSYS, which nothing else here would:
    without the filter they would succeed or fail with another errno."""
    answer = f"""
import ctypes, sys
sys.path.insert(0, "/usr/lib/python3/dist-packages")
import seccomp
def f(x):
    libc = ctypes.CDLL(None, use_errno=True)
    def errno_of(name, *args):
        ctypes.set_errno(0)
        number = seccomp.resolve_syscall(seccomp.Arch.NATIVE, name)
        return ctypes.get_errno() if libc.syscall(number, *args) == -1 else 0
    found = {{name: errno_of(name, 0, 0, 0, 0, 0, 0) for name in {list(DENIED_SYSCALLS)!r}}}
    for flag in {list(NAMESPACE_FLAGS)!r}:
        found["unshare %#x" % flag] = errno_of("unshare", flag)
        # CLONE_THREAD without CLONE_SIGHAND is invalid: unfiltered, clone says EINVAL
        # and never forks.
        found["clone %#x" % flag] = errno_of("clone", flag | 0x10000, 0, 0, 0, 0)
    found["prctl dumpable"] = errno_of("prctl", 4, 1, 0, 0, 0)
    found["getpid"] = errno_of("getpid")
    return found
"""
    report = grade_among_benign(grader, ONE, answer)
    found = eval(report.tests[0].actual)
    assert found.pop("getpid") == 0
    assert {name for name, errno in found.items() if errno != DENIED_ERRNO} == set()
    assert len(found) == len(DENIED_SYSCALLS) + 2 * len(NAMESPACE_FLAGS) + 1


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


# ------------------------------------------------------------ breach 2: IPC that outlives a job

SYSV_HOG = """
import ctypes
def f(x):
    libc = ctypes.CDLL(None, use_errno=True)
    made = []
    for key in (0, 0x5EC2E7, 0x5EC2E8):  # IPC_PRIVATE, then keys a later task could find
        made.append(("shm", libc.shmget(key, 1 << 30, 0o1666), ctypes.get_errno()))  # IPC_CREAT | 0666
        made.append(("msg", libc.msgget(key, 0o1666), ctypes.get_errno()))
        made.append(("sem", libc.semget(key, 1, 0o1666), ctypes.get_errno()))
    return made
"""
SYSV_LOOK = """
import ctypes
def f(x):
    libc = ctypes.CDLL(None, use_errno=True)
    return [libc.shmget(0x5EC2E7, 0, 0), libc.msgget(0x5EC2E7, 0), open("/proc/sysvipc/shm").read().count("\\n")]
"""
POSIX_IPC = """
import ctypes, os
def f(x):
    found = []
    try:
        from multiprocessing import shared_memory
        shared_memory.SharedMemory(create=True, size=1 << 20)
        found.append("posix shm")
    except Exception:
        pass
    try:
        os.open("/dev/shm/colbench", os.O_CREAT | os.O_RDWR)
        found.append("/dev/shm")
    except OSError:
        pass
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mq_open(b"/colbench", 0o100 | 2, 0o600, None) != -1:  # O_CREAT | O_RDWR
        found.append("mq")
    return found
"""


def test_system_v_and_posix_ipc_are_unavailable(serial_grader):
    """Breach 2: SysV segments held 4 GB of host memory until grade exited and carried
    data to a later task. Now no answer can make one, so a later one finds nothing."""
    shmem_before = shmem_kb()
    hog, look, posix = serial_grader.grade([(ONE, SYSV_HOG), (ONE, SYSV_LOOK), (ONE, POSIX_IPC)])
    made = eval(hog.tests[0].actual)
    assert {(result, errno) for _, result, errno in made} == {(-1, DENIED_ERRNO)}, made
    assert look.tests[0].actual == "[-1, -1, 1]"  # nothing by that key; only the table's header
    assert posix.tests[0].actual == "[]"
    assert shmem_kb() - shmem_before < 64 << 10


# ------------------------------------------------------------ breach 3: answers writing results

FORGE = """
import os
LINES = {lines!r}
def f(x):
    for fd in range(0, 64):
        try:
            os.write(fd, LINES)
        except OSError:
            pass
    {then}
"""


@pytest.mark.parametrize(
    "lines",
    [
        # the red team's: a \\r inside a line survived the server and split it on the host
        b"".join(b"R %d 0 = %d\rj%d R %d 0 = %d\r" % (k, 7 * k, n, k, 7 * k) for k in range(1, 11) for n in range(1, 4))
        + b"\n",
        # whole result lines, as the host and the server's old protocol spelt them
        b"".join(
            b"j%d R %d 0 = %d\nR %d = %d\nB %d\n" % (n, k, 7 * (k - 1), k, 7 * (k - 1), k)
            for n in range(1, 9)
            for k in range(1, 11)
        )
        + b"j1 D ok\nD\n",
        # a guessed nonce: printable, well formed, wrong
        b"0123456789abcdef R = 0\n",
    ],
    ids=["carriage-returns", "whole-lines", "guessed-nonce"],
)
def test_answers_cannot_write_their_own_results(grader, lines):
    """Breach 3: an answer that hung on 9 of 10 tests scored 1.0 with lines of its own.
    Any line the runner would not have written is tampering: the whole task scores 0."""
    answer = FORGE.format(lines=lines, then="while x > 0:\n        pass\n    return 0")
    report = grade_among_benign(grader, TEN, answer)
    assert report.fraction_passed == 0.0
    assert report.error == TAMPERED and {t.error for t in report.tests} == {TAMPERED}, rows(report)


def test_a_reply_counts_for_the_test_handed_out_and_once(grader):
    """A thread that writes a correct-looking reply ahead of the runner only breaks the
    protocol: the task fails, though every value it would have returned was right."""
    answer = """
import os, threading
def f(x):
    def echo():
        for fd in range(3, 64):
            try:
                os.write(fd, b"R = %d\\n" % (7 * (x + 1)))
            except OSError:
                pass
    threading.Thread(target=echo).start()
    return 7 * x
"""
    report = grade_among_benign(grader, TEN, answer)
    assert report.fraction_passed == 0.0 and report.error == TAMPERED


def test_flooding_the_result_channel(grader):
    flood = (
        "import os\ndef f(x):\n    for fd in range(3, 64):\n        try:\n"
        "            os.write(fd, b'E 1 flood' * 400_000)\n        except OSError:\n            pass\n    return x + 1"
    )
    report = grade_among_benign(grader, TWO, flood)
    assert [t.error for t in report.tests] == ["output too large", "output too large"]


# ------------------------------------------------------------ host pressure (breach 4) and classics

FLOOD_FILES = """
import os
def f(x):
    made = 0
    try:
        while made < 200_000:
            open(f"/tmp/f{made}", "w").close()
            made += 1
    except OSError:
        pass
    depth, path = 0, "/tmp/d"
    try:
        while depth < 20_000:
            os.mkdir(path)
            os.chdir(path)
            path, depth = "d", depth + 1
    except OSError:
        pass
    os.chmod("/tmp", 0o700)
    return made
"""
LOOK_AT_TMP = """
import os
def f(x):
    return sorted(os.listdir("/tmp"))
"""


def test_inode_flood_and_deep_directories_are_bounded_and_wiped(serial_grader, sandbox):
    """A file flood stops at the tmpfs's inode cap (as root, or in Docker), and neither
    it nor a deep chain of directories delays the next task in the same sandbox."""
    probe = backend_task("def f(x):\n    return []\n", ["f(1)"], "probe")
    started = time.monotonic()
    flood, after = serial_grader.grade([(ONE, FLOOD_FILES), (probe, LOOK_AT_TMP)])
    assert flood.tests[0].error in (None, "timeout"), rows(flood)
    if flood.tests[0].actual is not None and (sandbox == "docker" or os.geteuid() == 0):
        assert int(flood.tests[0].actual) < 5000
    assert_benign(after)
    assert time.monotonic() - started < 15


@pytest.mark.parametrize(
    "attack, errors",
    [
        ("os.kill(1, 9)", [None]),  # the server is pid 1: its namespace's signals pass it by
        ("os.kill(os.getppid(), 19)", [None]),
        ("os.kill(-1, 9)", ["ProcessLookupError: [Errno 3] No such process"]),  # all but pid 1 and the caller: nobody
        ("os.kill(os.getpid(), 19)", ["timeout"]),
        ("signal.signal(signal.SIGTERM, signal.SIG_IGN)\n    while True:\n        pass", ["timeout"]),
    ],
    ids=["kill-server", "stop-server", "kill-everything", "stop-itself", "ignore-sigterm"],
)
def test_signals_cost_at_most_the_task(serial_grader, attack, errors):
    answer = f"import os, signal\ndef f(x):\n    {attack}\n    return x + 1"
    attacked, after = serial_grader.grade([(ONE, answer), BENIGN[0]])
    assert [t.error for t in attacked.tests] == errors
    assert attacked.success == (errors == [None]) and not attacked.sandbox_failed
    assert_benign(after)


@pytest.mark.parametrize(
    "body",
    [
        "while True:\n        pass",
        (
            "while True:\n        try:\n            while True:\n                pass\n        except BaseException:\n"
            "            pass"
        ),
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


MEMORY_ACROSS_PROCESSES = """
import os, time
def f(x):
    pids = []
    for _ in range(3):
        pid = os.fork()
        if pid == 0:
            hog = bytearray(500 << 20)
            for page in range(0, len(hog), 4096):  # zero pages cost nothing until written
                hog[page] = 1
            time.sleep(0.3)
            os._exit(0)
        pids.append(pid)
    return sorted(os.waitpid(pid, 0)[1] & 0x7F for pid in pids)  # the signal that ended each
"""


def test_memory_is_capped_for_the_whole_sandbox(grader, sandbox):
    """RLIMIT_AS bounds one process; three children of 500 MB each stay under it, but not
    under the sandbox's cgroup cap (1 GiB + 256 MiB), where the kernel kills one of them."""
    if sandbox == "bwrap" and os.geteuid() != 0:
        pytest.skip("bwrap sandboxes get a cgroup only when grading as root")
    report = grade_among_benign(grader, ONE, MEMORY_ACROSS_PROCESSES)
    assert report.tests[0].error in (None, "timeout") and not report.sandbox_failed, rows(report)
    if report.tests[0].actual is not None:
        assert 9 in eval(report.tests[0].actual)  # SIGKILL from the cgroup's OOM killer


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
THREAD_BOMB = """
import threading, time
def f(x):
    made = 0
    try:
        for _ in range(10_000):
            threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
            made += 1
    except RuntimeError:
        pass
    return made
"""


@pytest.mark.parametrize("bomb", [FORK_BOMB, THREAD_BOMB], ids=["forks", "threads"])
def test_fork_and_thread_bombs_are_capped(grader, bomb):
    report = grade_among_benign(grader, ONE, bomb)
    assert report.tests[0].error is None, rows(report)
    assert 0 <= int(report.tests[0].actual) < 64


def test_nothing_survives_a_task_in_the_same_sandbox(serial_grader):
    """Processes (forked, daemonised with setsid, spawned via a shell) and files are gone
    before the next task; a survivor would have written forged lines into it."""
    leave_mess = """
import os, subprocess, time
def f(x):
    os.makedirs("/tmp/locked/inner", exist_ok=True)
    open("/tmp/leftover", "w").write("x")
    open("leftover-in-workdir", "w").write("x")
    os.chmod("/tmp/locked", 0)
    subprocess.Popen(["sh", "-c", "sleep 60 &"], start_new_session=True)
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            time.sleep(0.5)
            for fd in range(64):
                try:
                    os.write(fd, b"R = 2\\n")
                except OSError:
                    pass
            time.sleep(60)
        os._exit(0)
    return 2
"""
    look = """
import os, time
def f(x):
    time.sleep(0.7)
    me = os.getpid()
    others = [p for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, me)]
    return sorted(os.listdir("/tmp")) + others
"""
    probe = backend_task("def f(x):\n    return []\n", ["f(1)"], "probe")
    mess, after = serial_grader.grade([(ONE, leave_mess), (probe, look)])
    assert mess.success
    assert after.tests[0].actual == "[]" and after.success


# ------------------------------------------------------------ values and objects

HUGE_AND_ODD_VALUES = """
def f(x):
    if x == 1:
        return "x" * (64 << 20)
    if x == 2:
        loop = []
        loop.append(loop)
        return loop
    if x == 3:
        deep = []
        for _ in range(200_000):
            deep = [deep]
        return deep
    if x == 4:
        return {i: str(i) for i in range(300_000)}
    return x + 1
"""


def test_huge_and_self_referencing_values(grader):
    task = backend_task("def f(x):\n    return x + 1\n", [f"f({i})" for i in range(1, 6)])
    report = grade_among_benign(grader, task, HUGE_AND_ODD_VALUES)
    assert [t.passed for t in report.tests] == [False] * 4 + [True], rows(report)
    # 64 MiB of text takes 0.6 s to encode: under load it may time out, which is no breach either.
    assert (report.tests[0].actual or "").startswith("<sha256 ") or report.tests[0].error == "timeout", rows(report)
    assert report.error is None and not report.sandbox_failed


HANGING_DUNDERS = """
class Hang:
    def __repr__(self):
        while True:
            pass
    __str__ = __repr__
    def __eq__(self, other):
        while True:
            pass
    def __hash__(self):
        while True:
            pass
class HangingError(Exception):
    def __str__(self):
        while True:
            pass
def f(x):
    if x == 1:
        return Hang()
    if x == 2:
        return [Hang(), {"k": Hang()}]
    if x == 3:
        return {Hang(): 1}
    if x == 4:
        raise HangingError()
    return x + 1
"""


def test_objects_whose_dunders_hang_cost_only_their_tests(grader):
    """Graded objects are never asked to compare, hash or print themselves outside their
    own test's time: a hanging __eq__ or __repr__ is opaque, a hanging __hash__ times out."""
    task = backend_task("def f(x):\n    return x + 1\n", [f"f({i})" for i in range(1, 6)])
    started = time.monotonic()
    report = grade_among_benign(grader, task, HANGING_DUNDERS)
    assert [t.passed for t in report.tests] == [False] * 4 + [True], rows(report)
    assert report.tests[0].actual == "<opaque __graded__.Hang>"
    assert report.tests[2].error == "timeout"
    assert time.monotonic() - started < 12


# ------------------------------------------------------------ the host

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
    for address in (("127.0.0.1", {port}), ("10.0.0.1", 80)):
        s = socket.socket(socket.AF_INET)
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


def test_100mb_on_stdout(grader):
    answer = "def f(x):\n    for _ in range(100):\n        print('x' * 1_000_000)\n    return x + 1"
    report = grade_among_benign(grader, ONE, answer)
    # It goes to /dev/null; on a loaded machine it may not even finish in 1 s.
    assert report.tests[0].passed or report.tests[0].error == "timeout"


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


ALL_ATTACKS = [
    (ONE, TAKE_OVER_PID_1), (ONE, SYSV_HOG), (ONE, POSIX_IPC), (ONE, FLOOD_FILES), (ONE, FORK_BOMB),
    (ONE, THREAD_BOMB), (TEN, FORGE.format(lines=b"R 1 0 = 0\r\n", then="return 7 * x")),
    (ONE, (
        "import os\ndef f(x):\n    if os.fork() == 0:\n        os.setsid()\n        import time\n       "
        " time.sleep(60)\n    return 2"
    )),
    (ONE, "def f(x):\n    return 'x' * (32 << 20)"),
]


def test_grading_leaves_nothing_behind(sandbox):
    """After the grader closes: no process, cgroup, IPC object, container or shared
    memory of its sandboxes remains on the host."""
    ipc_before, shmem_before = sandbox_remains([])["ipc"], shmem_kb()
    with Grader(sandbox=sandbox, workers=2, test_timeout_s=1.0, grading="strict") as grader:
        slots = grader._answers._slots + grader._references._slots
        reports = grader.grade(BENIGN + ALL_ATTACKS + BENIGN)
        assert sandbox_remains(slots)["processes" if sandbox == "bwrap" else "containers"]  # the probe sees them
    for report in reports[:2] + reports[-2:]:
        assert_benign(report)
    assert sandbox_remains(slots) == {"processes": [], "cgroups": [], "ipc": ipc_before, "containers": []}
    assert shmem_kb() - shmem_before < 64 << 10
