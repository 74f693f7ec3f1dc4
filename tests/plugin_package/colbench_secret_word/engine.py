"""secret-guesser: asks for the secret word, then says it (secret-guesser:blurt answers at once, with a guess)."""
from __future__ import annotations

import re

from colbench import protocol
from colbench.engines import ENGINES
from colbench.engines.base import Engine, Generation, Sample

TOLD = re.compile(r"secret word is (\w+)", re.IGNORECASE)


class SecretGuesser(Engine):
    kind = "secret-guesser"
    templated_prompts = False  # no chat template: nothing a trainer could re-tokenize exactly

    def __init__(self, mode: str = "ask"):
        self.mode = mode
        self.model_ref = f"secret-guesser:{mode}"

    def render_prompt(self, conversation) -> str:
        return "".join(f"[{m['role']}]\n{m['content']}\n" for m in conversation)

    def generate(self, conversations, params):
        generations = []
        for conversation in conversations:
            told = [TOLD.search(m["content"]) for m in conversation if m["role"] == "user"]
            word = next((match.group(1) for match in reversed(told) if match), None)
            if self.mode == "blurt":
                text = f"{protocol.ANSWER_MARKER} banana"
            elif word:
                text = f"{protocol.ANSWER_MARKER} {word}"
            else:
                text = "What is the secret word?"
            samples = [Sample(text=text) for _ in range(max(1, params.n))]
            generations.append(Generation(prompt_text=self.render_prompt(conversation), prompt_tokens=0,
                                          samples=samples, latency_s=0.0))
        return generations


@ENGINES.register("secret-guesser", "the secret-word family's rule-following agent: ask (default) or blurt",
                  argument="<mode>")
def build(mode, **options) -> Engine:
    return SecretGuesser(mode if mode in ("ask", "blurt") else "ask")
