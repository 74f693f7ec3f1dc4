"""Tasks and answers the grading tests share, and the rule every attack is graded by:
in one batch beside benign answers, which must still score 1.0."""
from __future__ import annotations

import textwrap

from colbench.grading.grader import Grader, GradeReport
from colbench.tasks.spec import TaskSpec


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

ONE = backend_task("def f(x):\n    return x + 1\n", ["f(1)"], "one")
TWO = backend_task("def f(x):\n    return x + 1\n", ["f(1)", "f(2)"], "two")
TEN = backend_task("def f(x):\n    return x * 7\n", [f"f({i})" for i in range(10)], "ten")


def rows(report: GradeReport):
    return [(t.name, t.expected, t.actual, t.passed, t.error) for t in report.tests]


def assert_benign(report: GradeReport) -> None:
    assert report.success and report.fraction_passed == 1.0 and report.error is None, rows(report)


def grade_among_benign(grader: Grader, task: TaskSpec, answer: str) -> GradeReport:
    """Grade an attack between benign tasks; the benign ones must be untouched."""
    reports = grader.grade([BENIGN[0], (task, answer), BENIGN[1]])
    assert_benign(reports[0])
    assert_benign(reports[2])
    return reports[1]
