"""`colbench audit`: how the parts of a run behaved (today: its simulated human)."""
from __future__ import annotations

from typing import List

import typer
from rich.table import Table

from colbench.cli.common import console, fail, print_json, state

app = typer.Typer(help="Audits of stored runs: the simulated human (leaks of the reference, refusals, empty replies).",
                  no_args_is_help=True)

_ROWS = (  # (figure, its count, its rate, what it is)
    ("leaks", "leaks", "leak_per_reply", "replies handing over the reference"),
    ("dialogues leaking", "dialogues_leaking", "leak_per_dialogue", "dialogues with such a reply"),
    ("reached the agent", "reached_agent", "reached_agent_per_reply", "leaking replies the agent read as written"),
    ("redacted", "redacted", None, "leaks the guard cut out"),
    ("resampled", "resampled", None, "leaks the guard replaced by a clean draw"),
    ("refusals", "refusals", "refusal_rate", "replies that decline or do not know"),
    ("empty", "empty", "empty_rate", "no reply (the simulator failed) or an empty one"),
    ("off role", "off_role", "off_role_rate", "wrote the solution, spoke as the agent, or used its protocol"),
    ("over-release", "over_release", "over_release_rate", "backend-lite: stated a fact the question did not ask"),
    ("wrong statements", "wrong_statements", "wrong_statement_rate", "backend-lite: contradicted a hidden fact"),
)


@app.command("simulator")
def simulator(
    runs: List[str] = typer.Argument(..., help="Runs to audit side by side: rollout:<id>, a run's name, or train:<id>"
                                     " of online RL (its rollouts)."),
    draws: int = typer.Option(0, "--draws", min=0, help="Ask the run's simulator K more times at each reply's"
                              " prefix (no guard): how often its answers to one prefix differ."),
    draw_limit: int = typer.Option(None, "--draw-limit", min=1, help="With --draws: only each run's first N"
                                   " replies."),
    as_json: bool = typer.Option(False, "--json", help="Print the figures as JSON."),
) -> None:
    """The simulated human of each run, from its stored replies: how often it handed over the reference (per reply
    and per dialogue, by the family's leak detector, on what it wrote), how many of those reached the agent, what
    the guard did, refusals, empty and off-role replies, and on backend-lite over-release and wrong statements
    (against its known facts); each rate with its count. --draws K: the same prefixes answered K more times, and
    how often the answers differ (a simulator at temperature 0 should not; a served one may, with its batch)."""
    from colbench.audit import audit_runs
    from colbench.cli.common import describe

    try:
        audits = audit_runs(state.db(), runs, draws=draws, draw_limit=draw_limit)
    except (ValueError, LookupError) as err:
        fail(describe(err))
    if as_json:
        print_json([a.figures() for a in audits])
        return
    figures = [a.figures() for a in audits]
    table = Table("figure", *(f"{a.run}\n{a.simulator}" for a in audits), "what it is", title="simulated human")
    table.add_row("replies", *(f"{f['replies']} in {f['dialogues']} dialogues" for f in figures), "")
    for label, count, rate, meaning in _ROWS:
        denominator = {"dialogues_leaking": "dialogues", "over_release": "lite_replies",
                       "wrong_statements": "lite_replies"}.get(count, "replies")
        table.add_row(label, *(_cell(f, count, rate, denominator) for f in figures), meaning)
    table.add_row("leak kinds", *(", ".join(f"{k} {n}" for k, n in f["kinds"].items()) or "-" for f in figures), "")
    table.add_row("off-role kinds", *(", ".join(f"{k} {n}" for k, n in f["off_role_kinds"].items()) or "-"
                                      for f in figures), "")
    if draws:
        table.add_row(f"{draws} more draws", *(
            f"{f['disagreement_rate']:.1%} ({f['disagreeing']}/{f['redrawn']}) differ, {f['distinct_replies']:.2f}"
            " distinct" if f["redrawn"] else "-" for f in figures), "prefixes whose answers are not all the same")
        table.add_row("dialogues the draws can move", *(
            f"{f['dialogues_disagreeing_rate']:.1%} ({f['dialogues_disagreeing']}/{f['redrawn_dialogues']})"
            if f["redrawn_dialogues"] else "-" for f in figures),
            "with such a prefix; none: the simulator explains none of the success variance")
    console.print(table)


def _cell(figures: dict, count: str, rate: str | None, denominator: str) -> str:
    if rate is None or figures[rate] is None:
        return str(figures[count]) if figures[denominator] else "-"
    return f"{figures[rate]:.1%} ({figures[count]}/{figures[denominator]})"
