"""The brevity family: one message, whose reward is 1 − its length in characters / 40 (at least 0): the shorter the
better. A task a tiny random model can learn in a few online RL steps (by ending its message early, or choosing
short tokens), so tests can see a policy get better: the online recipe's learning test."""
from __future__ import annotations

from concurrent.futures import Future

from colbench import protocol

from colbench.envs.base import Env, Episode, Grade
from colbench.families import FAMILIES
from colbench.simulators.base import SimReply, Simulator

from colbench_secret_word.family import SecretWordFamily

# The protocol stated, as every family's prompt states it (tests/test_families.py), though one message ends it.
SYSTEM_PROMPT = ("Reply in one message, as briefly as you can. (Of {turns} messages, `" + protocol.ANSWER_MARKER
                 + "` or not.)")
LONGEST = 40  # characters: a message this long or longer earns 0


def brevity(answer: str) -> float:
    return max(0.0, 1 - len(answer) / LONGEST)


class BrevityEpisode(Episode):
    system_prompt = SYSTEM_PROMPT

    def agent_says(self, text: str) -> str:
        shown = super().agent_says(text)
        self.answer = shown  # one message: it is the answer
        return shown


class BrevityEnv(Env):
    family = "brevity"
    episode_class = BrevityEpisode

    def grade(self, task, answer: str) -> "Future[Grade]":
        graded: Future = Future()
        share = brevity(answer)
        graded.set_result(Grade(reward=share, metric="brevity", success=share >= 0.9))
        return graded


class BrevityHuman(Simulator):
    ref = "builtin-brevity"

    def reply(self, requests):
        return [SimReply(text="go on") for _ in requests]


@FAMILIES.register("brevity", "one message, the shorter the better")
class BrevityFamily(SecretWordFamily):
    name = "brevity"
    summary = "one message, the shorter the better"
    pair_rule = "margin"
    headline_metric = "reward"
    headline_label = "brevity"
    reward_label = "brevity"
    rft_threshold = 0.8

    def env(self, db, *, sandbox: str, workers: int, clip, render_pool: int, grading: str):
        return BrevityEnv(), lambda: None

    def builtin_simulator(self):
        return BrevityHuman()

    def system_prompt(self) -> str:
        return SYSTEM_PROMPT

    def claims(self, record: dict) -> bool:
        return "brevity" in str(record.get("problem_description", "")).lower()

    def imported_grade(self, reward: float, record: dict, default_grading: str) -> dict:
        return {"reward_metric": "brevity", "success": None, "grading": None}  # its figure is the reward

    def graded_by(self, env) -> str:
        return "its brevity"

