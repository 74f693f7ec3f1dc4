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
from functools import partial
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
    # Where the cost was measured apart, once per repeat (a study's cost.jsonl): each repeat's seconds per turn, whose
    # mean is ``seconds_per_turn`` and whose range is the cost's interval.
    seconds_repeats: list[float] = field(default_factory=list)
    # ``seconds_per_turn`` split: a stored dialogue's agent turn (what an online step values) and a same-state
    # candidate (what a ranker values; infogain generates its next action first). None where not recorded.
    seconds_per_dialogue_turn: float | None = None
    seconds_per_candidate: float | None = None

    def cost_shown(self) -> str:
        if len(self.seconds_repeats) < 2:
            return f"{self.seconds_per_turn:.3f}"
        return f"{self.seconds_per_turn:.3f} [{min(self.seconds_repeats):.3f}, {max(self.seconds_repeats):.3f}]"

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


def turn_figures(dialogues: Sequence[dict]) -> dict:
    """The turn AUC, the question AUC and the answer accuracy of one credit, from its dialogue rows
    (CreditValues.dialogues)."""
    from colbench.families.lite_truth import ANSWER, NEW, QUESTIONS

    turn, question = [], []
    answers: dict[int, list[tuple[float, float]]] = {}  # task → (credit, reward) of each answer turn
    for dialogue in dialogues:
        task, row, kind, reward = dialogue["task"], dialogue["values"], dialogue["kinds"], dialogue["reward"]
        auc = dialogue_aucs(row, [k == NEW for k in kind])
        if auc is not None:
            turn.append((task, auc))
        asked = [(v, k) for v, k in zip(row, kind) if k in QUESTIONS]
        auc = dialogue_aucs([v for v, _ in asked], [k == NEW for _, k in asked])
        if auc is not None:
            question.append((task, auc))
        if kind and kind[-1] == ANSWER and row and row[-1] is not None and reward is not None:
            answers.setdefault(task, []).append((row[-1], reward))
    ordered = [(task, _ordered(a[0], b[0]) if a[1] > b[1] else _ordered(b[0], a[0]))
               for task, found in answers.items() for i, a in enumerate(found) for b in found[i + 1:] if a[1] != b[1]]
    return {"turn_auc": bootstrap(turn), "question_auc": bootstrap(question), "answer_accuracy": bootstrap(ordered)}


def same_state_pairs(db, run_id: int, limit_turns: int | None = None, among: set[int] | None = None):
    """The states a candidates run (`colbench credit sample`) or a SWEET run sampled candidates at (the first
    ``limit_turns`` by turn id; of the dialogues ``among`` only)."""
    from colbench.store import queries

    with db.read() as session:
        by_turn = queries.candidates_of_run(session, run_id)
        trajectory_of = queries.trajectories_of_turns(session, sorted(by_turn))
    if not by_turn:
        raise CreditError(f"--pairs-from train:{run_id}: that run stored no candidates (`colbench credit sample` or a"
                          " sweet run samples them)")
    turn_ids = sorted(t for t in by_turn if among is None or trajectory_of[t] in among)
    if not turn_ids:
        raise CreditError(f"--pairs-from train:{run_id}: none of its states is a turn of the dialogues scored")
    turn_ids = turn_ids[:limit_turns] if limit_turns else turn_ids
    dialogues = {d.trajectory_id: d for d in stored_dialogues(db, sorted({trajectory_of[t] for t in turn_ids}))}
    states = []
    for turn_id in turn_ids:
        dialogue = dialogues[trajectory_of[turn_id]]
        position = next(i for i, t in enumerate(dialogue.agent_turns) if t.id == turn_id)
        states.append(State(dialogue, position, [c.content for c in by_turn[turn_id]]))
    return states


def pair_figures(states: Sequence[dict]) -> dict[str, Figure]:
    """Over candidate pairs of a state whose truth differs: how often the credit orders them as the truth does; over
    all pairs, pairs of two questions, pairs of two answers (from CreditValues.states)."""
    units: dict[str, list] = {"pair_accuracy": [], "question_pair_accuracy": [], "answer_pair_accuracy": []}
    for state in states:
        truth, row, answers = state["truth"], state["values"], state["answers"]
        for i in range(len(truth)):
            for j in range(i + 1, len(truth)):
                a, b = truth[i], truth[j]
                if a is None or b is None or a == b or row[i] is None or row[j] is None:
                    continue
                unit = (state["task"], _ordered(row[i], row[j]) if a > b else _ordered(row[j], row[i]))
                units["pair_accuracy"].append(unit)
                if answers[i] == answers[j]:
                    units["answer_pair_accuracy" if answers[i] else "question_pair_accuracy"].append(unit)
    return {name: bootstrap(found) for name, found in units.items()}


@dataclass
class CreditValues:
    """What one credit said, as a study's files keep it (``values.jsonl``, a row per dialogue and per state): every
    figure of `credit eval` is computed from this, so `colbench study report` recomputes them with no store or model.

    ``dialogues``: {"trajectory", "task", "reward", "kinds" (lite truth per agent turn), "values"};
    ``states``: {"turn" (the stored agent turn), "task", "answers" (per candidate: is it the answer), "truth" (per
    candidate: its ground truth), "values"}."""

    credit: str
    training_info: bool
    cost: str
    seconds: float  # the credit's own work, over every turn and candidate it valued
    dialogues: list[dict]
    states: list[dict] = field(default_factory=list)
    candidate_seconds: float | None = None  # the part of ``seconds`` spent on the states' candidates (None: unknown)

    def figures(self, trajectories: set[int] | None = None) -> CreditFigures:
        """The figures, over every dialogue or only ``trajectories`` (and the states of their turns)."""
        dialogues = [d for d in self.dialogues if trajectories is None or d["trajectory"] in trajectories]
        states = [s for s in self.states if trajectories is None or s["trajectory"] in trajectories]
        pairs = pair_figures(states) if states else {}
        return CreditFigures(
            credit=self.credit, training_info=self.training_info, cost=self.cost, dialogues=len(dialogues),
            turns=sum(len(d["values"]) for d in dialogues), **turn_figures(dialogues),
            **({"pair_accuracy": Figure(None)} | pairs), seconds_per_turn=self.seconds_per_turn(),
            **dict(zip(("seconds_per_dialogue_turn", "seconds_per_candidate"), self.seconds_split())),
        )

    def valued(self) -> tuple[int, int]:
        """(dialogue turns, candidates) the credit gave a value."""
        return sum(len(d["values"]) for d in self.dialogues), sum(len(s["values"]) for s in self.states)

    def seconds_per_turn(self) -> float:
        """The credit's seconds per value it made, over every turn and candidate (whatever ``figures`` reads)."""
        return self.seconds / max(sum(self.valued()), 1)

    def seconds_split(self) -> tuple[float | None, float | None]:
        """(seconds per dialogue turn, per candidate); None for a side with nothing valued or an unrecorded split."""
        if self.candidate_seconds is None:
            return None, None
        turns, candidates = self.valued()
        return ((self.seconds - self.candidate_seconds) / turns if turns else None,
                self.candidate_seconds / candidates if candidates else None)

    def trajectories(self) -> set[int]:
        return {d["trajectory"] for d in self.dialogues}

    def rows(self) -> list[dict]:
        head = {"credit": self.credit}
        summary = {"training_info": self.training_info, "cost": self.cost, "seconds": self.seconds,
                   "candidate_seconds": self.candidate_seconds, "trajectories": sorted(self.trajectories())}
        return ([head | {"summary": summary}] + [head | {"dialogue": d} for d in self.dialogues]
                + [head | {"state": s} for s in self.states])

    @staticmethod
    def from_rows(rows: Sequence[dict]) -> list["CreditValues"]:
        """``rows()`` of any number of credits, read back, in the order they first appear; a credit scored in parts
        (one command per policy) is one, its seconds summed (the split only if every part recorded it)."""
        found: dict[str, CreditValues] = {}
        parts: dict[str, list[float | None]] = {}
        for row in rows:
            values = found.setdefault(row["credit"], CreditValues(row["credit"], False, "", 0.0, []))
            if "summary" in row:
                values.training_info, values.cost = row["summary"]["training_info"], row["summary"]["cost"]
                values.seconds += row["summary"]["seconds"]
                parts.setdefault(row["credit"], []).append(row["summary"].get("candidate_seconds"))
            elif "dialogue" in row:
                values.dialogues.append(row["dialogue"])
            elif "state" in row:
                values.states.append(row["state"])
        for credit, split in parts.items():
            found[credit].candidate_seconds = None if None in split else sum(split)
        return list(found.values())


def graded_lite_dialogues(db, tasks: str, policies: list[str] | None = None, limit: int | None = None,
                          task_limit: int | None = None) -> dict:
    """trajectory id → its lite truth (colbench.families.lite_truth), of the graded backend-lite dialogues of
    ``tasks`` (of ``policies``; the newest ``limit``; those of the first ``task_limit`` tasks by id); CreditError in
    one line when there are none."""
    from colbench.families.lite_truth import lite_dialogues
    from colbench.store import queries
    from colbench.wiring import parse_task_selector

    family, split = parse_task_selector(tasks)
    with db.read() as session:
        found, _ = queries.trained_data(session, family=family, split=split, watermark=None, policies=policies)
    if task_limit:
        first = set(sorted({t.task_id for t in found})[:task_limit])
        found = [t for t in found if t.task_id in first]
    ids = sorted((t.id for t in found), reverse=True)[:limit] if limit else sorted(t.id for t in found)
    truth = lite_dialogues(db, ids)
    if not truth:
        raise CreditError(f"no graded backend-lite dialogues in {tasks}" + (f" of {', '.join(policies)}"
                                                                           if policies else ""))
    return truth


def evaluate_credits(db, specs: Sequence[str], config: CreditConfig, *, tasks: str = "backend-lite:val",
                     policies: list[str] | None = None, limit: int | None = None, task_limit: int | None = None,
                     pairs_from: int | None = None, pair_turns: int | None = None,
                     on_progress=None) -> list[CreditValues]:
    """Value the graded lite dialogues of ``tasks`` (of ``policies``; the newest ``limit``; of the first
    ``task_limit`` tasks) and the same-state candidates the run ``pairs_from`` sampled in them (at most
    ``pair_turns`` states) with each credit of ``specs``. Every value lands in the store as it is made (``kept``):
    stopped, the same command goes on where it stopped; finished, it scores nothing again."""
    for spec in specs:
        CREDITS.parse(spec)
    truth = graded_lite_dialogues(db, tasks, policies, limit, task_limit)
    ids = sorted(truth)
    dialogues = stored_dialogues(db, ids)
    states = same_state_pairs(db, pairs_from, pair_turns, set(ids)) if pairs_from is not None else []
    state_rows = []
    if states:
        oracle = make_credit("oracle", db, config)
        try:
            true_values, _ = kept(db, "oracle", credit_key(db, "oracle", config, oracle, pairs_from), states,
                                  partial(candidate_values, oracle), on_progress)
        finally:
            oracle.close()
        state_rows = [{"trajectory": s.dialogue.trajectory_id, "turn": s.dialogue.agent_turns[s.position].id,
                       "task": s.dialogue.task_id, "answers": [is_answer(c, s.position + 1) for c in s.candidates],
                       "truth": row} for s, row in zip(states, true_values)]

    results = []
    for spec in specs:
        choice, _ = CREDITS.parse(spec)
        credit = make_credit(spec, db, config)
        try:
            values, seconds = kept(db, spec, credit_key(db, spec, config, credit), dialogues, credit.values,
                                   on_progress)
            judged, more = kept(db, spec, credit_key(db, spec, config, credit, pairs_from), states,
                                partial(candidate_values, credit), on_progress) if states else ([], 0.0)
        finally:
            credit.close()
        results.append(CreditValues(
            credit=spec, training_info=bool(getattr(credit, "training_info", choice.training_info)), cost=choice.cost,
            seconds=seconds + more, candidate_seconds=more,
            dialogues=[{"trajectory": d.trajectory_id, "task": d.task_id, "reward": d.reward,
                        "kinds": truth[d.trajectory_id].kinds, "values": row} for d, row in zip(dialogues, values)],
            states=[state | {"values": row} for state, row in zip(state_rows, judged)],
        ))
    return results


#: Dialogues (or states) a credit values between two writes to the store: what a stop loses at most.
CHUNK = 8


def credit_key(db, spec: str, config: CreditConfig, credit, pairs_from: int | None = None) -> str:
    """What decides a credit's values beyond the dialogue: its name, its flags (models as the store names them,
    ckpt:<id>, so a run's name taken again is another key), the weights it says it reads (``TurnCredit.reads``: the
    newest critic, when none is named), and for candidates their run. Stored values are reused only under the same
    key."""
    import hashlib
    import json

    from colbench.model_refs import checkpoint_part, get_checkpoint

    def made(ref):  # a checkpoint by its id and when it was made: SQLite gives a deleted newest row's id again
        if not ref or checkpoint_part(ref) is None:
            return ref
        row, _ = get_checkpoint(db, ref)
        return f"ckpt:{row.id}@{row.created_at.isoformat()}"

    settings = asdict(config) | {name: made(getattr(config, name)) for name in ("model", "scorer", "critic")}
    choice, argument = CREDITS.parse(spec)
    decided = [choice.name, made(argument), settings, made(getattr(credit, "reads", "")), pairs_from]
    return hashlib.sha256(json.dumps(decided, sort_keys=True).encode()).hexdigest()[:32]


def kept(db, spec: str, key: str, units: Sequence, value, on_progress=None) -> tuple[list[list], float]:
    """Per unit (a stored dialogue: a value per agent turn; a State: one per candidate), its values and the seconds
    they took: those the store holds under ``key``, the others by ``value`` (units → their rows), CHUNK units at a
    time, each chunk written to the store before the next starts."""
    from colbench.store import queries

    def slots(unit) -> list[tuple[int, int]]:
        if isinstance(unit, State):
            return [(unit.dialogue.agent_turns[unit.position].id, k) for k in range(len(unit.candidates))]
        return [(turn.id, -1) for turn in unit.agent_turns]

    wanted = [slots(unit) for unit in units]
    turn_ids = sorted({turn for row in wanted for turn, _ in row})
    with db.read() as session:
        found = {slot: (row.value, row.seconds) for slot, row in queries.credit_values(session, key, turn_ids).items()}
    todo = [i for i, row in enumerate(wanted) if not all(slot in found for slot in row)]
    for start in range(0, len(todo), CHUNK):
        chunk = todo[start: start + CHUNK]
        started = time.perf_counter()
        rows = value([units[i] for i in chunk])
        if len(rows) != len(chunk):
            raise CreditError(f"the credit {spec} valued {len(rows)} of {len(chunk)} dialogues or states asked")
        share = (time.perf_counter() - started) / max(sum(len(wanted[i]) for i in chunk), 1)
        made = []
        for i, row in zip(chunk, rows):
            if len(row) != len(wanted[i]):
                raise CreditError(f"the credit {spec} gave {len(row)} values where {len(wanted[i])} were asked")
            made += [{"credit_key": key, "credit": spec, "turn_id": turn, "candidate": candidate, "value": v,
                      "seconds": share} for (turn, candidate), v in zip(wanted[i], row)]
        with db.write() as session:
            queries.replace_credit_values(session, key, sorted({turn for i in chunk for turn, _ in wanted[i]}), made)
        found |= {(r["turn_id"], r["candidate"]): (r["value"], r["seconds"]) for r in made}
        if on_progress:
            on_progress(f"credit eval {spec}", start + len(chunk), len(todo), {})
    return [[found[slot][0] for slot in row] for row in wanted], sum(found[slot][1] for row in wanted for slot in row)


def save_values(path, valued: Sequence[CreditValues]) -> None:
    """``valued``'s rows into the JSONL file ``path``, in place of the rows it held for the same credit and the same
    dialogues; a credit's rows of other dialogues stay (a signal scored in parts, e.g. mc by each dialogue's own
    policy, one command each)."""
    from pathlib import Path

    from colbench.jsonl import replace_rows

    covered = {v.credit: v.trajectories() for v in valued}

    def replaced(row: dict) -> bool:
        mine = covered.get(row.get("credit"))
        if mine is None:
            return False
        if "summary" in row:
            return bool(mine & set(row["summary"].get("trajectories", ())))
        return (row.get("dialogue") or row.get("state") or {}).get("trajectory") in mine

    replace_rows(Path(path), replaced, [row for v in valued for row in v.rows()])
