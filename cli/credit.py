"""`colbench credit`: turn-credit signals, listed and scored against backend-lite's ground truth."""
from __future__ import annotations

from pathlib import Path
from typing import List

import typer
from rich.table import Table

from colbench.cli.common import console, fail, print_json, reporting, state
from colbench.cli.options import flags_from
from colbench.training.credit import CREDITS, CreditConfig
from colbench.training.credit.candidates import CandidatesConfig

app = typer.Typer(help="Turn credit: every signal that values agent turns, behind one interface (ls, sample, eval;"
                  " export and import keep a candidates run in a file).",
                  no_args_is_help=True)


@app.command("ls")
def list_credits(as_json: bool = typer.Option(False, "--json", help="Print them as JSON.")) -> None:
    """The registered turn credits (plugins' included): what each reads and costs."""
    rows = [{"name": c.name, "training_info": c.training_info, "cost": c.cost, "help": c.help} for c in CREDITS]
    if as_json:
        print_json(rows)
        return
    table = Table("credit", "training-time information", "cost per turn", "what it is")
    for row in rows:
        table.add_row(row["name"], "yes" if row["training_info"] else "no", row["cost"], row["help"])
    console.print(table)


@app.command("eval")
@flags_from(CreditConfig)
def evaluate(
    config: CreditConfig,
    credit: List[str] = typer.Option(..., "--credit", help="A credit to score (repeat for a table side by side): "
                                     + ", ".join(CREDITS.names()) + " or a plugin's (`colbench credit ls`)."),
    tasks: str = typer.Option("backend-lite:val", "--tasks", help="Whose graded dialogues, as rollout's --tasks."),
    policies: str = typer.Option(None, "--policies", help="Only dialogues of these policies (comma-separated, a"
                                 " trailing * matches a prefix)."),
    limit: int = typer.Option(None, "--limit", min=1, help="Only the newest N dialogues."),
    task_limit: int = typer.Option(None, "--task-limit", min=1, help="Only the dialogues of the first N tasks (by"
                                   " id): a subset every credit is scored on alike (the study's mc subset)."),
    pairs_from: str = typer.Option(None, "--pairs-from", help="A candidates run (`colbench credit sample`) or a SWEET"
                                   " run (train:<id> or its name) whose stored candidates give the same-state pairs of"
                                   " the pair accuracy."),
    pair_turns: int = typer.Option(None, "--pair-turns", min=1, help="With --pairs-from: at most N of its states."),
    values_out: Path = typer.Option(None, "--values-out", help="Also write every value each credit gave, with the"
                                    " truth beside it, as JSONL (a study's values.jsonl: `colbench study report`"
                                    " recomputes every figure from it); an existing file gets these credits' rows in"
                                    " place of any it held for them."),
    as_json: bool = typer.Option(False, "--json", help="Print the figures as JSON."),
) -> None:
    """How well each credit ranks turns as backend-lite's ground truth does: within-dialogue AUC of the turns that
    obtained a new fact, the same among questions alone, answers ordered as their tests, same-state candidate pairs
    (--pairs-from: all, between questions, between answers), and seconds per turn; each with a 95% interval
    bootstrapped over tasks."""
    from colbench.training.credit.evaluate import evaluate_credits
    from colbench.runs import resolve

    db = state.db()
    run_id = None
    if pairs_from is not None:
        with db.read() as session:
            found = resolve(session, pairs_from)
        if found.kind != "train":
            fail(f"--pairs-from {pairs_from}: give a candidates or SWEET run (train:<id>), not a {found.kind}")
        run_id = found.id
    chosen = [p.strip() for p in policies.split(",") if p.strip()] if policies else None
    with reporting("credit eval", enabled=not as_json) as on_progress:
        valued = evaluate_credits(db, credit, config, tasks=tasks, policies=chosen, limit=limit,
                                  task_limit=task_limit, pairs_from=run_id, pair_turns=pair_turns,
                                  on_progress=on_progress)
    if values_out is not None:
        from colbench.training.credit.evaluate import save_values

        save_values(values_out, valued)
    results = [v.figures() for v in valued]
    if as_json:
        print_json([r.as_dict() for r in results])
        return
    console.print(figures_table(results, f"turn credit on {results[0].dialogues} dialogues of {tasks}"))


def figures_table(results, title: str) -> Table:
    """`credit eval`'s table (the study report prints the same)."""
    table = Table("credit", "reads c", "turn AUC", "question AUC", "answers", "pairs", "question pairs", "s/turn",
                  "s/dialogue turn", "cost per turn", title=f"{title} (95% intervals over tasks)")
    for r in results:
        # A dialogue's turn is what an online step values; a candidate can cost more (infogain generates first).
        online = "n/a" if r.seconds_per_dialogue_turn is None else f"{r.seconds_per_dialogue_turn:.3f}"
        table.add_row(r.credit, "yes" if r.training_info else "no", r.turn_auc.shown(), r.question_auc.shown(),
                      r.answer_accuracy.shown(), r.pair_accuracy.shown(), r.question_pair_accuracy.shown(),
                      f"{r.seconds_per_turn:.3f}", online, r.cost)
    return table


@app.command("sample")
@flags_from(CandidatesConfig)
def sample(
    config: CandidatesConfig,
    tasks: str = typer.Option("backend-lite:val", "--tasks", help="Whose graded dialogues, as rollout's --tasks."),
    policies: str = typer.Option(None, "--policies", help="Only dialogues of these policies (comma-separated, a"
                                 " trailing * matches a prefix)."),
    limit: int = typer.Option(None, "--limit", min=1, help="Only the newest N dialogues."),
    name: str = typer.Option(None, "--name", help="Name the candidates run (then --pairs-from NAME)."),
    as_json: bool = typer.Option(False, "--json", help="Print the run's figures as JSON."),
) -> None:
    """Same-state candidates for `credit eval --pairs-from`: K turns sampled at every agent turn's stored prompt of
    the chosen graded backend-lite dialogues, from the policy that made each, each given its ground truth. The same
    command again is the same run: finished, nothing is sampled; stopped, it goes on."""
    from colbench.training.credit.candidates import sample_candidates

    chosen = [p.strip() for p in policies.split(",") if p.strip()] if policies else None
    with reporting("credit sample", enabled=not as_json) as on_progress:
        result = sample_candidates(state.db(), config, tasks=tasks, policies=chosen, limit=limit, name=name,
                                   on_progress=on_progress)
    if as_json:
        print_json(result.as_dict())
        return
    console.print(f"train:{result.run_id}: {result.states} states of {result.dialogues} dialogues ({result.sampled}"
                  f" sampled now), {result.pairs} pairs whose truth differs ({result.question_pairs} between"
                  f" questions, {result.answer_pairs} between answers); score them with `colbench credit eval"
                  f" --pairs-from train:{result.run_id}`")


@app.command("export")
def export(
    run: str = typer.Argument(..., help="The candidates run (train:<id> or its name, as --pairs-from takes it)."),
    out: Path = typer.Option(..., "--out", help="The JSONL file to write (whole, or not at all)."),
    as_json: bool = typer.Option(False, "--json", help="Print the count as JSON."),
) -> None:
    """Write a candidates run's candidates to a file, each naming its state by its dialogue's content and the agent
    turn's number (no store's ids), so that `colbench credit import` restores the run in another store holding the
    same dialogues (`colbench export --ids` and `trajectories import --keep-ids` carry those)."""
    from colbench.runs import resolve
    from colbench.training.credit.candidate_files import save_candidates

    db = state.db()
    with db.read() as session:
        found = resolve(session, run)
    if found.kind != "train":
        fail(f"{run}: give a candidates run (train:<id> or its name), not a {found.kind}")
    count = save_candidates(db, found.id, out)
    if as_json:
        print_json({"path": str(out), "candidates": count})
        return
    console.print(f"{out}: {count} candidates of train:{found.id}")


@app.command("import")
def import_candidates(
    file: Path = typer.Argument(..., help="A file `colbench credit export` wrote."),
    as_json: bool = typer.Option(False, "--json", help="Print the run's figures as JSON."),
) -> None:
    """Restore a candidates run from its file onto the stored dialogues it was sampled in (import them first): the
    same candidates at the same agent turns, under the run's name, so `credit eval --pairs-from` scores the same pairs.
    A state no stored dialogue has is an error, and nothing is written; the same file again finds the run restored."""
    from colbench.training.credit.candidate_files import restore_candidates

    result = restore_candidates(state.db(), file)
    if as_json:
        print_json(result.as_dict())
        return
    console.print(f"train:{result.run_id}: {result.states} states of {result.dialogues} dialogues, {result.pairs}"
                  f" pairs whose truth differs ({result.question_pairs} between questions, {result.answer_pairs}"
                  " between answers)")
