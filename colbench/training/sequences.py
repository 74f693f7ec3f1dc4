"""Token rows exactly as the policy read and wrote them: what every trainer and scorer feeds a model.

An agent turn is two things the store keeps: the prompt text the policy was given
(``Turn.prompt``, the chat-templated dialogue, encoded the way the engine encoded it)
and the token ids it sampled (``Turn.token_ids``, with the end-of-turn token when it
stopped). Re-rendering the dialogue would not give the same ids: a turn that starts
with ``"\\n\\n"`` or two spaces tokenises differently inside a whole templated string
than it was sampled, and the policy would be trained on tokens it never produced.

Rows
----
A row is ``[prefix] + [context] + [completion] (+ [more context] + [completion] ...)``
with, per token, the agent turn it belongs to (0, 1, ...) or -1. The prefix is the
critic's training-time information c (empty for the policy). A trajectory packs into
as few rows as exactness allows: the next turn continues the current row when its
prompt's ids start with everything the row holds after the prefix (so the row *is* what
the policy saw before that turn); otherwise it opens a row of its own. Most turns
continue; a turn whose text re-tokenises differently inside the next prompt starts a
new row, so training costs grow only where the ids differ.

Context cap (``max_len``)
-------------------------
The prefix and a turn's context together keep at most ``max_len`` tokens: when they
are longer, the prefix keeps its first ``max_len // 2`` tokens and the context its last
ones (the latest turns matter most, and the critic must see c). The completion itself
is never cut. A turn whose context had to be cut gets a row of its own, so a turn is
read with the very same tokens in training (:func:`pack`) as when it is scored
(:func:`fit_context`) — the critic and the policy both rely on that.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Sequence

# Defined with the engines, which encode prompts the same way (the scripted engine closes its turns with these ids).
from colbench.engines.base import encode_text, end_of_turn_ids


@dataclass
class AgentTurn:
    """What the policy saw and did at one agent turn."""

    turn_id: int | None  # Turn.id, when it came from the store
    prompt_ids: list[int]
    completion_ids: list[int]


@dataclass
class Seq:
    """One row: token ids and, per token, its agent turn (or -1)."""

    input_ids: list[int]
    turn_ids: list[int]
    truncated: bool = False  # its context was cut to fit max_len

    @property
    def agent_tokens(self) -> int:
        return sum(1 for t in self.turn_ids if t >= 0)


def kept_prefix(prefix_len: int, context_len: int, max_len: int | None) -> int:
    """How many of the prefix's tokens ``fit_context`` keeps: all, unless the two are cut."""
    if not max_len or prefix_len + context_len <= max_len:
        return prefix_len
    return min(prefix_len, max_len // 2)


def fit_context(prefix: Sequence[int], context: Sequence[int], max_len: int | None) -> tuple[list[int], bool]:
    """``prefix + context`` within ``max_len`` tokens, and whether anything was cut (see the module doc)."""
    if not max_len or len(prefix) + len(context) <= max_len:
        return list(prefix) + list(context), False
    kept = list(prefix[: kept_prefix(len(prefix), len(context), max_len)])
    room = max_len - len(kept)
    return kept + list(context[len(context) - room :]), True


def turn_row(prefix: Sequence[int], prompt_ids: Sequence[int], completion: Sequence[int], max_len: int | None,
             turn: int = 0) -> Seq:
    """The row of one agent turn on its own: its fitted context, then its completion."""
    context, truncated = fit_context(prefix, prompt_ids, max_len)
    return _first_not_a_target(Seq(context + list(completion), [-1] * len(context) + [turn] * len(completion),
                                   truncated))


def pack(turns: Sequence[AgentTurn], prefix: Sequence[int] = (), max_len: int | None = None) -> list[Seq]:
    """A trajectory's agent turns as rows; turn k's completion tokens carry turn id k."""
    rows: list[Seq] = []
    for k, turn in enumerate(turns):
        row = rows[-1] if rows else None
        held = len(row.input_ids) - len(prefix) if row else 0
        fits = not max_len or len(prefix) + len(turn.prompt_ids) <= max_len
        if row is not None and not row.truncated and fits and turn.prompt_ids[:held] == row.input_ids[len(prefix) :]:
            more = turn.prompt_ids[held:]
            row.input_ids += list(more) + list(turn.completion_ids)
            row.turn_ids += [-1] * len(more) + [k] * len(turn.completion_ids)
        else:
            rows.append(turn_row(prefix, turn.prompt_ids, turn.completion_ids, max_len, turn=k))
    return rows


def flatten(groups: Sequence[Sequence[Seq]]) -> tuple[list[Seq], list[int]]:
    """The rows of several groups (a trajectory's rows, a pair side's), and for each row its group's index."""
    rows, owner = [], []
    for index, group in enumerate(groups):
        rows += group
        owner += [index] * len(group)
    return rows, owner


def _first_not_a_target(seq: Seq) -> Seq:
    if seq.turn_ids:
        seq.turn_ids[0] = -1  # nothing predicts the first token
    return seq


# ---------------------------------------------------------------- from stored turns


def system_prompt(family: str) -> str:
    """The family's agent instructions, exactly as a rollout shows them."""
    from colbench import protocol
    from colbench.families import family as family_named

    return family_named(family).system_prompt().format(turns=protocol.MAX_AGENT_TURNS)


def conversation(family: str, dialogue: Sequence[dict]) -> list[dict]:
    """System prompt + the user and agent messages: what a rollout shows the policy (Episode.conversation)."""
    messages = [{"role": m["role"], "content": m["content"]} for m in dialogue if m["role"] in ("user", "assistant")]
    return [{"role": "system", "content": system_prompt(family)}] + messages


def agent_conversations(family: str, turns: Sequence) -> Iterator[tuple[object, list[dict]]]:
    """Each agent turn of a stored dialogue (``Turn`` rows in order) with the conversation a rollout showed the
    policy before it (Episode.conversation)."""
    history: list[dict] = []
    for turn in turns:
        if turn.role == "assistant":
            yield turn, conversation(family, history)
        if turn.role in ("user", "assistant"):
            history.append({"role": turn.role, "content": turn.content or ""})


def agent_prompts(tokenizer, family: str, turns: Sequence) -> Iterator[tuple[object, str]]:
    """Each agent turn of a stored dialogue (``Turn`` rows in order) with the prompt it was given:
    the stored one, or (an import without ``input``) the one a rollout would have shown."""
    for turn, shown in agent_conversations(family, turns):
        prompt = turn.prompt
        if prompt is None:
            prompt = tokenizer.apply_chat_template(shown, tokenize=False, add_generation_prompt=True)
        yield turn, prompt


def agent_turns(tokenizer, family: str, turns: Sequence) -> list[AgentTurn]:
    """The agent turns of a stored dialogue (``Turn`` rows in order), as the policy saw and sampled them.

    A turn without a stored prompt gets the one a rollout would have shown (``agent_prompts``);
    one without stored ids (a server that returns text only, or an import) is its raw text
    re-encoded, closed with the end-of-turn token as if it stopped.
    """
    closing = None
    found: list[AgentTurn] = []
    for turn, prompt in agent_prompts(tokenizer, family, turns):
        if turn.token_ids:
            completion = list(turn.token_ids)
        else:
            closing = end_of_turn_ids(tokenizer) if closing is None else closing
            completion = encode_text(tokenizer, turn.raw if turn.raw is not None else turn.content or "") + closing
        found.append(AgentTurn(turn.id, encode_text(tokenizer, prompt), completion))
    return found
