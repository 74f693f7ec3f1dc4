"""A credit study's tables from its files alone (``values.jsonl``: `credit eval --values-out`), and the choice its plan
makes (studies/credit-signals/plan.md, "Decision rules"): `colbench study report` on a folder that holds one.

Every figure is recomputed from the values and truths the file keeps, by the same code `credit eval` prints with, so
the tables need no store and no model. A credit scored on fewer dialogues than the others (``mc``, on its subset)
gets a second table: every credit on that subset alike.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from colbench.training.credit.evaluate import CreditFigures, CreditValues

VALUES = "values.jsonl"
# The same signals valued again on one small subset, one at a time with nothing else running (a values file too):
# where it is, its seconds are the cost column, since the scoring runs' own share the machine with a session's work.
# Each row may name its ``repeat``: a signal measured in several repeats costs their mean, their range its interval.
COST = "cost.jsonl"
CONTROLS = ("oracle", "random")  # the ground truth and the chance line: never what a study carries
# The plan's question: does a signal rank questions better than the SWEET-RL critic with c? The critic is the
# spec `critic:ckpt:critic` (amendment 1; `critic` where a study names it alone), and study 3 measured it at 61% of
# question pairs.
CRITIC = ("critic", "critic:ckpt:critic")
STUDY_3_CRITIC_QUESTION_PAIRS = 0.61


@dataclass
class CreditTable:
    title: str
    dialogues: int
    figures: list[CreditFigures]


def credit_report(folder: Path) -> dict:
    """{"tables": [CreditTable], "carried": the plan's choice, with why}."""
    from colbench.jsonl import read_jsonl
    from colbench.study import StudyError

    valued = CreditValues.from_rows(read_jsonl(folder / VALUES))
    if not valued:
        raise StudyError(f"{folder / VALUES} holds no credit values")
    repeats = repeats_alone(read_jsonl(folder / COST))
    alone = {credit: [v.seconds_per_turn() for v in measured] for credit, measured in repeats.items()}

    def costed(figures: list[CreditFigures]) -> list[CreditFigures]:
        return [replace(f, seconds_per_turn=sum(alone[f.credit]) / len(alone[f.credit]),
                        seconds_repeats=alone[f.credit], **split_mean(repeats[f.credit]))
                if f.credit in alone else f for f in figures]

    everyone = set.union(*({d["trajectory"] for d in v.dialogues} for v in valued))
    tables = [CreditTable(f"every credit on the {len(everyone)} dialogues", len(everyone),
                          costed([v.figures() for v in valued]))]
    subsets = {frozenset(d["trajectory"] for d in v.dialogues) for v in valued} - {frozenset(everyone)}
    for subset in sorted(subsets, key=len):
        named = ", ".join(v.credit for v in valued if {d["trajectory"] for d in v.dialogues} == subset)
        covering = [v for v in valued if subset <= {d["trajectory"] for d in v.dialogues}]
        tables.append(CreditTable(f"the {len(subset)} dialogues {named} was scored on, every credit alike",
                                  len(subset), costed([v.figures(set(subset)) for v in covering])))
    return {"tables": tables, "answer": answer(tables[0].figures), "carried": carried(tables[0].figures),
            "cost_measured_alone": sorted(set(alone) & {v.credit for v in valued})}


def repeats_alone(rows: list[dict]) -> dict[str, list[CreditValues]]:
    """Each credit's values in each repeat of a cost file (rows without ``repeat`` are one)."""
    repeats: dict[int, list[dict]] = {}
    for row in rows:
        repeats.setdefault(row.get("repeat", 0), []).append(row)
    found: dict[str, list[CreditValues]] = {}
    for repeat in sorted(repeats):
        for values in CreditValues.from_rows(repeats[repeat]):
            found.setdefault(values.credit, []).append(values)
    return found


def split_mean(measured: list[CreditValues]) -> dict:
    """The repeats' mean seconds per dialogue turn and per candidate, each None unless every repeat recorded it."""
    sides = list(zip(*(v.seconds_split() for v in measured)))
    return {name: None if None in side else sum(side) / len(side)
            for name, side in zip(("seconds_per_dialogue_turn", "seconds_per_candidate"), sides)}


def answer(figures: list[CreditFigures]) -> dict:
    """The plan's question: the non-control signals whose question pair accuracy's 95% interval lies above study 3's
    61% and above the critic's figure measured here (its point value)."""
    critic = next((f.question_pair_accuracy for f in figures if f.credit in CRITIC), None)
    if critic is None or critic.value is None:
        return {"better": None, "why": "the critic with c is not scored: the question waits for it"}
    bar = max(STUDY_3_CRITIC_QUESTION_PAIRS, critic.value)
    better = [f.credit for f in figures if f.credit not in CONTROLS + CRITIC
              and f.question_pair_accuracy.low is not None and f.question_pair_accuracy.low > bar]
    why = (f"question pair accuracy's lower bound above {bar:.3f} (study 3's {STUDY_3_CRITIC_QUESTION_PAIRS:.2f} and"
           f" the critic's {critic.shown()} here)")
    return {"better": better, "why": why}


def carried(figures: list[CreditFigures]) -> dict:
    """The plan's rule: the non-control signal with the highest question pair accuracy, if its lower bound is above
    random's upper bound; of two whose intervals overlap, the cheaper (fewer seconds a turn)."""
    chance = next((f.question_pair_accuracy for f in figures if f.credit == "random"), None)
    scored = [f for f in figures if f.credit not in CONTROLS and f.question_pair_accuracy.value is not None]
    if not scored:
        return {"credit": None, "why": "no signal but the controls has a question pair accuracy"}
    best = max(scored, key=lambda f: f.question_pair_accuracy.value)
    rivals = [f for f in scored if f is not best and f.question_pair_accuracy.high >= best.question_pair_accuracy.low
              and f.seconds_per_turn < best.seconds_per_turn]
    choice = min(rivals, key=lambda f: f.seconds_per_turn) if rivals else best
    figure = choice.question_pair_accuracy
    if chance is None or chance.high is None:
        return {"credit": None, "why": "random has no question pair accuracy to clear"}
    if figure.low <= chance.high:
        return {"credit": None, "why": f"{choice.credit}'s lower bound {figure.low:.3f} does not clear random's upper"
                                       f" bound {chance.high:.3f}: the online study carries nothing"}
    how = f"the highest question pair accuracy ({figure.shown()})" if choice is best else (
        f"question pair accuracy {figure.shown()}, whose interval overlaps the highest's ({best.credit},"
        f" {best.question_pair_accuracy.shown()}), at less cost ({choice.seconds_per_turn:.3f} s/turn against"
        f" {best.seconds_per_turn:.3f})")
    return {"credit": choice.credit, "why": f"{how}; its lower bound is above random's upper bound ({chance.shown()})"}


def markdown(found: dict) -> str:
    lines = []
    for table in found["tables"]:
        lines += [f"### {table.title}", "",
                  "| credit | reads c | turn AUC | question AUC | answers | pairs | question pairs | answer pairs |"
                  " s/turn |", "|---|---|---|---|---|---|---|---|---|"]
        for f in table.figures:
            lines.append(f"| {f.credit} | {'yes' if f.training_info else 'no'} | {f.turn_auc.shown()} |"
                         f" {f.question_auc.shown()} | {f.answer_accuracy.shown()} | {f.pair_accuracy.shown()} |"
                         f" {f.question_pair_accuracy.shown()} | {f.answer_pair_accuracy.shown()} |"
                         f" {f.cost_shown()} |")
        lines.append("")
    alone = found["cost_measured_alone"]
    others = [f.credit for f in found["tables"][0].figures if f.credit not in alone] if found["tables"] else []
    lines.append(f"s/turn: seconds a valued turn or candidate, measured alone on one subset ({COST}) for "
                 f"{', '.join(alone) or 'none'} (the mean of its repeats, their range in brackets: the machine's timing"
                 f" variation, not an interval over tasks)"
                 + (f"; {', '.join(others)} from their scoring runs, with whatever else ran." if others else "."))
    lines.append("")
    better = found["answer"]["better"]
    lines.append(f"**Better than the critic at questions**: "
                 f"{'waits' if better is None else ', '.join(better) or 'none'}: {found['answer']['why']}.")
    lines.append("")
    choice = found["carried"]
    lines.append(f"**Carried online**: {choice['credit'] or 'nothing'}: {choice['why']}.")
    return "\n".join(lines)


def as_json(found: dict) -> dict:
    return {"tables": [{"title": t.title, "dialogues": t.dialogues, "figures": [f.as_dict() for f in t.figures]}
                       for t in found["tables"]], "answer": found["answer"], "carried": found["carried"],
            "cost_measured_alone": found["cost_measured_alone"]}
