"""What backend-lite dialogues did with the hidden facts: ground truth from the built-in human.

The built-in human states a hidden fact exactly when asked for it (simulators/rulebased/lite.py),
so every agent turn of a lite dialogue is known to be one of:

- ``new fact``: a question whose reply stated a fact not stated before;
- ``repeat``: a question whose reply only restated facts already stated;
- ``nothing``: a question none of the task's facts answers ("I don't know.");
- ``answer``: the final answer.

Two views are built on these. Per policy (``colbench eval --facts``): how much of what the answer
needs was obtained, and what came of it: success with every fact obtained separates asking from
writing the code. Per SWEET-RL run (``colbench critic pairs``): the kinds of the chosen and the
rejected candidate of each pair its critic ranked, i.e. what the critic taught the policy.
"""
from __future__ import annotations

import functools
import re
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field

from colbench import protocol
from colbench.store import queries

FAMILY = "backend"  # backend-lite's tasks are backend tasks (this module is part of that family)

NEW, REPEAT, NOTHING, ANSWER = "new fact", "repeat", "nothing", "answer"
QUESTIONS = (NEW, REPEAT, NOTHING)


def turn_kind(task, known: set[str], text: str, *, last_turn: bool = False) -> tuple[str, set[str]]:
    """The kind of an agent turn, given the facts stated before it, and the facts its reply states."""
    if protocol.extract_answer(text, last_turn=last_turn) is not None:
        return ANSWER, set()
    from colbench.simulators.rulebased.lite import revealed_facts

    stated = set(revealed_facts(task, text))
    return (NEW if stated - known else REPEAT if stated else NOTHING), stated


@dataclass
class LiteDialogue:
    """A stored lite dialogue, its agent turns judged in order."""

    task: object  # its TaskSpec
    trajectory: object
    agent_turns: list  # the stored agent turns, in order
    kinds: list[str]  # each agent turn's kind
    stated: list[set[str]]  # the facts the human's reply to each agent turn stated

    def known_before(self, position: int) -> set[str]:
        """The facts stated before the agent turn at ``position`` (0-based among agent turns)."""
        return set().union(*self.stated[:position])


def judged(task, trajectory, agent_turns: list) -> LiteDialogue:
    """Each agent turn's kind, given the facts the turns before it obtained."""
    known: set[str] = set()
    kinds, stated = [], []
    for index, turn in enumerate(agent_turns):
        kind, facts = turn_kind(task, known, turn.content, last_turn=index + 1 >= protocol.MAX_AGENT_TURNS)
        known |= facts
        kinds.append(kind)
        stated.append(facts)
    return LiteDialogue(task, trajectory, agent_turns, kinds, stated)


def lite_dialogues(db, trajectory_ids: list[int]) -> dict[int, LiteDialogue]:
    """trajectory id → its judged dialogue, lite tasks only."""
    from colbench.tasks.rows import spec_of
    from colbench.tasks.lite import is_lite

    with db.read() as session:
        by_id = queries.trajectories_by_id(session, trajectory_ids)
        tasks = {i: spec_of(t) for i, t in queries.tasks_by_id(session, {t.task_id for t in by_id.values()}).items()}
        turns = queries.turns_for(session, trajectory_ids)
    found = {}
    for trajectory_id in trajectory_ids:
        trajectory = by_id[trajectory_id]
        task = tasks[trajectory.task_id]
        if is_lite(task):
            found[trajectory_id] = judged(task, trajectory,
                                          [turn for turn in turns[trajectory_id] if turn.role == "assistant"])
    return found


# ---------------------------------------------------------------- per policy


@dataclass
class FactFinding:
    """A policy's dialogues on a lite split (one row of `colbench eval --facts`)."""

    policy: str
    simulator: str
    setting: str
    trajectories: int
    facts_obtained: float  # of the facts the tasks' answers need, the share the dialogues obtained
    every_fact: float  # the share of dialogues that obtained every fact
    success_with_every_fact: float | None  # success among those dialogues: how well the policy writes the code
    success_without: float | None  # success among the others (near 0: the tests need every fact)
    agent_turns: float  # mean, the answer included
    questions: dict[str, float] = field(default_factory=dict)  # kind → share of the questions asked

    def as_dict(self) -> dict:
        return asdict(self)


def fact_finding(
    db, split: str, *, policies: list[str] | None = None, simulator: str | None = None, setting: str | None = None,
) -> list[FactFinding]:
    """One row per (policy, simulator, setting) with graded dialogues on the backend ``split`` (lite tasks only)."""
    from colbench.tasks.lite import facts_of

    with db.read() as session:
        graded = queries.graded_trajectory_ids(session, family=FAMILY, split=split, policies=policies,
                                               simulator=simulator, setting=setting)
    dialogues = lite_dialogues(db, [trajectory_id for trajectory_id, _ in graded])
    groups: dict[tuple, list] = defaultdict(list)
    for trajectory_id, key in graded:
        if trajectory_id in dialogues:
            groups[key].append(dialogues[trajectory_id])
    rows = []
    for (policy, sim, how), members in sorted(groups.items()):
        needed = obtained = 0
        complete, partial, asked = [], [], Counter()
        for dialogue in members:
            need, new = len(facts_of(dialogue.task)), dialogue.kinds.count(NEW)
            needed += need
            obtained += new
            (complete if new == need else partial).append(bool(dialogue.trajectory.success))
            asked.update(kind for kind in dialogue.kinds if kind != ANSWER)
        questions = sum(asked.values())
        rows.append(FactFinding(
            policy=policy, simulator=sim, setting=how or "", trajectories=len(members),
            facts_obtained=obtained / needed if needed else 0.0,
            every_fact=len(complete) / len(members),
            success_with_every_fact=sum(complete) / len(complete) if complete else None,
            success_without=sum(partial) / len(partial) if partial else None,
            agent_turns=sum(len(dialogue.kinds) for dialogue in members) / len(members),
            questions={kind: asked[kind] / questions for kind in QUESTIONS} if questions else {},
        ))
    return rows


# ---------------------------------------------------------------- per SWEET-RL run


@dataclass
class PairKinds:
    """What a SWEET-RL run's pairs preferred (`colbench critic pairs`)."""

    run_id: int
    pairs: int
    kinds: dict[str, int]  # "chosen kind > rejected kind" → pairs
    answers_graded: dict[str, int] = field(default_factory=dict)  # answer-vs-answer pairs: which side passed more tests

    def as_dict(self) -> dict:
        return asdict(self)

    def preferred(self, better: str, worse: str) -> tuple[int, int]:
        """Pairs that chose ``better`` over ``worse``, and the other way round."""
        return self.kinds.get(f"{better} > {worse}", 0), self.kinds.get(f"{worse} > {better}", 0)


def pair_kinds(db, run_id: int, *, grader=None) -> PairKinds:
    """Each pair's (chosen, rejected) kinds, judged against the dialogue the candidates continue.
    With a ``grader``, the pairs of two answers are graded: did the chosen one pass more tests?"""
    with db.read() as session:
        pairs = queries.sweet_pairs_of(session, run_id)
    dialogues = lite_dialogues(db, sorted({turn.trajectory_id for _, _, turn in pairs}))
    kinds: Counter = Counter()
    answers = []
    for chosen, rejected, turn in pairs:
        dialogue = dialogues.get(turn.trajectory_id)
        if dialogue is None:
            continue
        position = next(i for i, agent in enumerate(dialogue.agent_turns) if agent.id == turn.id)
        known, last = dialogue.known_before(position), position + 1 >= protocol.MAX_AGENT_TURNS
        sides = [
            turn_kind(dialogue.task, known, candidate.content, last_turn=last)[0] for candidate in (chosen, rejected)
        ]
        kinds[f"{sides[0]} > {sides[1]}"] += 1
        if sides == [ANSWER, ANSWER]:
            answers.append((dialogue.task, chosen.content, rejected.content, last))
    result = PairKinds(run_id=run_id, pairs=len(pairs), kinds=dict(kinds.most_common()))
    if grader is not None and answers:
        batch = [
            (task, protocol.extract_answer(text, last_turn=last)) for task, *texts, last in answers for text in texts
        ]
        reports = grader.grade(batch)
        verdicts = Counter()
        for chosen, rejected in zip(reports[::2], reports[1::2]):
            better = chosen.fraction_passed - rejected.fraction_passed
            verdicts["chosen passed more" if better > 0 else "rejected passed more" if better < 0 else "same"] += 1
        result.answers_graded = dict(verdicts)
    return result


class TurnOracle:
    """Ground truth for single agent turns of stored backend-lite dialogues (SWEET-RL's ``--score oracle``): a
    question is worth 1 when the built-in human's reply to it would state a fact not stated before in the dialogue,
    else 0 (it re-asks, or nothing answers it); an answer is worth its share of tests passed, graded in the sandbox."""

    def __init__(self, db, trajectory_ids, sandbox: str = "auto"):
        from colbench.grading.grader import Grader

        self.dialogues = lite_dialogues(db, sorted(trajectory_ids))
        missing = sorted(set(trajectory_ids) - set(self.dialogues))
        if missing:
            raise ValueError(f"--score oracle needs backend-lite tasks: trajectory {missing[0]} is not one")
        self.grader = Grader(sandbox=sandbox)

    def values(self, turns) -> list[list[float]]:
        """For each (trajectory id, agent turn id, candidate texts): each candidate's value in that turn's place."""
        values: list[list] = []
        answers: list[tuple] = []  # (turn index, candidate index, task, code)
        for t, (trajectory_id, turn_id, texts) in enumerate(turns):
            dialogue = self.dialogues[trajectory_id]
            position = next(i for i, turn in enumerate(dialogue.agent_turns) if turn.id == turn_id)
            known, last = dialogue.known_before(position), position + 1 >= protocol.MAX_AGENT_TURNS
            row = []
            for c, text in enumerate(texts):
                kind, _ = turn_kind(dialogue.task, known, text, last_turn=last)
                row.append(None if kind == ANSWER else float(kind == NEW))  # an answer's: its share of tests passed
                if kind == ANSWER:
                    answers.append((t, c, dialogue.task, protocol.extract_answer(text, last_turn=last)))
            values.append(row)
        for (t, c, _, _), report in zip(answers, self.grader.grade([(task, code) for _, _, task, code in answers])):
            values[t][c] = report.fraction_passed
        return values

    def close(self) -> None:
        self.grader.close()


def pair_preferences(db, run_id: int) -> dict:
    """What a SWEET-RL run's pairs preferred, judged by the lite human: pairs that chose answering over re-asking a
    stated fact (and the other way), and a question obtaining a new fact over one obtaining nothing. Empty for
    other tasks."""
    kinds = pair_kinds(db, run_id)
    if not kinds.kinds:
        return {}
    answer, reask = kinds.preferred(ANSWER, REPEAT)
    new, nothing = kinds.preferred(NEW, NOTHING)
    return {"pairs_answer_over_reask": answer, "pairs_reask_over_answer": reask, "pairs_new_over_nothing": new,
            "pairs_nothing_over_new": nothing}


# ---------------------------------------------------------------- what a reply stated (audits of any simulator)

_WORD = re.compile(r"[a-z]+|\d+(?:\.\d+)?")
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+")


def _words_of(text: str) -> list[str]:
    return _WORD.findall(text.lower().replace("%", " percent"))


@functools.lru_cache(maxsize=1)
def _value_words() -> dict[tuple[str, str], tuple[frozenset, list[frozenset]]]:
    """Per template and fact name: the words every task's sentence for it shares (its frame: "the sales tax
    rate is ... percent"), and each value it takes across backend-lite (the rest: {"5"}, {"one", "decimal"})."""
    from colbench.tasks.lite import facts_of, lite_tasks, template_of

    sentences: dict[tuple[str, str], set[frozenset]] = defaultdict(set)
    for task in lite_tasks():
        for fact in facts_of(task):
            sentences[template_of(task), fact.name].add(frozenset(_words_of(fact.sentence)))
    values = {}
    for key, forms in sentences.items():
        frame = frozenset.intersection(*forms)
        values[key] = (frame, [form - frame for form in forms if form - frame])
    return values


def _truth(task, fact) -> tuple[frozenset, frozenset, list[frozenset]]:
    from colbench.tasks.lite import template_of

    frame, values = _value_words().get((template_of(task), fact.name), (frozenset(), []))
    return frame, frozenset(_words_of(fact.sentence)) - frame, values


def _about(fact, words: set[str]) -> bool:
    return any(keyword in words for keyword in fact.keywords)


def _stated_in(task, facts, words: set[str]) -> dict[str, frozenset]:
    """The facts one sentence states, with their values' words."""
    stated = {}
    for fact in facts:
        frame, value, _ = _truth(task, fact)
        # Its value, and enough of its frame that a value shared by two facts (20 units, 20 percent) is not both.
        named = (_about(fact, words) and 2 * len(frame & words) > len(frame)) or (frame and frame <= words)
        if value and value <= words and named:
            stated[fact.name] = value
    return stated


def stated_facts(task, reply: str) -> set[str]:
    """Names of the hidden facts a reply states: a sentence that names the fact (one of its keywords and half
    its frame) and carries its value. Empty for a task that is not backend-lite."""
    from colbench.tasks.lite import facts_of

    facts = facts_of(task)
    return {name for sentence in _SENTENCE.split(reply) for name in _stated_in(task, facts, set(_words_of(sentence)))}


def contradicted_facts(task, reply: str) -> set[str]:
    """Names of the hidden facts a reply contradicts: a sentence about the fact that carries another value
    it takes in backend-lite (or, for a number, any other number) and not its own. What the sentence states
    of another fact ("the discount is 12 percent" beside a 200 threshold) contradicts nothing."""
    from colbench.tasks.lite import facts_of

    facts = facts_of(task)
    wrong = set()
    for sentence in _SENTENCE.split(reply):
        words = set(_words_of(sentence))
        stated = _stated_in(task, facts, words)
        accounted = words - frozenset().union(*stated.values()) if stated else words
        for fact in facts:
            _, value, values = _truth(task, fact)
            if not value or fact.name in stated or not _about(fact, words):
                continue
            numbers = {w for w in accounted if w[0].isdigit()}
            numeric = all(w[0].isdigit() for w in value)
            if (numeric and numbers) or (not numeric and any(v <= accounted for v in values if v != value)):
                wrong.add(fact.name)
    return wrong


def over_released(task, question: str, reply: str) -> set[str]:
    """The facts a reply states that the agent's question did not ask for (the built-in human's reading of
    which facts a question asks about)."""
    from colbench.simulators.rulebased.lite import revealed_facts

    return stated_facts(task, reply) - set(revealed_facts(task, question))
