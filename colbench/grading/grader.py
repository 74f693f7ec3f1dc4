"""Grade backend answers: run the reference and the answer on each test call, compare.

For every test call, run the reference code then the call, and the answer code then the
call; the test passes iff both outputs are equal and the reference output is not None.
The answer has 1 s per test; the reference, which the official grader runs with no time
limit, has REFERENCE_TIMEOUT_S. What code an answer's text gives, and how it is scoped,
is the grading's (semantics.py: ``official``, the default, or ``strict``). Every sandbox
of one Grader starts under one hash seed (sandboxes/base.HASH_SEED), so reference and
answer iterate equal sets in the same order, as in the official grader's single process.
Unlike the official grader:

- model-written code runs only inside a sandbox (see sandboxes/), never here;
- outputs are compared here as canonical text (canonical.py, made in the sandbox) by
  `==`'s rules (compare.py), never with `==` on objects that untrusted code made;
- the reference runs in sandboxes of its own, once per task (cached by content hash),
  so neither the reference nor the expected outputs ever exist where an answer runs;
- each test's output is capped (1 MiB per task; long values travel as a digest).

    with Grader(sandbox="auto", workers=2) as grader:
        reports = grader.grade([(task, answer_text), ...])
        future = grader.submit(task, answer_text)  # Future[GradeReport]
"""
from __future__ import annotations

import re
import sys
import threading
import warnings
from concurrent.futures import Future
from dataclasses import dataclass, field

from colbench.tasks.spec import TaskSpec

from .compare import same
from .pool import Job, Outcome, Pool, Run
from .runner import TIMEOUT_BACKSTOP
from .semantics import DEFAULT_GRADING, SCOPE, banned_text, check_grading, code_of
from .sandboxes import SandboxUnavailable, resolve
from .sandboxes.base import HASH_SEED
from .sandboxes.plain import WARNING

__all__ = ["Grader", "GradeReport", "TestOutcome", "SandboxUnavailable"]


@dataclass
class TestOutcome:
    """One test of a graded answer (stored as a store.models.TestResult row)."""

    __test__ = False  # not a pytest class, despite the name

    name: str  # "test1"
    call: str  # the expression, e.g. "f(3, 4)"
    expected: str | None  # canonical text of the reference output; None if it failed
    actual: str | None  # canonical text of the answer's output; None if it failed
    passed: bool
    error: str | None  # one short line: "timeout", "MemoryError", "NameError: ..."
    duration_s: float
    timed_out: bool = False  # the answer ran past the test's time limit


@dataclass
class GradeReport:
    tests: list[TestOutcome] = field(default_factory=list)
    fraction_passed: float = 0.0  # the reward
    success: bool = False  # every test passed, and there was at least one
    error: str | None = None  # task-level: "syntax error: ...", "sandbox crashed", ...
    grading: str = DEFAULT_GRADING  # the semantics it was graded under (semantics.py)
    sandbox_failed: bool = False  # the sandbox, not the code, failed: no verdict on the answer
    banned: str | None = None  # official grading: the blacklisted text the answer holds (scored 0 unrun)


BLACKLISTED = "blacklisted: "  # the task-level error of an answer on the official blacklist
TIMEOUT = "timeout"  # the in-sandbox server's word for a test that ran past its limit (runner.py)
TIMEOUTS = (TIMEOUT, TIMEOUT_BACKSTOP)  # ... and for one that only its wall backstop ended
# Per test of a reference run. The official grader gives the reference no limit at all (only
# the answer its 1 s), so a reference that takes 1.5 s still defines the expected output;
# a bound all the same, so that a reference that never ends costs minutes, not a worker.
REFERENCE_TIMEOUT_S = 30.0


def test_order(name: str):
    """Natural order: test2 before test10."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


class Grader:
    def __init__(
        self, sandbox: str = "auto", workers: int = 2, test_timeout_s: float = 1.0, memory_mb: int = 1024,
        grading: str = DEFAULT_GRADING, hash_seed: int = HASH_SEED, answer_hash_seed: int | None = None,
    ):
        """hash_seed: the PYTHONHASHSEED of every sandbox (of references and answers alike).
        answer_hash_seed: another seed for the answers' sandboxes alone; only `tasks validate` sets
        it, to find references whose outputs depend on the seed. Graded answers always share it."""
        self.grading = check_grading(grading)
        if sandbox == "none":
            sys.stderr.write(WARNING)
            warnings.warn("grading without a sandbox (--sandbox none)", RuntimeWarning, stacklevel=2)
        if not 1 <= workers <= 32:
            raise ValueError("workers must be between 1 and 32")
        backend = resolve(sandbox)
        self.backend: str = backend.name
        self.test_timeout_s = test_timeout_s
        self.memory_mb = memory_mb
        # Separate sandboxes for references: their code and outputs must never sit in a
        # server's memory that an answer's child is later forked from.
        self._answers = Pool(backend, workers, memory_mb=memory_mb,
                             hash_seed=hash_seed if answer_hash_seed is None else answer_hash_seed)
        self._references = Pool(backend, workers, memory_mb=memory_mb, hash_seed=hash_seed)
        self._reference_runs: dict[str, Future] = {}
        self._lock = threading.Lock()

    def __enter__(self) -> Grader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._answers.close()
        self._references.close()

    def grade(self, batch: list[tuple[TaskSpec, str]]) -> list[GradeReport]:
        futures = [self.submit(task, answer) for task, answer in batch]
        return [future.result() for future in futures]

    def submit(self, task: TaskSpec, answer_text: str) -> Future:
        """Future[GradeReport]; grading starts at once on a free worker."""
        if not isinstance(task.test_cases, dict):
            raise ValueError(f"a {task.family} task has no test calls to grade code by")
        names = sorted(task.test_cases, key=test_order)
        calls = [task.test_cases[name] for name in names]
        report: Future = Future()
        if not names:
            report.set_result(GradeReport(error="task has no test cases"))
            return report

        reference = self._reference_run(task, calls)
        banned = banned_text(answer_text) if self.grading == "official" else None
        if banned:
            # The official grader scores such an answer 0 without running it.
            answer: Future = Future()
            answer.set_result(Run(error=f"{BLACKLISTED}the answer contains {banned!r}"))
        else:
            answer = self._answers.submit(self._job(code_of(answer_text, self.grading), calls))
        pending = [2]

        def one_done(_: Future) -> None:
            with self._lock:
                pending[0] -= 1
                if pending[0]:
                    return
            try:
                report.set_result(_report(names, calls, reference.result(), answer.result(), self.grading, banned))
            except BaseException as error:
                report.set_exception(error)

        reference.add_done_callback(one_done)
        answer.add_done_callback(one_done)
        return report

    def _job(self, code: str, calls: list[str], timeout_s: float | None = None) -> Job:
        return Job(code, calls, timeout_s or self.test_timeout_s, self.memory_mb, SCOPE[self.grading])

    def _reference_run(self, task: TaskSpec, calls: list[str]) -> Future:
        key = task.content_hash  # one grader, one grading: the scoping is the same for every run
        with self._lock:
            cached = self._reference_runs.get(key)
            if cached is not None:
                return cached
            timeout_s = max(REFERENCE_TIMEOUT_S, self.test_timeout_s)
            future = self._references.submit(self._job(task.ground_truth, calls, timeout_s))
            self._reference_runs[key] = future

        def forget_if_broken(done: Future) -> None:
            # A sandbox failure says nothing about the reference: try again next time.
            if done.exception() is not None or done.result().sandbox_failed:
                with self._lock:
                    if self._reference_runs.get(key) is done:
                        del self._reference_runs[key]

        future.add_done_callback(forget_if_broken)
        return future


def _report(names: list[str], calls: list[str], reference: Run, answer: Run, grading: str,
            banned: str | None = None) -> GradeReport:
    task_error = None
    if answer.error:
        task_error = _task_error(answer.error)
    elif reference.error:
        task_error = f"reference failed: {reference.error}"
    tests = []
    outcomes = answer.outcomes or [Outcome(error=task_error) for _ in names]  # a blacklisted answer never ran
    for name, call, ref, got in zip(names, calls, reference.outcomes, outcomes):
        passed = (
            ref.error is None
            and got.error is None
            and ref.value != "None"
            and same((ref.value, ref.comparable), (got.value, got.comparable))
        )
        error = got.error
        if error is None and ref.error is not None:
            error = f"reference failed: {ref.error}"
        elif error is None and ref.value == "None":
            error = "reference output is None"
        if answer.error and not answer.sandbox_failed:
            error = task_error  # the answer never ran: say why on every row
        tests.append(TestOutcome(name, call, ref.value, got.value, passed, error, got.duration_s,
                                 timed_out=got.error in TIMEOUTS or ref.error in TIMEOUTS))
    passed_count = sum(t.passed for t in tests)
    return GradeReport(
        tests=tests,
        fraction_passed=passed_count / len(tests),
        success=passed_count == len(tests),
        error=task_error,
        grading=grading,
        sandbox_failed=answer.sandbox_failed or reference.sandbox_failed,
        banned=banned,
    )


def _task_error(message: str) -> str:
    if message.startswith(("SyntaxError", "IndentationError", "TabError")):
        return "syntax error: " + message.split(": ", 1)[-1]
    return message
