"""The secret-word family: the person knows a secret word and says it when asked; the answer is right when it is
that word."""
from __future__ import annotations

from concurrent.futures import Future

from colbench import protocol
from colbench.envs.base import Env, Episode, Grade
from colbench.errors import FormatError
from colbench.families import FAMILIES, TaskFamily
from colbench.simulators.base import SimReply, Simulator

SYSTEM_PROMPT = (
    "A person knows a secret word. Ask them for it, then reply with `" + protocol.ANSWER_MARKER + "` followed by"
    " the word alone. You have at most {turns} messages."
)


def said(task, answer: str) -> bool:
    return answer.strip().strip(".!\"'").lower() == task.ground_truth.lower()


class SecretWordEpisode(Episode):
    system_prompt = SYSTEM_PROMPT


class SecretWordEnv(Env):
    family = "secret-word"
    episode_class = SecretWordEpisode
    # No brief of its own: a model playing the person gets the generic one, with the task's hidden information.

    def grade(self, task, answer: str) -> "Future[Grade]":
        graded: Future = Future()
        right = said(task, answer)
        graded.set_result(Grade(reward=float(right), metric="word", success=right))
        return graded


class SecretWordHuman(Simulator):
    """Says the word when asked for it, and nothing else."""

    ref = "builtin-secret-word"

    def reply(self, requests):
        replies = []
        for request in requests:
            question = next((m["content"] for m in reversed(request.dialogue) if m["role"] == "assistant"), "")
            if "word" in question.lower():
                replies.append(SimReply(text=f"The secret word is {request.task.ground_truth}."))
            else:
                replies.append(SimReply(text="I can only tell you the secret word, if you ask for it."))
        return replies


@FAMILIES.register("secret-word", "a secret word the person knows: ask for it, then say it")
class SecretWordFamily(TaskFamily):
    name = "secret-word"
    summary = "a secret word the person knows: ask for it, then say it"
    reply_limit = 200
    pair_rule = "correct"  # a trajectory that said the word against each that did not
    headline_metric = "success"
    headline_label = "success"
    reward_label = "word said"
    answer_language = "text"
    rft_threshold = None  # every trajectory that said the word
    builtin_package = "colbench_secret_word"  # secret-word_a.jsonl beside this module

    def env(self, db, *, sandbox: str, workers: int, clip, render_pool: int, grading: str):
        return SecretWordEnv(), lambda: None

    def builtin_simulator(self):
        return SecretWordHuman()

    def system_prompt(self) -> str:
        return SYSTEM_PROMPT

    def tests_from_record(self, record: dict, where: str) -> dict[str, str]:
        tests = record.get("test_cases")
        if tests is not None and not isinstance(tests, dict):
            raise FormatError(f"{where}: field 'test_cases' must be an object (empty: the word itself is the test)")
        return {}

    def claims(self, record: dict) -> bool:
        return "secret word" in str(record.get("problem_description", "")).lower()

    def imported_grade(self, reward: float, record: dict, default_grading: str) -> dict:
        return {"reward_metric": "word", "success": float(reward) >= 1.0, "grading": None}

    def graded_by(self, env) -> str:
        return "the word"
