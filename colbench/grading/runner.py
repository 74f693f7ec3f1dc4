"""The fork-server that runs inside the sandbox.

It is sent as source to Debian's `/usr/bin/python3 -s -S -P -c`, after canonical.py
(which defines `encode`), so it imports only small builtin modules and nothing of
colbench; the environment holds only what the backend set (base.sandbox_env: a fixed
PYTHONHASHSEED among it).

One server lives as long as its sandbox, is its process 1 where the backend gives it a
pid namespace, and grades one job at a time:

    host  --job-->   server  --fork-->  child (rlimits; runs the code and the test calls)
    host  <-lines--  server  <-lines--  child, on a private pipe
                     server  --order->  child, one test at a time, on another pipe

Graded code is hostile and shares its child's process and pipes, so the server trusts
nothing the child says beyond what the protocol allows at that moment:

- The child first says it compiled the code ("<n0> K") or why not ("<n0> C <error>").
- Then the server hands it one test at a time ("<k> <n_k>\n", with n_k a fresh random
  nonce) and accepts exactly one reply for it, "<n_k> R <=|~> <text>" or "<n_k> E <error>".
  Nothing written earlier can count for a test not yet handed out (its nonce does not
  exist yet), and a reply counts once.
- Any other line, a control byte, or a second reply is tampering: the whole task fails
  and the host replaces the sandbox.
The server keeps the deadline of each test (a signal inside the child could not
interrupt a C-level loop such as sum(range(10**12))) in the time an idle machine would
have taken (_Clock: wall time less the child's waits for a CPU, so that busy neighbours
change no grade), kills the child when it passes, and forks a fresh child for the
remaining tests. After each child it kills every other
process it can see; after each job it wipes the work dir (and, where no filter forbids
System V IPC, asks for a new sandbox if an IPC object exists), so nothing carries over
to the next task.

Before it serves, the server makes itself undumpable (a graded child, same uid, can
neither ptrace it nor read its memory) and installs a seccomp filter that its children
inherit (DENIED_SYSCALLS).

From the host, on stdin: first "K <hex key>", then jobs:
    J <job_id> <timeout_ms> <memory_mb> <scope> <n_fields>\n  then n_fields of  <length>\n<bytes>
    field 0 is the code, fields 1.. are the test calls; scope is "module" (each test runs
    the code as a fresh module and evaluates its call there) or "function" (the official
    grader's scoping: each test runs the code with fresh locals apart from its globals, as
    the body of a function does, and evaluates its call with both, so top-level names
    are invisible inside the answer's own functions; the globals are one dict for all the
    tests of a child, so what the code's functions set with `global` is there in the next
    test, as in the official grader's module; a child forked again after a timeout or a
    crash starts with empty globals).
To the host, on stdout, in batches at most FLUSH_AFTER_S old, every line tagged with the
job id, tests in order 1..n, each exactly once:
    <job_id> R <k> <microseconds> <=|~> <canonical text>   test k returned a value (its _Clock time)
    <job_id> E <k> <microseconds> <error>                  test k failed
    <job_id> C <error>                                     the code did not compile (no R/E)
    <job_id> D <ok|dirty|tampered> <mac>                   end; dirty asks for a new sandbox
mac is HMAC-SHA256 under the host's key of every line of the job before it and of the D
line up to the mac, so nothing but this server can end a job.
"""
import os
import sys
import time
import select
import signal
import resource
import builtins
import errno
import gc
from importlib.machinery import PathFinder as _PathFinder  # half a millisecond

if "encode" not in globals():  # canonical.py defines it when both are sent into the sandbox as one program
    from colbench.grading.canonical import encode

OUTPUT_CAP = 1 << 20  # bytes a task may send back; more and it is stopped
HASH_ABOVE = 64 << 10  # longer canonical texts travel as a digest
FILE_SIZE_CAP = 16 << 20
OPEN_FILES_CAP = 64
PROCESS_CAP = 16  # per uid: counts this sandbox's server (and bwrap's monitor) too
START_SLACK_S = 0.5  # fork and set-up of a child, before its first test begins
WALL_BACKSTOP = 10  # a test ends after this many times its limit of wall time, whatever its idle-machine time
TIMEOUT_BACKSTOP = "timeout (wall backstop)"  # a test ended by the backstop alone: the machine kept it off the CPU
FLUSH_AFTER_S = 0.25  # longest a finished line waits before going to the host
WIPE_BUDGET_S = 2.0  # a work dir that takes longer to empty asks for a new sandbox
IGNORED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
TAMPERED = "tampered with the grading protocol"

# Debian's Python libraries: the libseccomp bindings (python3-seccomp) and the offered ones.
LIBRARY_PATH = "/usr/lib/python3/dist-packages"
SECCOMP_PATH = LIBRARY_PATH
# The third-party libraries graded code may import, as the official grader's environment
# has them (its requirements pull in numpy and pandas): Debian's python3-numpy and
# python3-pandas, and the modules pandas needs. Only these top-level names are found in
# LIBRARY_PATH, read-only; the rest of that folder stays unimportable, so that bwrap
# (which shows the host's /usr) and Docker (whose image holds only these) grade alike.
OFFERED_MODULES = ("numpy", "pandas", "dateutil", "pytz", "six")
# Imported by the server before it forks the children of a job whose code names them:
# the official grader's process pays for an import once, not within a test's second
# (pandas takes 0.3 s to import here, more under load).
PRELOADED = ("numpy", "pandas")
# ENOSYS, not EPERM: glibc falls back from clone3 to clone on it, and it tells "our filter
# said no" apart from the EPERM a missing capability gives, so tests can see the filter.
DENIED_ERRNO = errno.ENOSYS
DENIED_SYSCALLS = (
    # reading or steering another process
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp",
    # System V IPC and POSIX message queues: objects that outlive the process
    "shmget", "shmat", "shmctl", "shmdt", "msgget", "msgsnd", "msgrcv", "msgctl",
    "semget", "semop", "semtimedop", "semctl",
    "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr",
    # kernel interfaces no answer needs, each with a history of escapes
    "keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    # namespaces and mounts (clone3's flags sit in memory a filter cannot read)
    "clone3", "setns", "mount", "umount2", "pivot_root", "chroot", "open_tree", "move_mount",
    "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
)
NAMESPACE_FLAGS = (  # CLONE_NEW*: denied in clone and unshare
    0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000, 0x00000080,
)
PR_SET_DUMPABLE = 4

# Captured before any graded code runs; graded code may delete or replace the originals.
_write = os.write
_read = os.read
_builtins_dict = builtins.__dict__
_saved_builtins = dict(_builtins_dict)
_AnyError = BaseException  # `except BaseException` would look the name up in builtins
_get_int_digits = getattr(sys, "get_int_max_str_digits", None)  # Python 3.11 (and 3.10.7+)
_set_int_digits = getattr(sys, "set_int_max_str_digits", None)


# ---------------------------------------------------------------- server (long-lived)

def serve(workdir, cleanup, seccomp="required"):
    """cleanup: 'ns' (own pid namespace: kill all but pid 1), 'uid' (own uid: kill all),
    or 'group' (shared uid: kill only the child's process group). seccomp: 'required'
    (refuse to serve without the filter) or 'optional' (--sandbox none)."""
    _make_undumpable()
    for number in IGNORED_SIGNALS:
        signal.signal(number, signal.SIG_IGN)
    stdin = sys.stdin.buffer
    key = _read_key(stdin)
    os.makedirs(workdir, exist_ok=True)
    _warm_up()
    # Without the filter, an answer could leave IPC objects behind: then look after each job.
    look_for_ipc = not _install_filter(seccomp == "required")
    sys.meta_path.append(_OfferedLibraries)
    _send_line("READY")
    while True:
        job = _read_job(stdin)
        if job is None:
            return
        _run_job(job, workdir, cleanup, key, look_for_ipc)


def _fail(why):
    sys.stderr.write(why + "\n")
    sys.exit(3)


def _make_undumpable():
    """PR_SET_DUMPABLE=0: a graded child (same uid) cannot ptrace us or read our memory,
    and our children inherit the flag. Without it we refuse to serve (fail closed)."""
    import ctypes  # once per sandbox, not per task

    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        _fail("cannot set PR_SET_DUMPABLE")


def _read_key(stdin):
    """The host's secret for this sandbox's MACs. Sent on stdin: argv shows in /proc."""
    import hmac  # noqa: F401  (imported once here so that _run_job's import is free)

    line = stdin.readline().split()
    if len(line) != 2 or line[0] != b"K":
        _fail("no key from the host")
    return bytes.fromhex(line[1].decode("ascii"))


def _install_filter(required):
    """Load the seccomp filter (DENIED_SYSCALLS) on ourselves; every child inherits it.
    False where it could not be had and was not required."""
    sys.path.insert(0, SECCOMP_PATH)
    try:
        import seccomp
    except ImportError as error:
        if required:
            _fail("no seccomp bindings (install Debian's python3-seccomp): %s" % error)
        return False
    finally:
        sys.path.remove(SECCOMP_PATH)
    deny = seccomp.ERRNO(DENIED_ERRNO)
    rules = seccomp.SyscallFilter(seccomp.ALLOW)
    for name in DENIED_SYSCALLS:
        rules.add_rule(deny, name)
    for flag in NAMESPACE_FLAGS:
        for name in ("clone", "unshare"):
            rules.add_rule(deny, name, seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
    rules.add_rule(deny, "prctl", seccomp.Arg(0, seccomp.EQ, PR_SET_DUMPABLE), seccomp.Arg(1, seccomp.NE, 0))
    rules.load()  # also sets no_new_privs
    return True


class _OfferedLibraries:
    """The import hook for OFFERED_MODULES (their submodules then come from their own
    __path__). LIBRARY_PATH itself is not on sys.path."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if path is not None or name not in OFFERED_MODULES:
            return None
        return _PathFinder.find_spec(name, [LIBRARY_PATH])


def _preload(code):
    """Import the PRELOADED libraries the code names (its children inherit them)."""
    for name in PRELOADED:
        if name in code and name not in sys.modules:
            try:
                __import__(name)
            except Exception:
                pass  # not installed: the child's own import says so, as a test's error


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


def _run_job(job, workdir, cleanup, key, look_for_ipc):
    """Run all tests of one job, forking a new child after each timeout or crash."""
    import hmac

    state = {
        "budget": OUTPUT_CAP, "stop": False, "tampered": False,
        "outbox": [], "flushed": time.monotonic(), "mac": hmac.new(key, digestmod="sha256"),
    }
    _preload(job["code"])
    test_count = len(job["calls"])
    next_test = 1
    clean = True
    while next_test <= test_count and not state["stop"]:
        next_test = _run_child(job, next_test, workdir, state)
        clean = _clean_up(cleanup) and clean
    clean = _wipe(workdir) and not (look_for_ipc and _ipc_objects()) and clean
    verdict = "tampered" if state["tampered"] else "ok" if clean else "dirty"
    end = "%s D %s" % (job["id"], verdict)
    state["mac"].update(end.encode("ascii"))
    state["outbox"].append(end + " " + state["mac"].hexdigest())
    _flush(state)


def _run_child(job, start, workdir, state):
    """Fork one child for tests start..n; return the first test it did not settle."""
    tag = job["id"]
    results, results_w = os.pipe()
    orders_r, orders = os.pipe()
    nonce = _nonce()
    gc.freeze()  # the child's collector then skips our objects: no copy-on-write storm
    pid = os.fork()
    if pid == 0:
        try:
            os.close(results)
            os.close(orders)
            _child(job, start, workdir, orders_r, results_w, nonce)
        finally:
            os._exit(70)
    os.close(results_w)
    os.close(orders_r)
    os.set_blocking(results, False)
    os.set_blocking(orders, False)
    exit_watch = os.pidfd_open(pid)

    test_count = len(job["calls"])
    current = None  # the test handed to the child; None while it compiles
    clock = _Clock(pid, job["timeout"] + START_SLACK_S)  # fork, set-up and compile
    pending = b""
    outcome = None  # "done", or why this child ended early
    watching = [results, exit_watch]

    while outcome is None:
        remaining, outcome = clock.remaining()
        if outcome is not None:
            break
        ready, _, _ = select.select(watching, [], [], remaining)
        if results in ready:
            chunk = _read_some(results)
            if chunk is None:
                watching = [exit_watch]  # the child closed its end; wait for its exit
            else:
                state["budget"] -= len(chunk)
                pending += chunk
        if exit_watch in ready:
            pending += _drain(results, state)
        if state["budget"] < 0:
            outcome = "output too large"
            break
        while b"\n" in pending and outcome is None:
            raw, pending = pending.split(b"\n", 1)
            kind, rest = _parse(raw, nonce)
            spent = clock.spent()
            if current is None and kind == "K":
                current = start
            elif current is None and kind == "C":
                outcome = "done"
                if start == 1:
                    _post(state, "%s C %s" % (tag, rest))
                    state["stop"] = True
                else:
                    current = start  # compiled before, not now: this test fails
                    outcome = "did not compile again"
                break
            elif current is not None and kind in ("R", "E"):
                _post(state, "%s %s %d %d %s" % (tag, kind, current, int(spent * 1e6), rest))
                if current == test_count:
                    outcome = "done"
                    break
                current += 1
            else:
                outcome = TAMPERED
                break
            nonce = _nonce()  # the next reply must carry the next order's nonce
            if not _hand(orders, current, nonce):
                outcome = "stopped taking tests"
                break
            clock = _Clock(pid, job["timeout"])
        if exit_watch in ready and outcome is None:
            outcome = _exit_reason(pid)

    _kill(pid)
    _reap(pid)
    for fd in (results, orders, exit_watch):
        os.close(fd)
    if outcome == "done":
        return test_count + 1
    if outcome == TAMPERED:
        state["tampered"] = state["stop"] = True
        return test_count + 1
    if current is None:
        outcome += " while compiling"
        if start == 1:  # the code could not even be compiled: every test fails the same way
            _post(state, "%s C %s" % (tag, outcome))
            state["stop"] = True
            return test_count + 1
        current = start
    _post(state, "%s E %d %d %s" % (tag, current, int(clock.spent() * 1e6), outcome))
    if outcome == "output too large":
        for later in range(current + 1, test_count + 1):
            _post(state, "%s E %d 0 output too large" % (tag, later))
        state["stop"] = True
    return current + 1


class _Clock:
    """One test's time, as an idle machine would have measured it: the wall time since it began less the time the
    child spent waiting, runnable, for a CPU that others held (the scheduler's run delay, /proc/<pid>/schedstat).
    A computing answer is charged its CPU time and a sleeping one its sleep, as the official grader's wall clock
    charges them on an idle machine, and neighbours that keep the cores busy charge it nothing. A wall-clock
    backstop, WALL_BACKSTOP times the limit, still ends a test whatever the estimate says."""

    def __init__(self, pid, limit):
        self.pid, self.limit = pid, limit
        self.began = time.monotonic()
        self.backstop = self.began + WALL_BACKSTOP * limit
        self.waited = self._waited()
        self.cpu_clock = ((~pid) << 3) | 2  # the kernel's CPU-time clock of process `pid` (CPUCLOCK_SCHED)

    def _waited(self):
        try:
            with open("/proc/%d/schedstat" % self.pid, "rb") as stats:
                return int(stats.read().split()[1]) / 1e9
        except (OSError, ValueError, IndexError):  # a kernel without schedstats: the wall clock alone
            return None

    def spent(self):
        now, waited = time.monotonic(), self._waited()
        if waited is None or self.waited is None:
            return now - self.began
        # At least 0: a wait that began before this clock (a child just forked) is counted once it ends.
        return max(0.0, now - self.began - (waited - self.waited))

    def remaining(self):
        """(seconds to wait before looking again, None) or (0, why the test is over)."""
        if time.monotonic() >= self.backstop:
            return 0, TIMEOUT_BACKSTOP
        left = self.limit - self.spent()
        if left <= 0 and not self._waiting_for_a_cpu():
            # Read again: the look takes a moment (far longer for a server throttled beside its child), and a child
            # that got the CPU during it had the wait it ended added to its run delay, which the first read lacked.
            left = self.limit - self.spent()
            if left <= 0:
                return 0, "timeout"
        # The run delay grows only once a waiting child gets a CPU again: until then look every few milliseconds.
        # Never below 0: a server kept off the CPU itself can pass the backstop while it looks.
        return max(0.0, min(max(left, 0.002), self.backstop - time.monotonic())), None

    def _waiting_for_a_cpu(self):
        """The child is runnable and has not run for a moment: its current wait is not in its run delay yet."""
        try:
            with open("/proc/%d/stat" % self.pid, "rb") as stat:
                runnable = stat.read().rpartition(b")")[2].split()[0] == b"R"
            if not runnable:
                return False
            before = time.clock_gettime(self.cpu_clock)
            time.sleep(0.001)
            return time.clock_gettime(self.cpu_clock) == before
        except (OSError, ValueError, IndexError):
            return False


def _nonce():
    return os.urandom(8).hex()


def _hand(orders, number, nonce):
    """Give the child test `number`; False if it no longer listens."""
    try:
        return os.write(orders, b"%d %s\n" % (number, nonce.encode("ascii"))) > 0
    except OSError:  # a full pipe means graded code took orders meant for its runner
        return False


def _parse(raw, nonce):
    """(kind, rest) of a child's line; kind '?' for anything our runner would not write."""
    if raw.translate(None, _PRINTABLE):  # a control byte, or anything not ASCII
        return "?", ""
    text = raw.decode("ascii")
    stamp, _, line = text.partition(" ")
    if stamp != nonce:
        return "?", ""
    kind, _, rest = line.partition(" ")
    if kind == "K" and not rest:
        return kind, ""
    if kind in ("C", "E") and rest:
        return kind, rest
    if kind == "R" and rest[:2] in ("= ", "~ "):
        return kind, rest
    return "?", ""


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
            os.kill(-1, signal.SIGKILL)  # everything of our uid, or our namespace, but us
        except OSError:
            pass
    if cleanup != "ns":
        return True
    give_up = time.monotonic() + 1.0
    while time.monotonic() < give_up:
        _reap_orphans()  # we are pid 1: orphans are ours to reap
        if not _others(me):
            return True
        time.sleep(0.002)
    return False


def _others(me):
    """Other processes in our pid namespace, besides a reaper at pid 1 that is not us."""
    return [name for name in os.listdir("/proc") if name.isdigit() and name != "1" and int(name) != me]


def _reap_orphans():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _wipe(root):
    """Empty the work dir, however deep or locked the tree a child left. False if it
    could not be done in WIPE_BUDGET_S: then a fresh sandbox is cheaper."""
    give_up = time.monotonic() + WIPE_BUDGET_S
    stack = [root]  # directories to empty; a directory is removed once it is empty
    try:
        while stack:
            if time.monotonic() > give_up:
                return False
            path = stack[-1]
            os.chmod(path, 0o700)  # a child may have locked its own dirs
            subdirs = []
            with os.scandir(path) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        subdirs.append(entry.path)
                    else:
                        os.unlink(entry.path)
            if subdirs:
                stack.extend(subdirs)
            else:
                stack.pop()
                if path != root:
                    os.rmdir(path)
    except OSError:  # e.g. a chain too deep for a path: let a new sandbox start clean
        return False
    return True


def _ipc_objects():
    """Does a System V IPC object exist? It would outlive the job (and be readable by the
    next one), so the sandbox must go. Only asked without the filter, which forbids them:
    reading these tables costs as much as a small job."""
    for kind in ("shm", "msg", "sem"):
        try:
            with open("/proc/sysvipc/" + kind, "rb") as table:
                if len(table.read().splitlines()) > 1:  # a header, then one row per object
                    return True
        except OSError:
            pass
    return False


def _post(state, line):
    """Queue a line for the host; send the queue if it has waited a while, so the
    host's silence watchdog hears from us during slow jobs, and fast ones cost one write."""
    state["outbox"].append(line)
    state["mac"].update(line.encode("ascii") + b"\n")
    if time.monotonic() - state["flushed"] > FLUSH_AFTER_S:
        _flush(state)


def _flush(state):
    _send_line("\n".join(state["outbox"]))
    state["outbox"] = []
    state["flushed"] = time.monotonic()


def _send_line(line):
    view = memoryview((line + "\n").encode("ascii"))
    while view:
        view = view[os.write(1, view):]


# ---------------------------------------------------------------- child (one per task)

def _child(job, start, workdir, orders, out, nonce):
    os.setsid()
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)  # graded code prints into nothing; results use `out`
    low, high = sorted((orders, out))
    os.closerange(3, low)
    os.closerange(low + 1, high)
    os.closerange(high + 1, 1 << 16)
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
    # Graded code keeps Python's default int-to-str digit limit (4300), as the official
    # grader's Python 3.10/3.11 has it: str() of a 5,000-digit int raises there too.
    _run_tests(job["code"], job["calls"], orders, out, nonce, job["function_scope"])
    os._exit(0)


def _run_tests(source, calls, orders, out, nonce, function_scope):
    try:
        code = compile(source, "<answer>", "exec")
    except _AnyError as error:
        _emit(out, nonce + " C " + _describe(error))
        return
    _emit(out, nonce + " K")
    shared = _fresh_namespace()  # function scope: the globals all of this child's tests share
    while True:
        order = _next_order(orders)
        if order is None:
            return
        number, nonce = order
        try:
            call = compile(calls[number - 1], "<test%d>" % number, "eval")
            namespace = shared if function_scope else _fresh_namespace()
            local = {} if function_scope else namespace
            exec(code, namespace, local)
            value = eval(call, namespace, local)
            _restore_builtins()
            text, comparable = _encode_any_int(value)
            if len(text) > HASH_ABOVE and "np." in text:
                # Long texts travel as a digest, compared by exact text: numpy's marks are left out
                # of them, so a long list of np.float64 still equals the reference's floats. Both
                # sides decide on the text without marks (the encoder ran no graded code).
                text = _encode_any_int(value, plain=True)[0]
        # BaseException too: SystemExit or KeyboardInterrupt fails its own test, and the
        # next tests still run (the official grader's `except Exception` would let them
        # end its whole evaluation).
        except _AnyError as error:
            _restore_builtins()
            _emit(out, "%s E %s" % (nonce, _describe(error) or "Error"))
            continue
        if len(text) > HASH_ABOVE:
            text = _digest(text)
        _emit(out, "%s R %s %s" % (nonce, "=" if comparable else "~", text))


def _fresh_namespace():
    return {"__name__": "__graded__", "__builtins__": builtins}


def _encode_any_int(value, plain=False):
    """encode() without the int-to-str digit limit: a returned big int is a valid output
    (the official grader compares ints, not their text). Graded code runs under the
    limit; encode() runs no graded code, so lifting it here gives graded code nothing."""
    if _set_int_digits is None:
        return encode(value, plain)
    limit = _get_int_digits()
    _set_int_digits(0)
    try:
        return encode(value, plain)
    finally:
        _set_int_digits(limit)


def _next_order(orders):
    """(test number, nonce) from the server, or None if it has no more for us."""
    line = b""
    while not line.endswith(b"\n"):
        chunk = _read(orders, 64)
        if not chunk:
            return None
        line += chunk
    number, nonce = line.split()
    return int(number), nonce.decode("ascii")


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
    """One line to the server: printable ASCII only, as the server demands."""
    data = line.encode("ascii", "backslashreplace").translate(_UNPRINTABLE_TO_QUESTION_MARK) + b"\n"
    while data:
        data = data[_write(out, data):]


_PRINTABLE = bytes(range(0x20, 0x7F))
_UNPRINTABLE_TO_QUESTION_MARK = bytes(b if 0x20 <= b <= 0x7E else 0x3F for b in range(256))


if __name__ == "__main__":
    serve(*sys.argv[1:])
