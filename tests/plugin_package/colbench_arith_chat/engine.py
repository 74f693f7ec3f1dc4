"""arith-solver: asks for the number, then writes solve(x) with it (arith-solver:guess answers at once, with 0)."""
import re

from colbench import protocol
from colbench.engines import ENGINES
from colbench.engines.base import Engine, Generation, Sample

OPERATORS = {"plus": "+", "times": "*", "minus": "-"}
OPERATION = re.compile(r"returns x (plus|times|minus)")
TOLD = re.compile(r"number is (-?\d+)")


class ArithSolver(Engine):
    kind = "arith-solver"
    templated_prompts = False  # no chat template: nothing a trainer could re-tokenize exactly

    def __init__(self, mode: str):
        self.mode = mode
        self.model_ref = f"arith-solver:{mode}"

    def render_prompt(self, conversation) -> str:
        return "".join(f"[{m['role']}]\n{m['content']}\n" for m in conversation)

    def next_turn(self, conversation) -> str:
        said = " ".join(m["content"] for m in conversation if m["role"] == "user")
        operation, told = OPERATION.search(said), TOLD.findall(said)
        if not told and self.mode == "ask":
            return "What is your number?"
        operator = OPERATORS[operation.group(1)] if operation else "+"
        return f"{protocol.ANSWER_MARKER}\ndef solve(x):\n    return x {operator} {told[-1] if told else 0}\n"

    def generate(self, conversations, params):
        return [Generation(prompt_text=self.render_prompt(c), prompt_tokens=0, latency_s=0.0,
                           samples=[Sample(text=self.next_turn(c)) for _ in range(max(1, params.n))])
                for c in conversations]


@ENGINES.register("arith-solver", "the arith-chat family's rule-following agent: ask (default) or guess",
                  argument="<mode>")
def build(mode, **options) -> Engine:
    return ArithSolver(mode if mode == "guess" else "ask")
