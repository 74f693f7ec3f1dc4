"""Turn credit: what each agent turn of a dialogue is worth, from any of several signals behind one interface.

A credit reads dialogues (stored ones, or a stored prefix continued by a sampled candidate turn and the simulated
human's reply to it) and gives a value per agent turn. Its consumers never ask which signal it is:

- ``colbench credit eval`` scores signals against backend-lite's ground truth (colbench/training/credit/evaluate.py);
- ``policy fit --algo sweet --ranker NAME`` ranks candidate turns with it (the value of the candidate's turn);
- online RL's ``--turn-credit NAME`` moves each dialogue's advantage between its turns by it.

Registered here and in colbench/training/credit/signals.py; a plugin registers more under the entry-point group
``colbench.credits``. Each says whether it reads training-time information (the reference the agent never sees)
and what it costs per agent turn.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Sequence

from colbench import protocol
from colbench.errors import ColbenchError
from colbench.options import option
from colbench.registry import Registry


class CreditError(ColbenchError, ValueError):
    pass


CREDITS = Registry("turn credit", error=CreditError, entry_points="colbench.credits",
                   traits={"training_info": False, "cost": ""})


@dataclass
class CreditConfig:
    """What a credit signal is built with (the flags of `colbench credit eval`; online RL and sweet pass theirs)."""

    critic: str | None = option(None, (
        "critic: the SWEET-RL critic checkpoint (ckpt:<id> or ckpt:<run name>); its own training says whether it reads"
        " the reference. Default: the newest critic in the store."))
    model: str | None = option(None, (
        "infogain: the policy whose next action it reads; mc: the policy that plays the continuations; ref-infogain:"
        " its scorer unless --scorer. Default: the embedded model (a run passes its starting point)."))
    scorer: str | None = option(None, (
        "ref-infogain: the frozen model that scores the reference's log-likelihood. Default: --model."))
    placeholder: str = option("(no reply)", (
        "infogain, ref-infogain: the text that takes the human's reply's place in the counterfactual dialogue."))
    kl_estimate: str = option("exact", (
        "infogain: 'exact', the KL over the whole vocabulary at each token of the next action; 'sampled', InfoPO's"
        " code's estimate: the mean log-ratio of the next action's own tokens (unbiased for the KL only where the next"
        " action was sampled with the real reply; it can be negative)."), choices=("exact", "sampled"))
    next_tokens: int = option(48, (
        "infogain: tokens of the next action compared when the dialogue holds none (a candidate's reply is the last"
        " message): the greedy continuation under the real reply."), min=1)
    engine: str = option("auto", (
        "mc: the engine that plays the policy's continuations (auto, hf, ct2, or a scripted policy such as"
        " scripted:expert)."))
    mc_samples: int = option(4, "mc: continuations per agent turn (K).", min=1)
    mc_max_new_tokens: int = option(96, "mc: tokens per agent turn of a continuation.", min=1)
    mc_temperature: float = option(1.0, "mc: sampling temperature of the continuations.", min=0.0)
    seed: int = option(0, "random, mc: the seed.")
    sandbox: str = option("auto", "oracle, mc: the sandbox that grades answers (auto, bwrap, docker, none).")
    device: str = option("auto", "Models' device: auto, cpu or cuda.")
    batch_size: int = option(8, "Sequences per forward pass.", min=1)


@dataclass
class CreditDialogue:
    """A dialogue as a credit reads it: its task and its turns in order (stored ``Turn`` rows, or rows of a dialogue
    not stored: ``role``, ``content``, ``prompt``, ``token_ids``, ``raw``, ``id``)."""

    task: object  # TaskSpec
    turns: list
    trajectory_id: int | None = None  # None: not stored (a candidate's continuation)
    task_id: int | None = None
    reward: float | None = None

    @property
    def agent_turns(self) -> list:
        return [turn for turn in self.turns if turn.role == "assistant"]

    def messages(self) -> list[dict]:
        return [{"role": t.role, "content": t.content or ""} for t in self.turns if t.role in ("user", "assistant")]

    def agent_positions(self) -> list[int]:
        """Index in ``messages()`` of each agent turn."""
        return [i for i, m in enumerate(self.messages()) if m["role"] == "assistant"]


def unstored_turn(role: str, content: str) -> SimpleNamespace:
    return SimpleNamespace(role=role, content=content, prompt=None, token_ids=None, raw=None, id=None)


class TurnCredit:
    """A credit signal. ``values`` is the whole interface (``last_values`` a shortcut a costly signal may take);
    ``close`` frees what it loaded."""

    #: What its values depend on beyond the dialogues and its flags, where the flags do not say (the newest critic
    #: it found in the store): `credit eval` reuses stored values only for the same (evaluate.credit_key).
    reads: str = ""

    def values(self, dialogues: Sequence[CreditDialogue]) -> list[list[float | None]]:
        """Per dialogue, per agent turn: the turn's credit (None: none to give, e.g. a turn cut away)."""
        raise NotImplementedError

    def last_values(self, dialogues: Sequence[CreditDialogue]) -> list[float | None]:
        """Per dialogue, its last agent turn's credit: what a candidate turn is worth at its state. A signal whose
        every turn costs model passes reads that turn alone; by default the last of ``values``."""
        return [row[-1] if row else None for row in self.values(dialogues)]

    def close(self) -> None:
        pass


def make_credit(spec: str, db, config: CreditConfig | None = None) -> TurnCredit:
    """The credit ``spec`` names (a registered name), built with ``config``."""
    choice, argument = CREDITS.parse(spec)
    return choice.factory(db, config or CreditConfig(), argument)


def check_credit(spec: str) -> str:
    """``spec`` if it names a registered credit; else CreditError in one line listing them."""
    CREDITS.parse(spec)
    return spec


def credits_help() -> str:
    return CREDITS.help()


# ---------------------------------------------------------------- dialogues


def stored_dialogues(db, trajectory_ids: Sequence[int]) -> list[CreditDialogue]:
    """The stored dialogues of ``trajectory_ids``, in that order."""
    from colbench.store import queries
    from colbench.tasks.rows import spec_of

    ids = list(trajectory_ids)
    with db.read() as session:
        rows = queries.trajectories_by_id(session, ids)
        tasks = {i: spec_of(t) for i, t in queries.tasks_by_id(session, {t.task_id for t in rows.values()}).items()}
        turns = queries.turns_for(session, ids)
    return [CreditDialogue(tasks[rows[i].task_id], [t for t in turns[i] if t.role in ("user", "assistant")], i,
                           rows[i].task_id, None if rows[i].reward is None else float(rows[i].reward)) for i in ids]


def continued(dialogue: CreditDialogue, position: int, candidate: str, reply: str | None) -> CreditDialogue:
    """``dialogue`` up to its agent turn at ``position`` (0-based among agent turns), that turn replaced by
    ``candidate``, and the human's ``reply`` to it (None for an answer: the dialogue ends)."""
    agent_seen = 0
    prefix = []
    for turn in dialogue.turns:
        if turn.role == "assistant":
            if agent_seen == position:
                break
            agent_seen += 1
        prefix.append(turn)
    turns = prefix + [unstored_turn("assistant", candidate)]
    if reply is not None:
        turns.append(unstored_turn("user", reply))
    return CreditDialogue(dialogue.task, turns, None, dialogue.task_id, None)


def is_answer(text: str, number: int) -> bool:
    """Whether the ``number``-th agent turn (1-based) saying ``text`` is the final answer."""
    return protocol.extract_answer(text, last_turn=number >= protocol.MAX_AGENT_TURNS) is not None


def human_replies(dialogues: Sequence[CreditDialogue]) -> list[str]:
    """The family's built-in simulated human's reply to each dialogue's last agent turn, cut to the family's limit."""
    from colbench.families import family as family_named
    from colbench.simulators.base import SimRequest

    replies: list[str] = [""] * len(dialogues)
    by_family: dict[str, list[int]] = {}
    for i, dialogue in enumerate(dialogues):
        by_family.setdefault(dialogue.task.family, []).append(i)
    for name, members in by_family.items():
        family = family_named(name)
        simulator = family.builtin_simulator()
        try:
            found = simulator.reply([SimRequest(task=dialogues[i].task, dialogue=dialogues[i].messages())
                                     for i in members])
        finally:
            simulator.close()
        for i, reply in zip(members, found):
            replies[i] = protocol.truncate_reply(reply.text if reply.error is None else protocol.NO_RESPONSE,
                                                 family.reply_limit)
    return replies


@dataclass
class State:
    """A stored agent turn's place, and candidate texts for it."""

    dialogue: CreditDialogue
    position: int  # 0-based among the dialogue's agent turns
    candidates: list[str] = field(default_factory=list)


def candidate_values(credit: TurnCredit, states: Sequence[State]) -> list[list[float | None]]:
    """Per state, per candidate: the credit of the candidate's turn in the stored turn's place, read on the dialogue
    it makes: the prefix, the candidate, and the built-in human's reply to it unless it is the answer."""
    made, owners = [], []
    for s, state in enumerate(states):
        for candidate in state.candidates:
            answers = is_answer(candidate, state.position + 1)
            made.append((continued(state.dialogue, state.position, candidate, None), answers))
            owners.append(s)
    asking = [i for i, (_, answers) in enumerate(made) if not answers]
    for i, reply in zip(asking, human_replies([made[i][0] for i in asking])):
        made[i][0].turns.append(unstored_turn("user", reply))
    values = credit.last_values([dialogue for dialogue, _ in made]) if made else []
    found: list[list[float | None]] = [[] for _ in states]
    for s, value in zip(owners, values):
        found[s].append(value)
    return found

