"""From the store to token ids: the critic's input text, agent-token masks, and pairs.

The critic's input
------------------
``[training-time information c] + [dialogue in the tokenizer's chat template]``:

- c is the task's reference solution under a one-line header (:data:`TRAINING_INFO_HEADER`),
  as plain text before the template. ``training_info=False`` (the paper's ablation)
  leaves it out.
- The dialogue is the trajectory's user and assistant turns. System messages are
  dropped: the agent's instructions are the same for every trajectory and carry no
  signal for ranking, and leaving them out makes training and candidate scoring
  render identically whoever calls them. A template that adds a default system prompt
  (SmolLM2's does) still adds it.

Token ids are built piece by piece, exactly as a policy generated them: the text up
to an agent turn is encoded, then the turn's content on its own, then the
end-of-turn token. Token boundaries therefore never straddle an agent turn, and
candidate scoring (prefix ids + candidate ids) sees the very same ids as training.

Masks
-----
``turn_ids[i]`` is the agent turn (0, 1, ...) of token ``i``, or -1. Agent tokens are
the turn's content **plus the end-of-turn token** (the template's text right after
the content when it is the tokenizer's EOS, ``<|im_end|>`` for ChatML): deciding to
stop is an action of the agent, sampled like any other token. Never in the mask: c,
human turns, the role headers (``<|im_start|>assistant\\n``), and the separator after
the end-of-turn token.

Truncation (``max_len``)
------------------------
c is kept (at most ``max_len // 2`` of its tokens, from its start) and the dialogue is
cut **from the left**: the turns that decide a trajectory's outcome are the last ones
(the final answer), and the critic must see c. A partly cut turn keeps its remaining
tokens; a turn cut away entirely has no tokens and adds nothing to the score. The
first token of a sequence is never a target (nothing predicts it).

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

from sqlmodel import col, select

from colbench.store import queries
from colbench.store.models import Task, Trajectory, Turn

TRAINING_INFO_HEADER = "Reference solution (training-time information, hidden from the agent):"
SUCCESS_REWARD = 1.0
MIN_REWARD_GAP = 0.1
PAIR_RULES = ("correct", "margin")
PAIR_RULE_BY_FAMILY = {"backend": "correct", "frontend": "margin"}  # the paper's
PAIR_RULE_HELP = (
    "How trajectories of the same task make preference pairs. 'correct' (backend default, the paper's): only tasks "
    "with a fully correct trajectory; the first one is chosen against every lower one. 'margin' (frontend default, "
    f"the paper's): every two trajectories whose rewards differ by at least {MIN_REWARD_GAP}; on backend the reward is "
    "the share of tests passed, which gives pairs to a model that never solves a task outright. Default: the family's."
)
_EPS = 1e-9
_ROWS = 500


class DataError(ValueError):
    """Training data that cannot be built; the message is one line."""


# ---------------------------------------------------------------- rendering


def training_info_text(reference: str | None) -> str:
    """The text prefix c: the header, the reference, a blank line. Empty without a reference."""
    if not reference:
        return ""
    return f"{TRAINING_INFO_HEADER}\n{reference.rstrip()}\n\n"


def _dialogue(messages: Sequence[dict]) -> list[dict]:
    return [{"role": m["role"], "content": m["content"]} for m in messages if m["role"] in ("user", "assistant")]


def _render(tokenizer, messages: list[dict], generation_prompt: bool = False) -> str:
    if not messages:
        return ""
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt)


def dialogue_pieces(
    tokenizer, messages: Sequence[dict], generation_prompt: bool = False, keep_system: bool = False
) -> list[tuple[str, int]]:
    """The rendered dialogue as ``(text, agent_turn)`` pieces; agent_turn is -1 outside agent turns.

    Each agent turn gives a piece with its content and one with the end-of-turn token
    (when the template puts the tokenizer's EOS right after the content). With
    ``generation_prompt`` the last piece ends with the next agent turn's header. The
    critic drops system messages; the policy keeps its system prompt (``keep_system``).
    """
    if not getattr(tokenizer, "chat_template", None):
        raise DataError("the tokenizer has no chat template")
    messages = [{"role": m["role"], "content": m["content"]} for m in messages] if keep_system else _dialogue(messages)
    eos = tokenizer.eos_token or ""
    pieces: list[tuple[str, int]] = []
    cursor, turn = 0, 0
    for i, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        before = _render(tokenizer, messages[:i], generation_prompt=True)
        after = _render(tokenizer, messages[: i + 1])
        if not after.startswith(before):
            raise DataError("the chat template does not render a dialogue as a prefix of its continuation")
        tail = after[len(before) :]
        content = message["content"]
        start = tail.find(content) if content else 0
        if start < 0:  # templates that strip the content
            content = content.strip()
            start = tail.find(content)
        if start < 0:
            raise DataError("cannot find an agent turn's content in the chat template's rendering")
        pieces.append((before[cursor:] + tail[:start], -1))
        pieces.append((content, turn))
        cursor = len(before) + start + len(content)
        if eos and after.startswith(eos, cursor):
            pieces.append((eos, turn))
            cursor += len(eos)
        turn += 1
    pieces.append((_render(tokenizer, messages, generation_prompt)[cursor:], -1))
    return [(text, t) for text, t in pieces if text]


def end_of_turn_ids(tokenizer) -> list[int]:
    """The token ids that close an agent turn in the masks (the EOS after the content), or []."""
    pieces = dialogue_pieces(tokenizer, [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}])
    agent = [text for text, turn in pieces if turn == 0]
    closing = agent[1:]  # the content is the first agent piece
    return encode_pieces(tokenizer, [(text, 0) for text in closing])[0]


def encode_pieces(tokenizer, pieces: Iterable[tuple[str, int]]) -> tuple[list[int], list[int]]:
    ids: list[int] = []
    turn_ids: list[int] = []
    for text, turn in pieces:
        piece = tokenizer(text, add_special_tokens=False)["input_ids"]
        ids.extend(piece)
        turn_ids.extend([turn] * len(piece))
    return ids, turn_ids


def critic_prefix_ids(tokenizer, messages: Sequence[dict], reference: str | None = None) -> list[int]:
    """Token ids of c plus the dialogue so far plus the next agent turn's header.

    What candidates for the next agent turn are scored after (see scoring.py): the
    same ids as training builds for the text before an agent turn's content.
    """
    if not _dialogue(messages):
        raise DataError("a dialogue to continue needs at least one message")
    info = training_info_text(reference)
    prefix = encode_pieces(tokenizer, [(info, -1)])[0] if info else []
    return prefix + encode_pieces(tokenizer, dialogue_pieces(tokenizer, messages, generation_prompt=True))[0]


@dataclass
class Example:
    """One trajectory, tokenised for the critic."""

    trajectory_id: int
    task_id: int
    reward: float
    input_ids: list[int]
    turn_ids: list[int]  # per token: agent turn number, or -1
    turn_rows: list[int | None] = field(default_factory=list)  # Turn.id of agent turn k
    prefix_len: int = 0  # tokens of c at the start
    truncated: bool = False

    @property
    def agent_tokens(self) -> int:
        return sum(1 for t in self.turn_ids if t >= 0)


def encode_trajectory(
    tokenizer,
    messages: Sequence[dict],
    reference: str | None,
    *,
    max_len: int | None = None,
) -> tuple[list[int], list[int], int, bool]:
    """(input_ids, turn_ids, prefix_len, truncated) of a dialogue, c first when given."""
    info = training_info_text(reference)
    prefix_ids = encode_pieces(tokenizer, [(info, -1)])[0] if info else []
    ids, turn_ids = encode_pieces(tokenizer, dialogue_pieces(tokenizer, messages))
    truncated = False
    if max_len and len(prefix_ids) + len(ids) > max_len:
        truncated = True
        prefix_ids = prefix_ids[: max_len // 2]
        keep = max_len - len(prefix_ids)
        ids, turn_ids = ids[len(ids) - keep :], turn_ids[len(turn_ids) - keep :]
    all_ids = prefix_ids + ids
    all_turns = [-1] * len(prefix_ids) + turn_ids
    if all_turns:
        all_turns[0] = -1  # nothing predicts the first token
    return all_ids, all_turns, len(prefix_ids), truncated


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


def pair_rule(family: str, rule: str | None = None) -> str:
    """The rule to use: ``rule`` when given, else the family's paper rule."""
    rule = rule or PAIR_RULE_BY_FAMILY.get(family)
    if rule not in PAIR_RULES:
        raise DataError(f"pair rule must be one of {', '.join(PAIR_RULES)}; got {rule!r}")
    return rule


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
    db, *, family: str = "backend", split: str = "train", watermark: int | None = None, rule: str | None = None
) -> CriticData:
    """Pairs for a run that continues from ``watermark`` (None: all the data).

    New data: graded trajectories with graded_seq above the watermark, of tasks of
    ``family`` and ``split``. Pool: every graded trajectory of the tasks new data
    touches, up to the new watermark (a new failure needs its task's old success as
    the chosen side). Pairs are built on the pool by ``rule`` (default: the family's
    paper rule), and only those with a new trajectory on at least one side are kept.
    """
    rule = pair_rule(family, rule)
    with db.read() as session:
        fresh = [
            t
            for t in queries.graded_since(session, watermark, family=family)
            if t.reward is not None and t.status == "done"
        ]
        task_ids = sorted({t.task_id for t in fresh})
        split_of: dict[int, str] = {}
        for start in range(0, len(task_ids), _ROWS):
            chunk = task_ids[start : start + _ROWS]
            split_of.update({i: s for i, s in session.exec(select(Task.id, Task.split).where(col(Task.id).in_(chunk)))})
        fresh = [t for t in fresh if split_of.get(t.task_id) == split]
        task_ids = sorted({t.task_id for t in fresh})
        top = max((t.graded_seq for t in fresh), default=watermark)
        pool: list[Graded] = []
        for start in range(0, len(task_ids), _ROWS):
            chunk = task_ids[start : start + _ROWS]
            rows = session.exec(
                select(Trajectory.id, Trajectory.task_id, Trajectory.reward).where(
                    col(Trajectory.task_id).in_(chunk),
                    col(Trajectory.graded_seq).is_not(None),
                    Trajectory.graded_seq <= (top or 0),
                    col(Trajectory.reward).is_not(None),
                    Trajectory.status == "done",
                )
            )
            pool.extend(Graded(i, task, float(reward)) for i, task, reward in rows)
    new_ids = {t.id for t in fresh}
    pairs = build_pairs(pool, rule, None if watermark is None else new_ids)
    return CriticData(pairs=pairs, new_ids=sorted(new_ids), pool_size=len(pool), watermark=top)


def load_examples(
    db, tokenizer, trajectory_ids: Sequence[int], *, training_info: bool = True, max_len: int | None = None
) -> dict[int, Example]:
    """trajectory id → Example, with the reference of its task as c when ``training_info``."""
    ids = sorted(set(trajectory_ids))
    with db.read() as session:
        rows: dict[int, Trajectory] = {}
        for start in range(0, len(ids), _ROWS):
            chunk = ids[start : start + _ROWS]
            rows.update({t.id: t for t in session.exec(select(Trajectory).where(col(Trajectory.id).in_(chunk)))})
        task_ids = sorted({t.task_id for t in rows.values()})
        references: dict[int, str] = {}
        for start in range(0, len(task_ids), _ROWS):
            chunk = task_ids[start : start + _ROWS]
            references.update({i: g for i, g in session.exec(select(Task.id, Task.ground_truth).where(col(Task.id).in_(chunk)))})
        turns = queries.turns_for(session, ids)
    examples: dict[int, Example] = {}
    for trajectory_id in ids:
        row = rows.get(trajectory_id)
        if row is None:
            raise DataError(f"no trajectory with id {trajectory_id}")
        examples[trajectory_id] = example_from_turns(
            tokenizer, row, turns[trajectory_id], references[row.task_id] if training_info else None, max_len=max_len
        )
    return examples


def example_from_turns(tokenizer, trajectory: Trajectory, turns: list[Turn], reference: str | None, *, max_len=None) -> Example:
    turns = [t for t in turns if t.role in ("user", "assistant")]
    messages = [{"role": t.role, "content": t.content or ""} for t in turns]
    input_ids, turn_ids, prefix_len, truncated = encode_trajectory(tokenizer, messages, reference, max_len=max_len)
    return Example(
        trajectory_id=trajectory.id,
        task_id=trajectory.task_id,
        reward=float(trajectory.reward) if trajectory.reward is not None else float("nan"),
        input_ids=input_ids,
        turn_ids=turn_ids,
        turn_rows=[t.id for t in turns if t.role == "assistant"],
        prefix_len=prefix_len,
        truncated=truncated,
    )


def collate(examples: Sequence[Example], pad_id: int):
    """Right-padded ``input_ids``, ``attention_mask`` and ``turn_ids`` tensors (turn -1 on padding).

    Takes anything with ``input_ids`` and ``turn_ids`` (critic examples, policy sequences).
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
