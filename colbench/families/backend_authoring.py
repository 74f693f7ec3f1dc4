"""Prompt text for `colbench tasks generate` (our own wording)."""
from __future__ import annotations

GENERATOR_SYSTEM = (
    "You design programming tasks for a benchmark in which an AI assistant must talk with a "
    "person to find out what they really want before writing code. You answer with strict JSON."
)

GENERATOR_USER = """Read the passage below and invent one Python programming task that a specific person connected to \
it might ask for: a single function that would help them.

Make the task need a conversation. Write the person's request in their own voice, briefly, and leave out the personal \
details only they know: the exact thresholds, rates, units, categories, tie-breaking and edge-case rules, and the \
shape of the result. Put those details into the reference implementation only. Someone who writes the function from \
the request alone, without asking, should get some of the tests wrong.

The reference implementation must:
- define exactly one top-level function, with any imports inside it, using the standard library only;
- be deterministic: no randomness, clock, files, network, printing or input;
- return a value for every test, never None, built from numbers, strings, booleans, lists, tuples and dicts;
- run each test in well under a second.

Answer with a single JSON object and nothing else. Its keys:
- "problem_description": the person's request. Its last sentence must be exactly "The signature of the function is: \
def NAME(PARAMS)" with the function's real name and parameters.
- "ground_truth": the reference implementation, as one string of Python code.
- "test_cases": an object with keys "test1" to "test10"; each value is one call of the function with literal \
arguments, as a string such as "NAME(3, 'x')". Cover the hidden details and the edge cases.
- "naive_solution": the function as a capable programmer would write it from the request alone, without asking any \
question.

Passage:
<<<
{passage}
>>>"""


def generator_messages(passage: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": GENERATOR_SYSTEM},
        {"role": "user", "content": GENERATOR_USER.format(passage=passage.strip())},
    ]
