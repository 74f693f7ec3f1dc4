"""arith-chat: the person has a number in mind and says it when asked; the answer is a Python function solve(x) that
uses it, graded by the task's hidden tests in colbench's sandbox."""
from colbench import protocol
from colbench.envs.base import Episode
from colbench.families import FAMILIES
from colbench.families.tested import TestedEnv, TestedFamily
from colbench.simulators.base import SimReply, Simulator

SYSTEM_PROMPT = (
    "A person wants a Python function solve(x) that uses a number they have in mind. Ask them for the number, then"
    " reply with `" + protocol.ANSWER_MARKER + "` followed by the function alone. You have at most {turns} messages."
)


class ArithChatEpisode(Episode):
    system_prompt = SYSTEM_PROMPT


class ArithChatEnv(TestedEnv):  # grades an answer against the task's tests in the sandbox
    family = "arith-chat"
    episode_class = ArithChatEpisode


class NumberHolder(Simulator):
    """The person: says the number (the task's hidden information) when asked for it, and nothing else."""

    ref = "builtin-arith-chat"

    def reply(self, requests):
        asked = [next((m["content"] for m in reversed(r.dialogue) if m["role"] == "assistant"), "") for r in requests]
        return [SimReply(text=r.task.hidden_information if "number" in question.lower() else "Ask me for my number.")
                for r, question in zip(requests, asked)]


@FAMILIES.register("arith-chat", "a function solve(x) on the person's number, graded by hidden tests")
class ArithChatFamily(TestedFamily):
    name = "arith-chat"
    summary = "a function solve(x) on the person's number, graded by hidden tests"
    reply_limit = 200
    env_class = ArithChatEnv
    builtin_package = "colbench_arith_chat"  # arith-chat_a.jsonl beside this module
    test_every = 3  # built-in tasks 2, 5, ... are the test split

    def builtin_simulator(self):
        return NumberHolder()

    def system_prompt(self) -> str:
        return SYSTEM_PROMPT

    def claims(self, record: dict) -> bool:  # a record that does not name its family
        return "the number I have in mind" in str(record.get("problem_description", ""))
