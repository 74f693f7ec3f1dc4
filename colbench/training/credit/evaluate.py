"""`colbench credit eval`: how well each turn credit ranks turns as backend-lite's ground truth does, at what cost.

On graded backend-lite dialogues, every agent turn's kind is known (colbench/families/lite_truth.py): a question that
obtained a new fact, a re-ask, one nothing answers, the answer. Per credit:

- **turn AUC**: within a dialogue, the chance that a new-fact turn outranks another turn (ties half), averaged over
  dialogues with both; **question AUC**: the same among questions alone (where SWEET-RL's critic was weakest, 61%);
- **answer accuracy**: over pairs of answers to the same task that passed different shares of tests, how often the
  credit orders them as the tests do;
- **pair accuracy**: over same-state candidate pairs (``--pairs-from``: the candidates `colbench credit sample` or a
  SWEET run sampled at stored prompts), how often the credit orders two candidates whose ground truth differs as the
  truth does; over all pairs, pairs of two questions, and pairs of two answers;
- **seconds per turn** of the credit's own work.

Each figure carries a 95% interval from a bootstrap over tasks (dialogues and pairs of one task move together).
"""
from __future__ import annotations

import random
import time
from dataclasses import asdict, dataclass, field
from typing import Sequence

from colbench.training.credit.base import (
    CREDITS, CreditConfig, CreditError, State, candidate_values, is_answer, make_credit, stored_dialogues,
)

BOOTSTRAP_SAMPLES = 2000  # the credit-signals study's plan


@dataclass
class Figure:
    value: float | None
    low: float | None = None
    high: float | None = None
    n: int = 0  # dialogues or pairs it is the mean over

    def shown(self) -> str:
        if self.value is None:
            return "n/a"
        return f"{self.value:.2f} [{self.low:.2f}, {self.high:.2f}]" if self.low is not None else f"{self.value:.2f}"


@dataclass
class CreditFigures:
    credit: str
    training_info: bool
    cost: str
    dialogues: int
    turns: int
    turn_auc: Figure
    question_auc: Figure
    answer_accuracy: Figure
    pair_accuracy: Figure
    seconds_per_turn: float
    question_pair_accuracy: Figure = field(default_factory=lambda: Figure(None))
    answer_pair_accuracy: Figure = field(default_factory=lambda: Figure(None))
    details: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


def bootstrap(units: Sequence[tuple[int, float]], seed: int = 0) -> Figure:
    """The mean of ``units`` ((task id, value) each) with a 95% interval resampling tasks."""
    if not units:
        return Figure(None)
    by_task: dict[int, list[float]] = {}
    for task, value in units:
        by_task.setdefault(task, []).append(value)
    tasks = sorted(by_task)
    mean = sum(v for _, v in units) / len(units)
    rng = random.Random(seed)
    means = []
    for _ in range(BOOTSTRAP_SAMPLES):
        drawn = [v for t in rng.choices(tasks, k=len(tasks)) for v in by_task[t]]
        means.append(sum(drawn) / len(drawn))
    means.sort()
    return Figure(mean, means[int(0.025 * len(means))], means[int(0.975 * len(means)) - 1], len(units))


def _ordered(better: float, worse: float) -> float:
    return 1.0 if better > worse else 0.5 if better == worse else 0.0


def dialogue_aucs(values: Sequence[float | None], positive: Sequence[bool]) -> float | None:
    """P(a positive turn's value > a negative one's) within one dialogue (ties half); None without both."""
    pos = [v for v, p in zip(values, positive) if p and v is not None]
    neg = [v for v, p in zip(values, positive) if not p and v is not None]
    if not pos or not neg:
        return None
    return sum(_ordered(p, n) for p in pos for n in neg) / (len(pos) * len(neg))


def turn_figures(dialogues, values, kinds) -> dict:
    """The turn AUC, the question AUC and the answer accuracy of one credit's ``values``."""
    from colbench.families.lite_truth import ANSWER, NEW, QUESTIONS

    turn, question = [], []
    answers: dict[int, list[tuple[float, float]]] = {}  # task → (credit, reward) of each answer turn
    for dialogue, row, kind in zip(dialogues, values, kinds):
        auc = dialogue_aucs(row, [k == NEW for k in kind])
        if auc is not None:
            turn.append((dialogue.task_id, auc))
        asked = [(v, k) for v, k in zip(row, kind) if k in QUESTIONS]
        auc = dialogue_aucs([v for v, _ in asked], [k == NEW for _, k in asked])
        if auc is not None:
            question.append((dialogue.task_id, auc))
        if kind and kind[-1] == ANSWER and row and row[-1] is not None and dialogue.reward is not None:
            answers.setdefault(dialogue.task_id, []).append((row[-1], dialogue.reward))
    ordered = [(task, _ordered(a[0], b[0]) if a[1] > b[1] else _ordered(b[0], a[0]))
               for task, found in answers.items() for i, a in enumerate(found) for b in found[i + 1:] if a[1] != b[1]]
    return {"turn_auc": bootstrap(turn), "question_auc": bootstrap(question), "answer_accuracy": bootstrap(ordered)}


def same_state_pairs(db, run_id: int, limit_turns: int | None = None):
    """The states a candidates run (`colbench credit sample`) or a SWEET run sampled candidates at."""
    from colbench.store import queries

    with db.read() as session:
        by_turn = queries.candidates_of_run(session, run_id)
        trajectory_of = queries.trajectories_of_turns(session, sorted(by_turn))
    if not by_turn:
        raise CreditError(f"--pairs-from train:{run_id}: that run stored no candidates (`colbench credit sample` or a"
                          " sweet run samples them)")
    turn_ids = sorted(by_turn)[:limit_turns] if limit_turns else sorted(by_turn)
    dialogues = {d.trajectory_id: d for d in stored_dialogues(db, sorted({trajectory_of[t] for t in turn_ids}))}
    states = []
    for turn_id in turn_ids:
        dialogue = dialogues[trajectory_of[turn_id]]
        position = next(i for i, t in enumerate(dialogue.agent_turns) if t.id == turn_id)
        states.append(State(dialogue, position, [c.content for c in by_turn[turn_id]]))
    return states


def pair_figures(truth: list[list[float | None]], judged: list[list[float | None]], states) -> dict[str, Figure]:
    """Over candidate pairs of a state whose truth differs: how often the credit orders them as the truth does; over
    all pairs, pairs of two questions, pairs of two answers."""
    units: dict[str, list] = {"pair_accuracy": [], "question_pair_accuracy": [], "answer_pair_accuracy": []}
    for state, true_row, row in zip(states, truth, judged):
        answers = [is_answer(c, state.position + 1) for c in state.candidates]
        for i in range(len(true_row)):
            for j in range(i + 1, len(true_row)):
                a, b = true_row[i], true_row[j]
                if a is None or b is None or a == b or row[i] is None or row[j] is None:
                    continue
                unit = (state.dialogue.task_id, _ordered(row[i], row[j]) if a > b else _ordered(row[j], row[i]))
                units["pair_accuracy"].append(unit)
                if answers[i] == answers[j]:
                    units["answer_pair_accuracy" if answers[i] else "question_pair_accuracy"].append(unit)
    return {name: bootstrap(found) for name, found in units.items()}


def graded_lite_dialogues(db, tasks: str, policies: list[str] | None = None, limit: int | None = None) -> dict:
    """trajectory id → its lite truth (colbench.families.lite_truth), of the graded backend-lite dialogues of
    ``tasks`` (of ``policies``; the newest ``limit``); CreditError in one line when there are none."""
    from colbench.families.lite_truth import lite_dialogues
    from colbench.store import queries
    from colbench.wiring import parse_task_selector

    family, split = parse_task_selector(tasks)
    with db.read() as session:
        found, _ = queries.trained_data(session, family=family, split=split, watermark=None, policies=policies)
    ids = sorted((t.id for t in found), reverse=True)[:limit] if limit else sorted(t.id for t in found)
    truth = lite_dialogues(db, ids)
    if not truth:
        raise CreditError(f"no graded backend-lite dialogues in {tasks}" + (f" of {', '.join(policies)}"
                                                                           if policies else ""))
    return truth


def evaluate_credits(db, specs: Sequence[str], config: CreditConfig, *, tasks: str = "backend-lite:val",
                     policies: list[str] | None = None, limit: int | None = None, pairs_from: int | None = None,
                     pair_turns: int | None = None, on_progress=None) -> list[CreditFigures]:
    """Score each credit of ``specs`` on the graded lite dialogues of ``tasks`` (of ``policies``; the newest
    ``limit``), and on the same-state candidates of the SWEET run ``pairs_from`` (at most ``pair_turns`` states)."""
    for spec in specs:
        CREDITS.parse(spec)
    truth = graded_lite_dialogues(db, tasks, policies, limit)
    ids = sorted(truth)
    dialogues = stored_dialogues(db, ids)
    kinds = [truth[i].kinds for i in ids]
    states = same_state_pairs(db, pairs_from, pair_turns) if pairs_from is not None else []
    true_values = None
    if states:
        oracle = make_credit("oracle", db, config)
        try:
            true_values = candidate_values(oracle, states)
        finally:
            oracle.close()

    results = []
    for spec in specs:
        choice, _ = CREDITS.parse(spec)
        credit = make_credit(spec, db, config)
        try:
            started = time.perf_counter()
            values = credit.values(dialogues)
            seconds = time.perf_counter() - started
            turns = sum(len(row) for row in values)
            pairs = {}
            if states:
                started = time.perf_counter()
                pairs = pair_figures(true_values, candidate_values(credit, states), states)
                seconds += time.perf_counter() - started
                turns += sum(len(s.candidates) for s in states)
        finally:
            credit.close()
        results.append(CreditFigures(
            credit=spec, training_info=bool(getattr(credit, "training_info", choice.training_info)), cost=choice.cost,
            dialogues=len(dialogues), turns=sum(len(row) for row in values),
            **turn_figures(dialogues, values, kinds), **({"pair_accuracy": Figure(None)} | pairs),
            seconds_per_turn=seconds / max(turns, 1),
        ))
        if on_progress:
            on_progress("credit eval", len(results), len(specs), {})
    return results
