"""What an answer's text grades as: the official ColBench semantics, or strict ones.

``official`` (the default) reproduces the outcomes of the official grader
(``check_correctness`` in facebookresearch/sweet_rl), which defines the paper's
"% tests passed" and "success":

- **Blacklist.** An answer whose text (comments and prose included) contains any of
  :data:`BLACKLIST` scores 0 on every test.
- **Fences.** The code is the text after the first ```` ```python ```` up to the next
  fence; else, if any ```` ``` ```` remains, the text between the first two; else the
  whole answer, exactly (a leading space is then an indentation error).
- **Scoping.** The code is executed as the body of a function would execute it, with
  its own locals apart from its globals, and each test call is evaluated there. So a
  name the answer defines at its top level (a helper, an import, the function itself
  when it recurses) is not visible from inside its functions, and those tests fail.
  The reference runs under the same scoping.

``strict`` is fairer: Markdown fences are stripped wherever they stand in a line of
their own, every block joined; no blacklist; the code runs as a module, so helpers,
recursion and top-level imports work.

Both modes share the rest: 1 s per test, and Python's ``==`` on builtin values (see
canonical.py), the reference's output None failing the test. Unlike the official
grader, every answer runs in a sandbox, and objects made by graded code are never
asked whether they are equal.

Not reproduced: the official grader's module globals (``signal``, ``multiprocessing``
and its own helpers) are visible to answers there, and not here.
"""
from __future__ import annotations

from colbench.protocol import strip_code_fences

GRADINGS = ("official", "strict")
DEFAULT_GRADING = "official"
GRADING_HELP = (
    "official (default): the official ColBench grader's outcomes (its fence rule, its text blacklist, names "
    "defined at an answer's top level invisible inside its functions); strict: fences stripped anywhere, no "
    "blacklist, code run as a module."
)
BLACKLIST = ("import os", "from os", "import sys", "from sys", "sudo", "transformers", "exit(", "quit(", "argparse")
# How the sandbox executes code and calls (runner.py): separate locals, or one module namespace.
SCOPE = {"official": "function", "strict": "module"}


def check_grading(grading: str) -> str:
    if grading not in GRADINGS:
        raise ValueError(f"grading must be one of {', '.join(GRADINGS)}; got {grading!r}")
    return grading


def banned_text(answer: str) -> str | None:
    """The first blacklisted text the answer contains (official grading scores it 0), or None."""
    return next((word for word in BLACKLIST if word in answer), None)


def official_code(answer: str) -> str:
    """The code the official grader runs for an answer: its fence rule, nothing stripped."""
    if "```python" in answer:
        answer = answer.split("```python")[1].split("```")[0]
    if "```" in answer:
        answer = answer.split("```")[1].split("```")[0]
    return answer


def code_of(answer: str, grading: str) -> str:
    return official_code(answer) if grading == "official" else strip_code_fences(answer)
