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
  The code is executed again for every test, with fresh locals but the same globals
  (the official grader's are its module's): what the answer's functions set with
  ``global`` in one test is still there in the next. The reference runs under the
  same scoping, with globals of its own.

``strict`` is fairer: Markdown fences are stripped wherever they stand in a line of
their own, every block joined; no blacklist; the code runs as a module, a fresh one for
every test, so helpers, recursion and top-level imports work and nothing carries from
one test to the next.

Both modes share the rest, as the official grader has it:

- the answer has 1 s per test; the reference, which has no limit there, 30 s
  (grader.REFERENCE_TIMEOUT_S);
- Python's ``==`` on returned values: the numeric tower by exact value (Decimal, Fraction
  and numpy scalars among it), containers by their own rules, numpy arrays by the truth of
  their elementwise comparison, dates and times (see canonical.py and compare.py); the
  reference's output None failing the test;
- reference and answer run under one hash seed (the official grader runs both in one
  process), so equal code iterates a set of strings in one order; ours is fixed
  (sandboxes/base.HASH_SEED), the official one is drawn per grader process;
- numpy and pandas can be imported (runner.OFFERED_MODULES: Debian's numpy 1.24 and
  pandas 1.5, with dateutil, pytz and six), read-only, and nothing else outside the
  standard library;
- Python's default int-to-str digit limit (4,300 digits) for the graded code, while a
  returned big int of any size still compares.

Unlike the official grader, every answer runs in a sandbox, and objects made by graded
code are never asked whether they are equal.

Deliberate differences:

- an answer-made ``__eq__`` is never asked: an object of the answer's class is never equal,
  a subclass of int, list or another known type is compared by the value it holds (the
  official grader asks the ``__eq__``);
- numbers compare by exact value, where numpy rounds mixed comparisons (int64 against a
  float through float64, float32 arrays against a Python float in float32); a Decimal
  equals a numpy integer in both orders (officially ``Decimal == np.int64`` raises); a
  pandas Timestamp never equals a date (pandas 1.5 compares the day alone);
- a comparison that raises anything but ValueError (a signalling Decimal NaN, pandas.NA)
  ends the official evaluation (it catches only ValueError); here that test fails;
- SystemExit, KeyboardInterrupt or another BaseException fails the test that raised it,
  and the other tests are still graded (officially it escapes ``except Exception`` and
  ends the whole evaluation: no reward at all);
- globals never cross from one answer to another, nor between reference and answer
  (officially they share one module namespace with every answer graded before).

Not reproduced:

- the official grader's module globals (``signal``, ``multiprocessing`` and its own
  helpers) are visible to answers there, and not here;
- a child forked again after a timeout or a crash (for the tests left) starts with
  empty globals, where officially the count would go on;
- values opaque to the canonical form (numpy datetime64, pandas Index, other time zones
  than datetime.timezone, ...: docs/grading.md) are never equal;
- the rest of the official environment (gradio, openai, selenium, fire and what they
  pull in: pillow, pyyaml, matplotlib, ...) cannot be imported.
"""
from __future__ import annotations

from colbench.protocol import strip_code_fences

GRADINGS = ("official", "strict")
DEFAULT_GRADING = "official"
GRADING_HELP = (
    "official (default): the official ColBench grader's outcomes (its fence rule, its text blacklist, names "
    "defined at an answer's top level invisible inside its functions, globals kept from one test to the next); "
    "strict: fences stripped anywhere, no blacklist, code run as a fresh module for each test."
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
