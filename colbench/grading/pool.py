"""Worker threads, each driving one sandboxed fork-server.

A Job goes in (code and test calls), a Run comes out (one Outcome per test). The worker
keeps a watchdog over the whole job as a backstop: the server inside enforces each
test's deadline, but graded code could stop or kill the server, and then only a dead
sandbox, a timeout here, or garbage would come back. Any of these costs the job under
way and a restart of that slot's sandbox, nothing else.
"""
from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field

START_TIMEOUT_S = 30.0
REPLY_CAP = 2 << 20  # bytes per job from the server (it caps children at 1 MiB)


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
        """Generous: every test and the compile step at their limit, plus fork slack."""
        return (len(self.calls) + 1) * (self.timeout_s + 0.6) + 5.0

    def silence_s(self) -> float:
        """Longest quiet spell of a healthy server: the server sends a line as each test
        ends, so at most a compile step and a test at their limits, a fork, and the
        clean-up after a killed child pass between two lines."""
        return 2 * self.timeout_s + 2.5


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


class Worker:
    """One slot: starts its sandbox lazily and again after it dies."""

    def __init__(self, backend, slot: int, memory_mb: int):
        self.backend, self.slot, self.memory_mb = backend, slot, memory_mb
        self.channel = None
        self._jobs_sent = 0

    def run(self, job: Job) -> Run:
        if self.channel is None:
            problem = self._start()
            if problem:
                return _failed(job, f"sandbox failed to start: {problem}")
        self._jobs_sent += 1
        job_id = f"j{self._jobs_sent}"
        try:
            self.channel.send(job.encode(job_id))
            reply, fresh = self._read_reply(job_id, job)
        except (OSError, TimeoutError, ValueError) as error:
            problem = {TimeoutError: "sandbox stopped answering", ValueError: "sandbox sent too much"}
            self.stop()
            return _failed(job, problem.get(type(error), "sandbox crashed"))
        if not fresh:
            self.stop()  # the server could not clean up after the task
        return _parse_reply(reply, job)

    def _start(self) -> str | None:
        try:
            self.channel = self.backend.start(self.slot, self.memory_mb)
            greeting = b""
            deadline = time.monotonic() + START_TIMEOUT_S
            while not greeting.endswith(b"READY\n"):
                chunk = self.channel.receive(deadline - time.monotonic())
                if not chunk or len(greeting) > 100:
                    raise OSError("no greeting")
                greeting += chunk
        except Exception as error:
            detail = self.channel.diagnostics() if self.channel is not None else ""
            self.stop()
            return f"{type(error).__name__}: {error} {detail}".strip()
        return None

    def _read_reply(self, job_id: str, job: Job) -> tuple[list[str], bool]:
        """Lines of this job, up to its end marker. Raises on death, silence, flood."""
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
            at = (b"\n" + data).find(end)
            if at >= 0 and data.endswith(b"\n"):
                text = data.decode("ascii", "replace")
                mine = [line[len(job_id) + 1 :] for line in text.splitlines() if line.startswith(job_id + " ")]
                return mine, mine[-1] == "D ok" if mine else False

    def stop(self) -> None:
        if self.channel is not None:
            self.channel.close()
            self.channel = None


def _failed(job: Job, reason: str) -> Run:
    return Run([Outcome(error=reason) for _ in job.calls], error=reason, sandbox_failed=True)


def _parse_reply(lines: list[str], job: Job) -> Run:
    """Lines from our server, tagged with this job's id (others were dropped).

    R <k> <microseconds> <=|~> <text>, E <k> <microseconds> <error>, C <error>, D <ok|dirty>.
    """
    outcomes: list[Outcome | None] = [None] * len(job.calls)
    run = Run()
    for line in lines:
        kind, _, rest = line.partition(" ")
        if kind == "C":
            run.error = rest
            continue
        if kind not in ("R", "E"):
            continue
        parts = rest.split(" ", 3 if kind == "R" else 2)
        try:
            index, seconds = int(parts[0]) - 1, int(parts[1]) / 1e6
        except (ValueError, IndexError):
            continue  # malformed: leave the test without a result
        if not 0 <= index < len(outcomes) or outcomes[index] is not None:
            continue
        if kind == "R" and len(parts) == 4:
            outcomes[index] = Outcome(parts[3], parts[2] == "=", None, seconds)
        elif kind == "E":
            outcomes[index] = Outcome(None, False, parts[2] if len(parts) > 2 else "error", seconds)
    missing = run.error or "no result"
    run.outcomes = [o if o is not None else Outcome(error=missing) for o in outcomes]
    return run


class Pool:
    """`size` workers, each a thread with its own sandbox, fed from one queue."""

    def __init__(self, backend, size: int, first_slot: int, memory_mb: int):
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._workers = [Worker(backend, first_slot + i, memory_mb) for i in range(size)]
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
        for _ in self._threads:
            self._jobs.put(None)
        for thread in self._threads:
            thread.join(timeout=30)
