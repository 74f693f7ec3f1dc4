"""Rich renderers of policies evaluated side by side (`colbench eval`) and of what their dialogues did
with the hidden facts (`colbench eval --facts`)."""
from __future__ import annotations

from rich.table import Table
from rich.text import Text

from colbench.families import family as family_named
from colbench.protocol import NO_RESPONSE
from colbench.runs import labelled


def eval_table(results, family: str, split: str) -> Table:
    """Policies side by side (`colbench eval`): backend % tests and success with CIs, pass@k and pass^k;
    frontend similarity and win rates. A column every row agrees on (one simulator, one grading) goes
    into the title, so that the intervals keep their lines on a 100-column terminal."""
    same = {name: {getattr(r, name) for r in results} for name in ("simulator", "grading")}
    shared = [
        f"{name} {next(iter(values))}" for name, values in same.items() if len(values) == 1 and next(iter(values))
    ]
    table = Table(title=" · ".join([f"{family}:{split}"] + shared), title_justify="left")
    columns = ["policy"] + [name for name in ("simulator", "grading") if len(same[name]) > 1] + ["tasks", "traj."]
    columns += ["sim. fail."] if any(r.simulator_failures for r in results) else []  # a column of zeros says nothing
    owner = family_named(family)
    headline = f"{owner.headline_label} (95% CI)"
    solved = owner.headline_metric == "success"  # each trajectory solved or not: success and pass@k lead
    reward = f"{owner.reward_label} (95% CI)"
    if solved:
        columns += [reward, headline, "pass@k", "pass^k"]
    else:
        columns += [headline, "metric", "win rate vs"]
    for name in columns:
        interval = "CI" in name  # an interval is never broken across lines; names and lists wrap
        table.add_column(
            name,
            justify="left" if name in ("policy", "simulator", "grading", "metric", "win rate vs") else "right",
            no_wrap=interval,
            overflow="fold",
            min_width=None if interval else min(len(name), 8)
        )
    for r in results:
        cells = {"policy": Text(r.label), "simulator": Text(r.simulator), "grading": r.grading or "–",
                 "tasks": str(r.n_tasks),
                 "traj.": str(r.n_trajectories), "sim. fail.": str(r.simulator_failures)}
        if solved:
            cells |= {reward: f"{r.reward.mean:.1%} [{r.reward.low:.1%}, {r.reward.high:.1%}]",
                      headline: f"{r.success.mean:.1%} [{r.success.low:.1%}, {r.success.high:.1%}]",
                      "pass@k": "  ".join(f"@{k} {v:.1%}" for k, v in r.pass_at_k.items() if k > 1),
                      "pass^k": "  ".join(f"^{k} {v:.1%}" for k, v in r.pass_hat_k.items() if k > 1)}
        else:
            cells |= {headline: f"{r.reward.mean:.3f} [{r.reward.low:.3f}, {r.reward.high:.3f}]", "metric": r.metric,
                      "win rate vs": Text("  ".join(f"{other} {rate:.1%}" for other, rate in r.win_rate.items()))}
        table.add_row(*(cells[name] for name in columns))
    return table


def eval_notes(results, family: str) -> list[str]:
    """What the eval table's columns leave unsaid."""
    lines = []
    if any(r.simulator_failures for r in results):
        lines.append(
            f"sim. failures: trajectories where the simulated human failed to reply on some turn; as officially, "
            f"the dialogue went on with the reply {NO_RESPONSE!r} and they are counted like the others"
        )
    note = family_named(family).eval_note([r.metric for r in results])
    return lines + ([note] if note else [])


def facts_table(rows, tasks: str) -> Table:
    """`colbench eval --facts`: per policy, what its lite dialogues did with the hidden facts."""
    table = Table(title=f"{tasks}: the hidden facts", title_justify="left")
    for name in ("policy", "traj.", "facts obtained", "every fact", "success | every fact", "success | a fact missing",
                 "agent turns", "questions: new / repeat / nothing"):
        table.add_column(name, justify="left" if name == "policy" else "right", overflow="fold")

    def share(value):
        return "–" if value is None else f"{value:.1%}"

    for row in rows:
        asked = (
            " / ".join(f"{share:.0%}" for share in row.questions.values()) if row.questions else "–"
        )  # new / repeat / nothing
        table.add_row(Text(labelled(row.policy, row.setting)), str(row.trajectories), share(row.facts_obtained),
                      share(row.every_fact),
                      share(row.success_with_every_fact), share(row.success_without), f"{row.agent_turns:.2f}", asked)
    return table


FACTS_NOTES = (
    (
        "facts obtained: of the facts the tasks' answers need, the share the human stated; every fact: dialogues that"
        " obtained all of them"
    ),
    (
        "success | every fact: how well the policy writes the code once it knows everything; questions: the share that"
        ' obtained a new fact, re-asked one already stated, or obtained nothing ("I don\'t know.")'
    ),
)
