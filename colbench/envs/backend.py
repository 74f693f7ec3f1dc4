"""Backend programming: the agent writes a Python function, hidden unit tests grade it."""
from __future__ import annotations

from concurrent.futures import Future

from colbench import protocol
from colbench.envs.base import Env, Episode, Grade
from colbench.tasks.spec import TaskSpec

BACKEND_SYSTEM_PROMPT = (
    "You are a programmer working with a person who needs a Python function written for them. "
    "They know exactly what they want, but their first message leaves details out: units, thresholds, "
    "rounding, edge cases, the exact output format. Ask short, specific questions to find those details, "
    "one or two per message. You have at most {turns} messages in total, so be concise. "
    "When you are ready, write a message that starts with `" + protocol.ANSWER_MARKER + "` followed by the "
    "complete function as raw Python code, with no explanation."
)


class BackendEpisode(Episode):
    system_prompt = BACKEND_SYSTEM_PROMPT


class BackendEnv(Env):
    family = "backend"
    episode_class = BackendEpisode

    def __init__(self, grader):
        self.grader = grader  # colbench.grading.grader.Grader: the sandbox

    def grade(self, task: TaskSpec, answer: str) -> "Future[Grade]":
        graded: Future = Future()

        def convert(done: Future) -> None:
            try:
                report = done.result()
            except BaseException as exc:  # handed to whoever waits on the grade
                graded.set_exception(exc)
                return
            graded.set_result(
                Grade(
                    reward=report.fraction_passed, metric="tests", success=report.success, error=report.error,
                    tests=report.tests, grading=report.grading,
                )
            )

        self.grader.submit(task, answer).add_done_callback(convert)
        return graded
