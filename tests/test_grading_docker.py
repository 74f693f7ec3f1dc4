"""The Docker backend, against a real engine. Skips where none answers."""
from __future__ import annotations

import pytest

from colbench.grading.grader import Grader
from colbench.grading.sandboxes.docker import DockerBackend
from colbench.tasks.spec import TaskSpec

WHY_NOT = DockerBackend.check()
pytestmark = pytest.mark.skipif(WHY_NOT is not None, reason=f"Docker backend not testable here: {WHY_NOT}")

ADD = TaskSpec("backend", "add", "def add(a, b):\n    return a + b\n", {f"test{i}": f"add({i}, 1)" for i in range(1, 4)})


def test_docker_grades_and_contains_a_loop():
    with Grader(sandbox="docker", workers=1) as grader:
        assert grader.backend == "docker"
        good, hang, after = grader.grade([
            (ADD, "def add(a, b):\n    return a + b"),
            (ADD, "def add(a, b):\n    while True:\n        pass"),
            (ADD, "import os\ndef add(a, b):\n    return a + b"),
        ])
    assert good.success and after.success
    assert [t.error for t in hang.tests] == ["timeout"] * 3


def test_docker_has_no_network():
    answer = "import socket\ndef add(a, b):\n    socket.create_connection(('1.1.1.1', 53), timeout=0.5)\n    return a + b"
    with Grader(sandbox="docker", workers=1) as grader:
        (report,) = grader.grade([(ADD, answer)])
    assert not report.success and report.tests[0].error.startswith("OSError")
