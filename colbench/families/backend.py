"""Backend programming: the agent writes a Python function; hidden unit tests in a sandbox grade it."""
from __future__ import annotations

from colbench import protocol
from colbench.envs.base import Episode
from colbench.families.tested import TestedEnv, TestedFamily
from colbench.simulators.prompts import build_messages
from colbench.tasks.spec import LITE_SPLITS

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


class BackendEnv(TestedEnv):
    family = "backend"
    episode_class = BackendEpisode
    simulator_brief = staticmethod(build_messages)  # the person who has the code (or backend-lite's facts) in mind


class BackendFamily(TestedFamily):
    name = "backend"
    summary = "a Python function, graded by hidden unit tests"
    reply_limit = 400
    env_class = BackendEnv
    tiers = {"backend-lite": LITE_SPLITS}  # colbench/tasks/lite, stored as backend tasks under splits lite-<...>

    def builtin_simulator(self):
        from colbench.simulators.rulebased.backend import BuiltinSimulator

        return BuiltinSimulator()

    def system_prompt(self) -> str:
        return BACKEND_SYSTEM_PROMPT

    def claims(self, record: dict) -> bool:
        return bool(record.get("test_cases"))

    def leak(self, task, question: str, reply: str):
        from colbench.simulators.leaks import backend_leak

        return backend_leak(task.ground_truth, reply, question)

    def turn_oracle(self, db, trajectory_ids, sandbox: str = "auto"):
        from colbench.families.lite_truth import TurnOracle  # backend-lite's: the lite human knows each turn's worth

        return TurnOracle(db, trajectory_ids, sandbox)

    def pair_preferences(self, db, run_id: int) -> dict:
        from colbench.families.lite_truth import pair_preferences

        return pair_preferences(db, run_id)

    def task_writer(self):
        from colbench.families.backend_authoring import generator_messages

        return generator_messages
