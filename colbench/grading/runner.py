"""The fork-server that runs inside the sandbox.

It is sent as source to Debian's `/usr/bin/python3 -I -S -c`, after canonical.py (which
defines `encode`), so it imports only small builtin modules and nothing of colbench.

One server lives as long as its sandbox and grades one job at a time:

    host  --job-->  server  --fork-->  child (rlimits, runs the code and the test calls)
    host  <-lines-- server  <-lines--  child, on a private pipe

The child compiles the code, writes "B k" as its first test k begins, then "R k ..." or
"E k ..." as each test ends; the next test begins right after. The server keeps the
wall deadline of each test (a signal inside the child could not
interrupt a C-level loop such as sum(range(10**12))), kills the child when it passes,
and forks a fresh child for the remaining tests. After each child it kills every other
process it can see and wipes the work dir, so nothing carries over to the next task.

Job, from the host on stdin:
    J <job_id> <timeout_ms> <memory_mb> <scope> <n_fields>\n  then n_fields of  <length>\n<bytes>
    field 0 is the code, fields 1.. are the test calls; scope is "module" (the code runs
    as a module and calls are evaluated in it) or "function" (the official grader's
    scoping: the code runs with locals apart from its globals, as the body of a function
    does, and calls are evaluated with both, so top-level names are invisible inside
    the answer's own functions).
Reply, on stdout, in batches at most FLUSH_AFTER_S old (lines tagged with the job id):
    <job_id> R <k> <microseconds> <=|~> <canonical text>   test k returned a value
    <job_id> E <k> <microseconds> <error>                  test k failed
    <job_id> C <error>                                     the code did not compile
    <job_id> D <ok|dirty>                                  end; dirty asks for a new sandbox
"""
import os
import sys
import time
import select
import signal
import resource
import builtins
import gc

try:
    encode  # defined by canonical.py when both are sent into the sandbox as one program
except NameError:
    from colbench.grading.canonical import encode

OUTPUT_CAP = 1 << 20  # bytes a task may send back; more and it is stopped
HASH_ABOVE = 64 << 10  # longer canonical texts travel as a digest
FILE_SIZE_CAP = 16 << 20
OPEN_FILES_CAP = 64
PROCESS_CAP = 16  # counts this sandbox's server and init too
START_SLACK_S = 0.5  # fork and set-up of a child, before its first test begins
FLUSH_AFTER_S = 0.25  # longest a finished line waits before going to the host
IGNORED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)

# Captured before any graded code runs; graded code may delete or replace the originals.
_write = os.write
_builtins_dict = builtins.__dict__
_saved_builtins = dict(_builtins_dict)
_AnyError = BaseException  # `except BaseException` would look the name up in builtins


# ---------------------------------------------------------------- server (long-lived)

def serve(workdir, cleanup):
    """cleanup: 'ns' (own pid namespace: kill all but pid 1), 'uid' (own uid: kill all),
    or 'group' (shared uid: kill only the child's process group)."""
    _make_undumpable()
    for number in IGNORED_SIGNALS:
        signal.signal(number, signal.SIG_IGN)
    os.makedirs(workdir, exist_ok=True)
    _warm_up()
    stdin = sys.stdin.buffer
    _send_line("READY")
    while True:
        job = _read_job(stdin)
        if job is None:
            return
        _run_job(job, workdir, cleanup)


def _make_undumpable():
    """PR_SET_DUMPABLE=0: a graded child (same uid) cannot ptrace us or read our memory,
    and our children inherit the flag. Without it we refuse to serve (fail closed)."""
    import ctypes  # once per sandbox, not per task

    if ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE = 4
        sys.stderr.write("cannot set PR_SET_DUMPABLE\n")
        sys.exit(3)


WARM_UP = """
class Shape:
    def area(self, scale=1.0):
        return [x * scale for x in range(3) if x] or {"k": (1, 2.5)}
def run(items, *args, **kwargs):
    try:
        total = sum(len(str(i)) for i in items)
    except (TypeError, ValueError) as error:
        raise KeyError(f"{error!r}") from None
    return sorted({"a": total, "b": lambda y: y}.items(), key=lambda kv: kv[0])[0]
"""


def _warm_up():
    """Run the compiler and encoder once here. The first compile in a process builds the
    parser's and AST's state lazily (about 1 ms); done here, every child inherits it."""
    namespace = {}
    exec(compile(WARM_UP, "<warm-up>", "exec"), namespace)
    encode(eval(compile("run([1, 2]), Shape().area(), {1.5, None}, b'x'", "<warm-up>", "eval"), namespace))


def _read_job(stdin):
    header = stdin.readline()
    if not header:
        return None
    tag, job_id, timeout_ms, memory_mb, scope, count = header.split()
    fields = []
    for _ in range(int(count)):
        length = int(stdin.readline())
        fields.append(stdin.read(length).decode("utf-8", "replace"))
    return {
        "id": job_id.decode("ascii"),
        "timeout": int(timeout_ms) / 1000.0,
        "memory": int(memory_mb) << 20,
        "function_scope": scope == b"function",
        "code": fields[0],
        "calls": fields[1:],
    }


def _run_job(job, workdir, cleanup):
    """Run all tests of one job, forking a new child after each timeout or crash."""
    state = {"budget": OUTPUT_CAP, "stop": False, "outbox": [], "flushed": time.monotonic()}
    test_count = len(job["calls"])
    next_test = 1
    clean = True
    while next_test <= test_count and not state["stop"]:
        next_test = _run_child(job, next_test, workdir, state)
        clean = _clean_up(cleanup) and clean
    try:
        _wipe(workdir)
    except Exception:
        clean = False
    state["outbox"].append(job["id"] + (" D ok" if clean else " D dirty"))
    _flush(state)


def _run_child(job, start, workdir, state):
    """Fork one child for tests start..n; return the first test it did not settle."""
    tag = job["id"]
    read_end, write_end = os.pipe()
    gc.freeze()  # the child's collector then skips our objects: no copy-on-write storm
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_end)
            _child(job, start, workdir, write_end)
        finally:
            os._exit(70)
    os.close(write_end)
    os.set_blocking(read_end, False)
    exit_watch = os.pidfd_open(pid)

    test_count = len(job["calls"])
    settled = start - 1  # last test with a reply
    current = None  # test under way; None until the child has compiled the code
    began = time.monotonic()
    deadline = began + job["timeout"] + START_SLACK_S  # fork, set-up and compile
    pending = b""
    outcome = None  # "done", or why this child ended early
    watching = [read_end, exit_watch]

    while outcome is None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            outcome = "timeout"
            break
        ready, _, _ = select.select(watching, [], [], remaining)
        if read_end in ready:
            chunk = _read_some(read_end)
            if chunk is None:
                watching = [exit_watch]  # the child closed its end; wait for its exit
            else:
                state["budget"] -= len(chunk)
                pending += chunk
        if exit_watch in ready:
            pending += _drain(read_end, state)
        if state["budget"] < 0:
            outcome = "output too large"
            break
        # Only the expected next line counts: a child may write anything on its pipe.
        while b"\n" in pending and outcome is None:
            raw, pending = pending.split(b"\n", 1)
            kind, number, rest = _parse(raw)
            now = time.monotonic()
            if kind == "B" and current is None and number == start and settled == start - 1:
                current, began, deadline = start, now, now + job["timeout"]
            elif kind in ("R", "E") and number == current:
                _post(state, "%s %s %d %d %s" % (tag, kind, number, int((now - began) * 1e6), rest))
                settled = number
                # The next test begins as soon as this one has answered.
                current = number + 1 if number < test_count else test_count + 1
                began, deadline = now, now + job["timeout"]
            elif kind == "C" and current is None:
                _post(state, "%s C %s" % (tag, rest))
                state["stop"] = True
                outcome = "done"
            elif kind == "D" and current is not None:
                outcome = "done" if settled == test_count else "stopped early"
        if exit_watch in ready and outcome is None:
            outcome = _exit_reason(pid)

    _kill(pid)
    _reap(pid)
    os.close(read_end)
    os.close(exit_watch)
    if outcome == "done":
        return test_count + 1
    if current is None:
        # The code did not even compile: every test fails the same way.
        _post(state, "%s C %s while compiling" % (tag, outcome))
        state["stop"] = True
        return test_count + 1
    failed = settled + 1
    if failed > test_count:
        return failed  # all answered; the child just failed to say goodbye
    spent = int((time.monotonic() - began) * 1e6)
    _post(state, "%s E %d %d %s" % (tag, failed, spent, outcome))
    if outcome == "output too large":
        for later in range(failed + 1, test_count + 1):
            _post(state, "%s E %d 0 output too large" % (tag, later))
        state["stop"] = True
    return failed + 1


def _parse(raw):
    """(kind, test number, rest) of a child's line; junk parses as kind '?'."""
    parts = raw.decode("ascii", "replace").split(" ", 2)
    kind = parts[0]
    if kind in ("B", "R", "E") and len(parts) >= 2 and parts[1].isdigit() and len(parts[1]) < 6:
        return kind, int(parts[1]), parts[2] if len(parts) > 2 else ""
    if kind == "C":
        return kind, -1, raw.decode("ascii", "replace")[2:]
    if kind == "D":
        return kind, -1, ""
    return "?", -1, ""


def _read_some(fd):
    """Bytes available on fd, b'' if none right now, None at end of file."""
    try:
        chunk = os.read(fd, 1 << 16)
    except BlockingIOError:
        return b""
    return chunk or None


def _drain(fd, state):
    """What is left in the pipe after the child exited (a grandchild may keep it open)."""
    data = b""
    while state["budget"] - len(data) >= 0:
        chunk = _read_some(fd)
        if not chunk:
            break
        data += chunk
    state["budget"] -= len(data)
    return data


def _exit_reason(pid):
    """Why the child ended. WNOWAIT leaves it a zombie, so its pid (and process group)
    cannot be reused before _kill has run."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        info = None
    if info is None:
        return "crashed"
    if info.si_code == os.CLD_EXITED:
        return "exited with code %d" % info.si_status
    try:
        name = signal.Signals(info.si_status).name
    except ValueError:
        name = str(info.si_status)
    return "killed by " + name


def _kill(pid):
    try:
        os.killpg(pid, signal.SIGKILL)  # the child leads its own session
    except OSError:
        pass
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


def _reap(pid):
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def _clean_up(cleanup):
    """Kill whatever the child left behind. False if something would not die."""
    if cleanup == "group":
        return True  # only the child's group could be reached, and _kill did that
    me = os.getpid()
    if cleanup == "uid" or _others(me):
        try:
            os.kill(-1, signal.SIGKILL)  # everything of our uid but us (and init)
        except OSError:
            pass
    if cleanup != "ns":
        return True
    give_up = time.monotonic() + 1.0
    while time.monotonic() < give_up:
        _reap_orphans()  # needed when we are pid 1 ourselves (docker)
        if not _others(me):
            return True
        time.sleep(0.002)
    return False


def _others(me):
    """Other processes in our pid namespace, besides init."""
    return [name for name in os.listdir("/proc") if name.isdigit() and name != "1" and int(name) != me]


def _reap_orphans():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _wipe(path):
    for entry in os.scandir(path):
        if entry.is_dir(follow_symlinks=False):
            os.chmod(entry.path, 0o700)  # a child may have locked its own dirs
            _wipe(entry.path)
            os.rmdir(entry.path)
        else:
            os.unlink(entry.path)


def _post(state, line):
    """Queue a line for the host; send the queue if it has waited a while, so the
    host's silence watchdog hears from us during slow jobs, and fast ones cost one write."""
    state["outbox"].append(line)
    if time.monotonic() - state["flushed"] > FLUSH_AFTER_S:
        _flush(state)


def _flush(state):
    _send_line("\n".join(state["outbox"]))
    state["outbox"] = []
    state["flushed"] = time.monotonic()


def _send_line(line):
    view = memoryview((line + "\n").encode("ascii", "backslashreplace"))
    while view:
        view = view[os.write(1, view):]


# ---------------------------------------------------------------- child (one per task)

def _child(job, start, workdir, out):
    os.setsid()
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)  # graded code prints into nothing; results use `out`
    os.closerange(3, out)
    os.closerange(out + 1, 1 << 16)
    for number in IGNORED_SIGNALS:
        signal.signal(number, signal.SIG_DFL)
    os.chdir(workdir)
    tests_left = len(job["calls"]) - start + 1
    cpu_seconds = int(job["timeout"] * (tests_left + 1)) + 2
    limits = (
        (resource.RLIMIT_CPU, cpu_seconds),
        (resource.RLIMIT_AS, job["memory"]),
        (resource.RLIMIT_FSIZE, FILE_SIZE_CAP),
        (resource.RLIMIT_NOFILE, OPEN_FILES_CAP),
        (resource.RLIMIT_NPROC, PROCESS_CAP),
        (resource.RLIMIT_CORE, 0),
    )
    for which, value in limits:
        resource.setrlimit(which, (value, value))
    if hasattr(sys, "set_int_max_str_digits"):
        sys.set_int_max_str_digits(0)  # big ints are valid answers; time is bounded anyway
    _run_tests(job["code"], job["calls"], start, out, job["function_scope"])
    os._exit(0)


def _run_tests(source, calls, start, out, function_scope):
    try:
        code = compile(source, "<answer>", "exec")
    except _AnyError as error:
        _emit(out, "C " + _describe(error))
        return
    _emit(out, "B %d" % start)  # test `start` begins; each later one begins at the reply before it
    for number in range(start, len(calls) + 1):
        try:
            call = compile(calls[number - 1], "<test%d>" % number, "eval")
            namespace = {"__name__": "__graded__", "__builtins__": builtins}
            local = {} if function_scope else namespace
            exec(code, namespace, local)
            value = eval(call, namespace, local)
            _restore_builtins()
            text, comparable = encode(value)
        except _AnyError as error:
            _restore_builtins()
            _emit(out, "E %d %s" % (number, _describe(error)))
            continue
        if len(text) > HASH_ABOVE:
            text = _digest(text)
        _emit(out, "R %d %s %s" % (number, "=" if comparable else "~", text))
    _emit(out, "D")


def _restore_builtins():
    _builtins_dict.clear()
    _builtins_dict.update(_saved_builtins)


def _digest(text):
    try:
        from _sha256 import sha256
    except ImportError:
        from hashlib import sha256
    return "<sha256 %s of %d chars>" % (sha256(text.encode("ascii")).hexdigest(), len(text))


def _describe(error):
    """One short line: 'NameError: name x is not defined'. Graded code made `error`."""
    try:
        name = type.__getattribute__(type(error), "__name__")
        name = str.__str__(name) if type(name) is str else "Error"
    except BaseException:
        name = "Error"
    try:
        message = str(error)
        message = message if type(message) is str else ""
    except BaseException:
        message = ""
    line = name + (": " + message if message else "")
    return " ".join(line.split())[:200]


def _emit(out, line):
    data = (line.replace("\n", " ") + "\n").encode("ascii", "backslashreplace")
    while data:
        data = data[_write(out, data):]


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2])
