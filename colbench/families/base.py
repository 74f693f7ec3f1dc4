"""The interface every task family implements (the registry is colbench.families)."""
from __future__ import annotations

from typing import Any

from colbench.errors import ColbenchError


class UnknownFamily(ColbenchError, ValueError):
    """A family name that no registered family has."""


class TaskFamily:
    """One task family. Subclasses set every attribute and implement every method."""

    name: str  # as stored in Task.family and typed after --family
    summary: str  # a few words for help texts: what the agent makes and how it is scored
    reply_limit: int  # characters of a simulated human's reply the agent is shown
    pair_rule: str  # the paper's rule for DPO pairs (colbench.training.config.PAIR_RULES)
    headline_metric: str  # the per-trajectory figure a comparison leads with: "success" or "reward"
    headline_label: str  # that figure's name in tables and progress lines
    reward_label: str  # what a trajectory's reward is, in tables: "% tests passed", "similarity"
    # The checks `colbench tasks validate` runs on this family's tasks (colbench.authoring.validate.TASK_CHECKS):
    # "code" (a reference function run against its tests in the sandbox), "page" (a reference page rendered in a
    # browser), or "format" (well-formed and not a duplicate: any family).
    task_checks: str = "format"
    answer_language: str  # syntax highlighting of answers and references
    rft_threshold: float | None  # rejection fine-tuning's default: per task, the best trajectory reaching it;
    # None: every trajectory that passed all its tests (the paper's rule; a family graded by tests)
    tiers: dict[str, dict[str, str]] = {}  # extra task-selector prefixes → {their split: stored split}
    # The package whose data files <name>_*.jsonl are the family's built-in tasks (colbench.families.builtin).
    builtin_package: str = "colbench.tasks.builtin"
    # The split of the built-in tasks: task k (counted from 0 across the family's files in file-name order) is a test
    # task when k % test_every == test_every - 1, else a train task. Position only, never content: a task fixed in
    # place, or one added at the end, moves no other task between splits.
    test_every: int = 6
    # Whether `colbench grade` may grade a stored answer again on its own: Env.grade(task, answer) is the grade its
    # rollout gave (not so where a grade reads more of the dialogue than the answer: frontend's last page shown).
    regrades: bool = False

    def env(self, db, *, sandbox: str, workers: int, clip: str | None, render_pool: int, grading: str):
        """The family's environment and the function that closes it: (env, close)."""
        raise NotImplementedError

    def builtin_simulator(self):
        """The deterministic rule-based simulated human of this family (simulator spec ``builtin``)."""
        raise NotImplementedError

    def system_prompt(self) -> str:
        """The agent's instructions, unformatted (``{turns}`` left in), as a rollout shows them."""
        raise NotImplementedError

    def tests_from_record(self, record: dict, where: str) -> dict[str, str]:
        """The official record's ``test_cases``, checked (FormatError naming ``where`` if bad)."""
        raise NotImplementedError

    def claims(self, record: dict) -> bool:
        """Whether an official task record that does not name its family (the official files' do not; colbench's
        exports do, in ``family``, and the name decides) is one of this family's."""
        raise NotImplementedError

    def imported_grade(self, reward: float, record: dict, default_grading: str) -> dict[str, Any]:
        """The trajectory columns an official record's reward fills: reward_metric, success, grading."""
        raise NotImplementedError

    def graded_by(self, env) -> str:
        """What graded a rollout in ``env``, in a word (the sandbox, or the similarity's name)."""
        raise NotImplementedError

    def builtin_split(self, position: int) -> str:
        """The split of the built-in task at ``position`` (0-based, across the family's files in file-name order)."""
        return "test" if position % self.test_every == self.test_every - 1 else "train"

    def split_rule(self) -> str:
        """``builtin_split`` in words, for the message that finds a split empty."""
        return (f"built-in task k of {self.name} (from 0, across its files in name order) is a test task when"
                f" k % {self.test_every} == {self.test_every - 1}, else train")

    def turn_oracle(self, db, trajectory_ids, sandbox: str = "auto"):
        """Ground truth for single agent turns of these stored dialogues (SWEET-RL's --score oracle, a control): an
        object with ``values([(trajectory id, turn id, candidate texts), ...])`` -> each candidate's value, and
        ``close()``. Raises ValueError where the family has none."""
        raise ValueError(f"--score oracle: the {self.name} family has no ground truth for single turns")

    def pair_preferences(self, db, run_id: int) -> dict:
        """What a SWEET-RL run's training pairs preferred, judged by ground truth, as figures ({}: none known)."""
        return {}

    def leak(self, task, question: str, reply: str):
        """Whether a simulated human's ``reply`` to the agent's ``question`` hands over the task's reference: a
        colbench.simulators.leaks.Leak (its kind and the matched span), or None. The default: never."""
        return None

    def reference_page(self, task) -> str | None:
        """The HTML page a task's reference is, to render beside the agent's (None: its reference is no page)."""
        return None

    def task_writer(self):
        """A function passage -> chat messages that asks a model to write one task of this family from a passage of
        text (`colbench tasks generate`), or None where this family's tasks are not written that way."""
        return None

    def eval_note(self, metrics: list[str]) -> str | None:
        """What `colbench eval` should add under a table of policies graded by ``metrics`` (None: nothing)."""
        return None

    def __repr__(self) -> str:
        return f"<family {self.name}>"
