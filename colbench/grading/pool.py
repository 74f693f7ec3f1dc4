"""Worker threads, each driving one sandboxed fork-server.

A Job goes in (code and test calls), a Run comes out (one Outcome per test). The worker
keeps a watchdog over the whole job as a backstop: the server inside enforces each
test's deadline, but should graded code ever stop or kill the server, only a dead
sandbox, a timeout here, or garbage would come back. Any of these costs the job under
way and a restart of that slot's sandbox, nothing else.

The reply must be exactly what runner.py's protocol allows: printable lines split on
"\n" only, every one tagged with this job, tests 1..n in order and once each, then an
end line whose MAC (under a key only this worker and its server hold) covers them all,
with nothing after it. Anything else is tampering: the task fails and the sandbox is
replaced. So is a sandbox whose process 1 is no longer our server; and every
RECYCLE_AFTER jobs a sandbox is replaced anyway, so nothing lives in one for long.
"""
from __future__ import annotations

import hmac
import os
import queue
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field

from colbench.processes import start_time

from .runner import START_SLACK_S, TAMPERED, WALL_BACKSTOP
from .sandboxes.base import HASH_SEED, server_intact

START_TIMEOUT_S = 30.0
PRELOAD_S = 10.0  # the server importing numpy and pandas before a job (runner.PRELOADED), under load
REPLY_CAP = 2 << 20  # bytes per job from the server (it caps children at 1 MiB)
RECYCLE_AFTER = 500  # jobs per sandbox
PRINTABLE_OR_NEWLINE = bytes(range(0x20, 0x7F)) + b"\n"


@dataclass
class Job:
    code: str
    calls: list[str]
    timeout_s: float = 1.0
    memory_mb: int = 1024
    scope: str = "module"  # "module" | "function": how the code and calls are executed (semantics.SCOPE)

    def encode(self, job_id: str) -> bytes:
        fields = [self.code.encode("utf-8", "replace")] + [c.encode("utf-8", "replace") for c in self.calls]
        header = f"J {job_id} {int(self.timeout_s * 1000)} {self.memory_mb} {self.scope} {len(fields)}\n".encode()
        return header + b"".join(b"%d\n%s" % (len(f), f) for f in fields)

    def watchdog_s(self) -> float:
        """Generous: the compile step and every test at their wall backstops (runner._Clock), plus fork slack and
        the server's own imports. A loaded machine may keep each of them running that long, and each is still
        charged fairly inside; a host that gave up sooner would fail a sound sandbox's answer as its own."""
        steps = len(self.calls) + 1
        return WALL_BACKSTOP * (steps * self.timeout_s + START_SLACK_S) + 0.6 * steps + 5.0 + PRELOAD_S

    def silence_s(self) -> float:
        """Longest quiet spell of a healthy server: the server sends a line as each test
        ends, so at most its imports, a compile step and a test at their wall backstops, a
        fork, and the clean-up after a killed child pass between two lines."""
        return WALL_BACKSTOP * (2 * self.timeout_s + START_SLACK_S) + 2.5 + PRELOAD_S


@dataclass
class Outcome:
    value: str | None = None  # canonical text, None if the test raised or died
    comparable: bool = False
    error: str | None = None
    duration_s: float = 0.0


@dataclass
class Run:
    outcomes: list[Outcome] = field(default_factory=list)
    error: str | None = None  # the code did not compile, or the sandbox failed
    sandbox_failed: bool = False  # not the code's verdict: worth retrying later


class Tampered(Exception):
    """The reply broke the protocol: only graded code could have made it so."""


class Worker:
    """One slot: starts its sandbox lazily, again after it dies, and every RECYCLE_AFTER jobs."""

    def __init__(self, backend, slot: int, memory_mb: int, hash_seed: int = HASH_SEED):
        self.backend, self.slot, self.memory_mb, self.hash_seed = backend, slot, memory_mb, hash_seed
        self.channel = None
        self._key = b""
        self._server: tuple[int, str | None] | None = None  # host pid and start time of pid 1
        self._jobs_here = 0
        self._jobs_sent = 0

    def run(self, job: Job) -> Run:
        if self.channel is not None and self._jobs_here >= RECYCLE_AFTER:
            self.stop()
        if self.channel is None:
            problem = self._start()
            if problem:
                return _failed(job, f"sandbox failed to start: {problem}")
        self._jobs_sent += 1
        self._jobs_here += 1
        job_id = f"j{self._jobs_sent}"
        try:
            self.channel.send(job.encode(job_id))
            lines, verdict = self._read_reply(job_id, job)
            run = _parse_reply(lines, job)
        except Tampered:
            self.stop()
            return _tampered(job)
        except (OSError, TimeoutError, ValueError) as error:
            problem = {TimeoutError: "sandbox stopped answering", ValueError: "sandbox sent too much"}
            self.stop()
            return _failed(job, problem.get(type(error), "sandbox crashed"))
        if self._server is not None and not server_intact(*self._server):
            self.stop()
            return _tampered(job)
        if verdict == "tampered":
            self.stop()
            return _tampered(job)
        if verdict != "ok":
            self.stop()  # the server could not clean up after the task
        return run

    def _start(self) -> str | None:
        self._key = os.urandom(32)
        self._jobs_here = 0
        self._server = None
        try:
            self.channel = self.backend.start(self.slot, self.memory_mb, self.hash_seed)
            self.channel.send(b"K %s\n" % self._key.hex().encode())
            greeting = b""
            deadline = time.monotonic() + START_TIMEOUT_S
            while not greeting.endswith(b"READY\n"):
                chunk = self.channel.receive(deadline - time.monotonic())
                if not chunk or len(greeting) > 100:
                    raise OSError("no greeting")
                greeting += chunk
            pid = self.channel.server_pid()
            if pid is not None and server_intact(pid, start_time(pid)):
                # Where the pid is not ours to see (a remote engine, another pid
                # namespace), there is nothing to watch, rather than a false alarm.
                self._server = (pid, start_time(pid))
        except Exception as error:
            detail = self.channel.diagnostics() if self.channel is not None else ""
            self.stop()
            return f"{type(error).__name__}: {error} {detail}".strip()
        return None

    def _read_reply(self, job_id: str, job: Job) -> tuple[list[str], str]:
        """This job's lines, untagged, and the end line's verdict (ok, dirty, tampered).
        Raises on death, silence or flood, and Tampered on anything off-protocol."""
        data = b""
        end = f"\n{job_id} D ".encode()
        give_up = time.monotonic() + job.watchdog_s()
        while True:
            wait = min(job.silence_s(), give_up - time.monotonic())
            chunk = self.channel.receive(wait)
            if not chunk:
                raise OSError("sandbox exited")
            data += chunk
            if len(data) > REPLY_CAP:
                raise ValueError("reply too large")
            if (b"\n" + data).find(end) >= 0 and data.endswith(b"\n"):
                return self._verify(job_id, data)

    def _verify(self, job_id: str, data: bytes) -> tuple[list[str], str]:
        if data.translate(None, PRINTABLE_OR_NEWLINE):
            raise Tampered
        *lines, end, after = data.split(b"\n")  # `after` is what follows the last newline
        tag = job_id.encode() + b" "
        if after or not all(line.startswith(tag) for line in [*lines, end]):
            raise Tampered  # a line of another job, or anything after the end line
        head, _, mac = end.rpartition(b" ")
        signed = b"".join(line + b"\n" for line in lines) + head
        if not hmac.compare_digest(hmac.new(self._key, signed, "sha256").hexdigest().encode(), mac):
            raise Tampered
        verdict = head[len(tag) + 2 :].decode()
        return [line[len(tag) :].decode() for line in lines], verdict

    def stop(self) -> None:
        if self.channel is not None:
            self.channel.close()
            self.channel = None


def _tampered(job: Job) -> Run:
    """Every test fails, and it is the answer's doing: no retry."""
    return Run([Outcome(error=TAMPERED) for _ in job.calls], error=TAMPERED)


def _failed(job: Job, reason: str) -> Run:
    return Run([Outcome(error=reason) for _ in job.calls], error=reason, sandbox_failed=True)


def _parse_reply(lines: list[str], job: Job) -> Run:
    """Lines from our server for this job, without the end line: either one "C <error>",
    or "R <k> <microseconds> <=|~> <text>" / "E <k> <microseconds> <error>" for k = 1..n
    in order. Raises Tampered on anything else."""
    if len(lines) == 1 and lines[0].startswith("C "):
        error = lines[0][2:]
        return Run([Outcome(error=error) for _ in job.calls], error=error)
    if len(lines) != len(job.calls):
        raise Tampered
    outcomes = []
    for number, line in enumerate(lines, start=1):
        kind, _, rest = line.partition(" ")
        parts = rest.split(" ", 3 if kind == "R" else 2)
        if kind not in ("R", "E") or len(parts) != (4 if kind == "R" else 3) or parts[0] != str(number):
            raise Tampered
        if not parts[1].isdigit() or (kind == "R" and parts[2] not in ("=", "~")):
            raise Tampered
        seconds = int(parts[1]) / 1e6
        if kind == "R":
            outcomes.append(Outcome(parts[3], parts[2] == "=", None, seconds))
        else:
            outcomes.append(Outcome(None, False, parts[2], seconds))
    return Run(outcomes)


SLOTS = 64  # sandboxes one process may hold at once: each slot has a uid of its own (slot_uid)
_free_slots = set(range(SLOTS))
_slots_lock = threading.Lock()


def _claim_slots(count: int) -> list[int]:
    """Slots no other pool of this process holds, so no two sandboxes share a uid or a cgroup."""
    with _slots_lock:
        if count > len(_free_slots):
            raise ValueError(f"at most {SLOTS} grading sandboxes at once in one process")
        claimed = sorted(_free_slots)[:count]
        _free_slots.difference_update(claimed)
        return claimed


class Pool:
    """`size` workers, each a thread with its own sandbox, fed from one queue."""

    def __init__(self, backend, size: int, memory_mb: int, hash_seed: int = HASH_SEED):
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._slots = _claim_slots(size)
        self._workers = [Worker(backend, slot, memory_mb, hash_seed) for slot in self._slots]
        self._threads = [threading.Thread(target=self._serve, args=(w,), daemon=True) for w in self._workers]
        for thread in self._threads:
            thread.start()

    def submit(self, job: Job) -> Future:
        future: Future = Future()
        self._jobs.put((job, future))
        return future

    def _serve(self, worker: Worker) -> None:
        while True:
            item = self._jobs.get()
            if item is None:
                worker.stop()
                return
            job, future = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(worker.run(job))
            except BaseException as error:  # a bug here must not hang the caller
                worker.stop()
                future.set_exception(error)

    def close(self) -> None:
        """Stop the workers. A job still running (the caller was interrupted) is not waited
        for: its sandbox is killed, which ends the job at once."""
        for _ in self._threads:
            self._jobs.put(None)
        for worker, thread in zip(self._workers, self._threads):
            thread.join(timeout=0.2)
            if thread.is_alive():
                worker.stop()
        for thread in self._threads:
            thread.join(timeout=5)
        with _slots_lock:
            _free_slots.update(self._slots)
        self._slots = []
