"""`colbench tasks`: import the official format, list, validate and generate tasks."""
from __future__ import annotations

from enum import Enum
from pathlib import Path

import typer

from colbench.cli.views.tasks import (
    generation_table, task_summary, tasks_table, validation_failures, validation_footer, validation_table
)
from colbench.families import family as family_named
from colbench.cli.common import (
    DEFAULT_FAMILY_CHOICE,
    FAMILY_HELP,
    Family,
    Split,
    console,
    count_lines,
    fail,
    print_import,
    print_json,
    reporting,
    state
)
from colbench.grading.sandboxes import AUTO as AUTO_SANDBOX, CHOICES as SANDBOX_CHOICES, sandbox_help

app = typer.Typer(help="Tasks: import the official format, list what is stored, validate, generate.",
                  no_args_is_help=True)


@app.command("import")
def tasks_import(
    file: Path = typer.Argument(..., help="Official task JSONL: one task a line."),
    family: Family = typer.Option(..., "--family", help=f"Which task family the file holds ({FAMILY_HELP})."),
    split: Split = typer.Option(..., "--split", help="Which split the tasks belong to."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable summary."),
) -> None:
    """Import tasks. All or nothing: one bad line imports nothing from the file."""
    from colbench.official import import_tasks

    db = state.db()
    with reporting(f"importing {file.name}", count_lines(file), enabled=not as_json) as on_progress:
        summary = import_tasks(db, file, family=family.value, split=split.value, progress=on_progress)
    print_import(summary, as_json, "tasks")


@app.command("ls")
def tasks_ls(
    family: Family = typer.Option(None, "--family", help=f"Only this task family ({FAMILY_HELP})."),
    split: Split = typer.Option(None, "--split"),
    limit: int = typer.Option(50, "--limit", min=1, help="At most this many rows."),
    show_all: bool = typer.Option(False, "--all", help="Every row (no --limit)."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """List stored tasks, the families' built-in ones among them (stored here if missing, as a rollout would)."""
    from colbench.families.builtin import ensure_builtin_tasks
    from colbench.store import queries

    ensure_builtin_tasks(state.db(), family and family.value)  # every family's, when none is named
    with state.db().read() as session:
        tasks = queries.tasks_in(session, family=family and family.value, split=split and split.value)
    total = len(tasks)
    shown = tasks if show_all else tasks[:limit]
    if as_json:
        print_json([task_summary(t) for t in shown])
        return
    console.print(tasks_table(shown, total, width=console.width))


# --sandbox's choices, from the sandbox registry (an Enum: how Typer offers choices).
SandboxChoice = Enum("SandboxChoice", {name: name for name in SANDBOX_CHOICES}, type=str)


@app.command("validate")
def tasks_validate(
    file: Path = typer.Argument(None, help="Task JSONL to check (official format; naive_solution optional)."),
    builtin: bool = typer.Option(False, "--builtin", help="Check the built-in task sets instead of a file."),
    lite: bool = typer.Option(
        False, "--lite", help="Check the backend-lite tier (colbench/tasks/lite) instead of a file."
    ),
    family: Family = typer.Option(
        DEFAULT_FAMILY_CHOICE, "--family", help=f"Task family of the file or built-in set ({FAMILY_HELP})."
    ),
    sandbox: SandboxChoice = typer.Option(
        SandboxChoice(AUTO_SANDBOX), "--sandbox", help="Where references run. " + sandbox_help()
    ),
    tests: int = typer.Option(
        None,
        "--tests",
        min=1,
        help="Require exactly N tests, test1..testN. Default: 10 with --builtin, at least 1 for a file."
    ),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable report."),
) -> None:
    """Check tasks: well-formed, deterministic, fit the protocol, need clarification, no duplicates.

    References and naive solutions run in the sandbox. Each failure names the task
    (file:line and function) and the rule; exits 1 if any task fails.
    """
    from colbench.authoring.validate import validate_file, validate_tasks

    if (builtin or lite) == (file is not None) or (builtin and lite):
        raise typer.BadParameter("give one of a task FILE, --builtin or --lite")
    if builtin or lite:
        if lite:
            from colbench.tasks.lite import lite_tasks, template_of

            specs = lite_tasks()
            where = [f"lite:{template_of(spec)}#{i}" for i, spec in enumerate(specs)]
            what = "backend-lite tasks"
        else:
            from colbench.families.builtin import load_builtin

            loaded = load_builtin(family.value)
            if not loaded:
                fail(f"no built-in {family.value} tasks")
            specs, where, what = (
                [task.spec for task in loaded],
                [task.where for task in loaded],
                f"built-in {family.value} tasks"
            )
        with reporting(f"validating {what}", len(specs), enabled=not as_json) as on_progress:
            report = validate_tasks(
                specs,
                where=where,
                sandbox=sandbox.value,
                exact_tests=tests or 10,
                require_naive=True,
                progress=on_progress,
            )
    else:
        with reporting(f"validating {file.name}", count_lines(file), enabled=not as_json) as on_progress:
            report = validate_file(file, family=family.value, sandbox=sandbox.value, exact_tests=tests,
                                   progress=on_progress)
    if as_json:
        print_json(report.to_json())
    else:
        for line in validation_failures(report):
            console.print(line, soft_wrap=True, highlight=False)
        console.print(validation_table(report))
        console.print(validation_footer(report), highlight=False)
    if not report.ok:
        raise typer.Exit(1)


@app.command("generate")
def tasks_generate(
    sources: list[Path] = typer.Option(
        ...,
        "--source",
        help=(
            "Web text: a plain text file (split into passages at blank lines) or JSONL with a 'text' field. Repeat for"
            " more files."
        )
    ),
    endpoint: str = typer.Option(
        None,
        "--endpoint",
        help="URL#MODEL of an OpenAI-compatible server (the API key comes from $COLBENCH_API_KEY or $OPENAI_API_KEY)."
    ),
    model: str = typer.Option(None, "--model", help="A local model instead: path, hub id, or ckpt:ID."),
    engine_kind: str = typer.Option(
        "auto",
        "--engine",
        help="Engine for --model, as in `colbench rollout --engine` (`colbench rollout --help` lists them)."
    ),
    family: Family = typer.Option(
        DEFAULT_FAMILY_CHOICE, "--family", help="Task family: one graded by tests (backend), for now."
    ),
    split: Split = typer.Option(Split.train, "--split", help="Split the new tasks go into."),
    n: int = typer.Option(None, "--n", min=1, help="Stop once N tasks are accepted. Default: one try per passage."),
    sandbox: SandboxChoice = typer.Option(
        SandboxChoice(AUTO_SANDBOX), "--sandbox", help="Where candidates run. " + sandbox_help()
    ),
    temperature: float = typer.Option(0.7, "--temperature"),
    max_tokens: int = typer.Option(2048, "--max-new-tokens", min=1, help="Most new tokens per candidate."),
    old_max_tokens: int = typer.Option(None, "--max-tokens", hidden=True, min=1),
    batch_size: int = typer.Option(8, "--batch-size", min=1, help="Passages sent to the model at once."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable summary."),
) -> None:
    """Write new tasks from web text with an LLM; keep only those that pass `tasks validate`.

    Accepted tasks are stored together at the end (source generated:<model>, with the
    passage's file and index); if the model fails midway, nothing is stored.
    """
    from colbench.engines import make_engine
    from colbench.authoring.generate import generate_tasks, parse_endpoint, read_passages

    max_tokens = old_max_tokens or max_tokens  # --max-tokens: the name this flag had before it matched rollout's

    if (endpoint is None) == (model is None):
        raise typer.BadParameter("give --endpoint URL#MODEL or --model REF")
    if family_named(family.value).task_writer() is None:
        fail(f"tasks generate cannot write {family.value} tasks: the family gives no prompt for it")
    passages = read_passages(sources)
    if not passages:
        fail("no passages in the source files")
    db = state.db()
    if endpoint is not None:
        url, name = parse_endpoint(endpoint)
        engine = make_engine("openai", name, base_url=url, logprobs=False)
    else:
        from colbench.wiring import build_engine

        name = model
        engine = build_engine(db, engine_kind, model, max_batch_size=batch_size)
    total = n or len(passages)
    with engine, reporting("generating tasks", total, enabled=not as_json) as on_progress:
        summary = generate_tasks(
            db,
            engine,
            passages,
            model_name=name,
            family=family.value,
            split=split.value,
            n=n,
            sandbox=sandbox.value,
            batch_size=batch_size,
            temperature=temperature,
            max_new_tokens=max_tokens,
            progress=on_progress,
        )
    if as_json:
        print_json(summary.to_json())
        return
    if summary.rejected:
        console.print(generation_table(summary))
    console.print(
        f"{summary.accepted} of {summary.candidates} candidates accepted from {summary.passages} passages; "
        f"{summary.stored} new tasks stored as {summary.source} ({split.value})",
        highlight=False,
    )
