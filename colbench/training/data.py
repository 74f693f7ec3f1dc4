"""From the store to critic examples, and preference pairs.

The critic's input
------------------
A trajectory's rows (see sequences.py): the training-time information c, then exactly
the ids the policy saw before each agent turn and the ids it sampled. c is the task's
reference solution under a one-line header (:data:`TRAINING_INFO_HEADER`), as plain
text before the prompt; ``training_info=False`` (the paper's ablation) leaves it out.
Candidate scoring reads c + the same prompt ids, fitted to ``max_len`` the same way
(:func:`colbench.training.sequences.fit_context`), so a turn is read identically when
the critic is trained and when it ranks candidates.

Agent tokens are each turn's sampled ids, the end-of-turn token included when the turn
stopped: deciding to stop is an action of the agent, sampled like any other token.

Pairs
-----
Built from graded trajectories of the same task by one of two rules (see
:func:`build_pairs`): the paper's backend rule, ``correct``, and its frontend rule,
``margin``. Each family defaults to its paper rule; ``margin`` on backend (rewards are
the share of tests passed) gives pairs to a model that never solves a task outright.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from colbench.families import DEFAULT_FAMILY
from colbench.store import queries
from colbench.training import sequences as S
from colbench.training.config import MIN_REWARD_GAP, PAIR_RULES, DataError, pair_rule

TRAINING_INFO_HEADER = "Reference solution (training-time information, hidden from the agent):"
SUCCESS_REWARD = 1.0
_EPS = 1e-9


def training_info_text(reference: str | None) -> str:
    """The text prefix c: the header, the reference, a blank line. Empty without a reference."""
    if not reference:
        return ""
    return f"{TRAINING_INFO_HEADER}\n{reference.rstrip()}\n\n"


def training_info_ids(tokenizer, reference: str | None) -> list[int]:
    text = training_info_text(reference)
    return S.encode_text(tokenizer, text) if text else []


@dataclass
class Example:
    """One trajectory, as critic rows."""

    trajectory_id: int
    task_id: int
    reward: float
    rows: list[S.Seq]
    turn_rows: list[int | None] = field(default_factory=list)  # Turn.id of agent turn k
    prefix_len: int = 0  # tokens of c at the start of each row

    @property
    def truncated(self) -> bool:
        return any(row.truncated for row in self.rows)

    @property
    def tokens(self) -> int:
        return sum(len(row.input_ids) for row in self.rows)

    @property
    def agent_tokens(self) -> int:
        return sum(row.agent_tokens for row in self.rows)


# ---------------------------------------------------------------- pairs


@dataclass(frozen=True)
class Pair:
    task_id: int
    chosen: int  # trajectory ids
    rejected: int


@dataclass(frozen=True)
class Graded:
    """What pair building needs of a trajectory."""

    id: int
    task_id: int
    reward: float


def build_pairs(trajectories: Iterable[Graded], rule: str, new_ids: set[int] | None = None) -> list[Pair]:
    """Preference pairs among graded trajectories of the same task.

    - ``correct``: only tasks with a fully correct trajectory (reward 1.0). The first of
      them by id is chosen; every trajectory with a lower reward is rejected against it.
      Other fully correct ones are not used.
    - ``margin``: every two trajectories whose rewards differ by at least 0.1; the
      higher is chosen.

    With ``new_ids``, only pairs with at least one trajectory in it are kept (pairs of
    two old trajectories were trained on before).
    """
    if rule not in PAIR_RULES:
        raise DataError(f"pair rule must be one of {', '.join(PAIR_RULES)}; got {rule!r}")
    by_task: dict[int, list[Graded]] = {}
    for t in trajectories:
        by_task.setdefault(t.task_id, []).append(t)
    pairs: list[Pair] = []
    for task_id in sorted(by_task):
        group = sorted(by_task[task_id], key=lambda t: t.id)
        if rule == "correct":
            correct = [t for t in group if t.reward >= SUCCESS_REWARD - _EPS]
            if not correct:
                continue
            best = correct[0]
            found = [Pair(task_id, best.id, t.id) for t in group if t.reward < best.reward - _EPS]
        else:
            found = []
            for i, a in enumerate(group):
                for b in group[i + 1 :]:
                    if abs(a.reward - b.reward) >= MIN_REWARD_GAP - _EPS:
                        hi, lo = (a, b) if a.reward > b.reward else (b, a)
                        found.append(Pair(task_id, hi.id, lo.id))
        if new_ids is not None:
            found = [p for p in found if p.chosen in new_ids or p.rejected in new_ids]
        pairs.extend(found)
    return pairs


def split_heldout(pairs: list[Pair], fraction: float, seed: int) -> tuple[list[Pair], list[Pair]]:
    """(train, held-out) split by task: whole tasks are held out, never single pairs.

    The held-out tasks are the ``round(fraction · tasks)`` tasks (at least one when
    fraction > 0 and there are two tasks or more) with the smallest seeded hash of
    their id, so the choice does not depend on the order pairs come in.
    """
    tasks = sorted({p.task_id for p in pairs})
    count = round(fraction * len(tasks))
    if fraction > 0 and len(tasks) >= 2:
        count = min(max(count, 1), len(tasks) - 1)
    else:
        count = 0

    def rank(task_id: int) -> str:
        return hashlib.sha256(f"{seed}:{task_id}".encode()).hexdigest()

    held = set(sorted(tasks, key=rank)[:count])
    return [p for p in pairs if p.task_id not in held], [p for p in pairs if p.task_id in held]


# ---------------------------------------------------------------- reading the store


@dataclass
class CriticData:
    """What one critic run reads from the store."""

    pairs: list[Pair]
    new_ids: list[int]  # graded trajectories above the parent's watermark
    pool_size: int  # graded trajectories of the touched tasks, old ones included
    watermark: int | None  # the highest graded_seq read


def read_pairs(
    db, *, family: str = DEFAULT_FAMILY, split: str = "train", watermark: int | None = None, rule: str | None = None,
    policies: list[str] | None = None,
) -> CriticData:
    """Pairs for a run that continues from ``watermark`` (None: all the data).

    New data: graded trajectories with graded_seq above the watermark, of tasks of
    ``family`` and ``split``. Pool: every graded trajectory of the tasks new data
    touches, up to the new watermark (a new failure needs its task's old success as
    the chosen side). Pairs are built on the pool by ``rule`` (default: the family's
    paper rule), and only those with a new trajectory on at least one side are kept.
    ``policies`` (queries.of_policies) restricts both to some policies' trajectories.
    """
    rule = pair_rule(family, rule)
    with db.read() as session:
        fresh, top = queries.trained_data(session, family=family, split=split, watermark=watermark, policies=policies)
        pool = [
            Graded(*row)
            for row in queries.graded_rewards(session, sorted({t.task_id for t in fresh}), top or 0, policies)
        ]
    new_ids = {t.id for t in fresh}
    pairs = build_pairs(pool, rule, None if watermark is None else new_ids)
    return CriticData(pairs=pairs, new_ids=sorted(new_ids), pool_size=len(pool), watermark=top)


def load_examples(
    db, tokenizer, trajectory_ids: Sequence[int], *, training_info: bool = True, max_len: int | None = None
) -> dict[int, Example]:
    """trajectory id → Example, with the reference of its task as c when ``training_info``."""
    ids = sorted(set(trajectory_ids))
    with db.read() as session:
        rows = queries.trajectories_by_id(session, ids)
        tasks = queries.task_references(session, sorted({t.task_id for t in rows.values()}))
        turns = queries.turns_for(session, ids)
    examples: dict[int, Example] = {}
    for trajectory_id in ids:
        row = rows.get(trajectory_id)
        if row is None:
            raise DataError(f"no trajectory with id {trajectory_id}")
        family, reference = tasks[row.task_id]
        agent = S.agent_turns(tokenizer, family, turns[trajectory_id])
        prefix = training_info_ids(tokenizer, reference if training_info else None)
        examples[trajectory_id] = Example(
            trajectory_id=row.id,
            task_id=row.task_id,
            reward=float(row.reward) if row.reward is not None else float("nan"),
            rows=S.pack(agent, prefix, max_len),
            turn_rows=[t.turn_id for t in agent],
            prefix_len=len(prefix),
        )
    return examples


def collate(examples: Sequence[Example], pad_id: int):
    """Right-padded ``input_ids``, ``attention_mask`` and ``turn_ids`` tensors (turn -1 on padding).

    Takes anything with ``input_ids`` and ``turn_ids`` (sequences.Seq rows).
    """
    import torch

    width = max(len(e.input_ids) for e in examples)
    ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(examples), width), dtype=torch.long)
    turns = torch.full((len(examples), width), -1, dtype=torch.long)
    for row, e in enumerate(examples):
        n = len(e.input_ids)
        ids[row, :n] = torch.tensor(e.input_ids, dtype=torch.long)
        mask[row, :n] = 1
        turns[row, :n] = torch.tensor(e.turn_ids, dtype=torch.long)
    return ids, mask, turns
