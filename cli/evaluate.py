"""`colbench eval`: policies side by side on a split."""
from __future__ import annotations

import typer

from colbench.cli.views.evaluate import FACTS_NOTES, eval_notes, eval_table, facts_table
from colbench.families import family as family_named
from colbench.cli.common import console, fail, print_json, state


def evaluate(
    tasks: str = typer.Option("backend:test", "--tasks", help="FAMILY:SPLIT to evaluate on."),
    policy: list[str] = typer.Option(
        None, "--policy", help="Only these policies (repeat the flag). Default: every policy with graded trajectories."
    ),
    simulator: str = typer.Option(None, "--simulator", help="Only trajectories with this simulator."),
    setting: str = typer.Option(
        None,
        "--setting",
        help=(
            "Only rollouts made with this setting (as shown in brackets after the policy; '' for the protocol's"
            " defaults)."
        )
    ),
    k: int = typer.Option(
        None, "--max-k", min=1, help="Report pass@k and pass^k up to this k (default: the fewest samples any task has)."
    ),
    old_k: int = typer.Option(None, "--k", hidden=True, min=1),
    grading: str = typer.Option(
        None,
        "--grading",
        help=(
            "Backend: only grades made under this grading (official or strict). Default: every grading, each in its own"
            " rows."
        )
    ),
    facts: bool = typer.Option(
        False,
        "--facts",
        help=(
            "backend-lite: instead of the scores, what the dialogues did with the hidden facts: facts obtained,"
            " dialogues with every fact, success with and without them, questions that re-asked a known fact or"
            " obtained nothing (colbench/families/lite_truth.py)."
        )
    ),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Per policy, side by side: backend % tests passed and success (95% bootstrap CIs), pass@k and pass^k
    (unbiased estimates over every sample: at least one of k succeeds, all k do);
    frontend mean similarity (95% CI) and win rate against the other policies. Every graded trajectory
    counts; "sim. failures" is how many had a turn where the simulated human failed to reply. Backend rows
    name the grading their rewards were made under (official: the official ColBench grader's semantics)."""
    from colbench.eval import as_dict, evaluate as run_eval
    from colbench.wiring import parse_task_selector

    family, split = parse_task_selector(tasks)
    if facts:
        _fact_finding(family, split, policy, simulator, setting, as_json)
        return
    k = old_k or k  # --k: the name this flag had (beside rollout's -k, which means samples per task)
    results = run_eval(state.db(), family, split, policies=policy or None, simulator=simulator, setting=setting,
                       max_k=k, grading=grading)
    if as_json:
        print_json([as_dict(r) for r in results])
        return
    if not results:
        fail(_nothing_matched(family, split, policy, simulator, setting, grading))
    console.print(without_empty_columns(eval_table(results, family, split)))
    for line in eval_notes(results, family):
        console.print(line)


def without_empty_columns(table):
    """The table less the columns no row fills: pass@k and pass^k when every task has one sample
    (they start at k = 2), rather than headings over blanks."""
    table.columns = [column for column in table.columns if any(str(cell).strip() for cell in column.cells)]
    return table


def _fact_finding(family: str, split: str, policies, simulator, setting, as_json: bool) -> None:
    from colbench.families.lite_truth import fact_finding

    if not family_named(family).tiers:  # the facts are those of a tier's tasks (backend-lite)
        fail(f"--facts reads backend-lite dialogues; {family}:{split} is not a backend split")
    rows = fact_finding(state.db(), split, policies=policies or None, simulator=simulator, setting=setting)
    if as_json:
        print_json([row.as_dict() for row in rows])
        return
    if not rows:
        fail(
            f"no graded backend-lite dialogues on {family}:{split}"
            + (" match the filters" if policies or simulator or setting is not None else "")
        )
    console.print(facts_table(rows, f"{family}:{split}"))
    for line in FACTS_NOTES:
        console.print(line, highlight=False)


def _nothing_matched(family: str, split: str, policies, simulator, setting, grading) -> str:
    """Why nothing was evaluated, naming what is there to evaluate instead."""
    from colbench.runs import labelled
    from colbench.store import queries

    with state.db().read() as session:
        groups = queries.graded_groups(session)
    here = [(policy, how, n) for fam, spl, policy, how, n in groups if (fam, spl) == (family, split)]
    asked = ", ".join(
        f"{name} {value!r}"
        for name, value in (
            ("--policy", policies and " ".join(policies)),
            ("--simulator", simulator),
            ("--setting", setting),
            ("--grading", grading)
        )
        if value is not None
    )
    message = f"no graded trajectories on {family}:{split}" + (f" match {asked}" if asked else "")
    if here:
        return (
            message
            + "; graded there: "
            + ", ".join(f"{labelled(policy, how)} ({n})" for policy, how, n in here[:12])
            + (" …" if len(here) > 12 else "")
        )
    elsewhere = sorted({f"{fam}:{spl}" for fam, spl, *_ in groups})
    return message + (
        "; graded trajectories are on " + ", ".join(elsewhere) + " (--tasks)"
        if elsewhere
        else "; nothing is graded yet (colbench rollout)"
    )


def register(app: typer.Typer) -> None:
    app.command("eval")(evaluate)
