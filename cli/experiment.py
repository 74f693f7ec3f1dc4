"""`colbench experiment backend`: the whole SWEET-RL study on one model, and its table; `--dry-run`
prints the study's plan (colbench.experiment.plan) and its deviations without running anything.
The paper's runs are config files of this command's settings: configs/paper/."""
from __future__ import annotations

import json
import time
from dataclasses import asdict, replace
from pathlib import Path

import typer
from rich.text import Text
from colbench.cli.views.experiment import study_markdown, study_notes, study_tables
from colbench.cli.common import console, err_console, fail, print_json, reporting, state
from colbench.cli.options import flags_from
from colbench.experiment_config import CRITIC_SET, POLICY_SET, ExperimentConfig, study_critic, study_policy
from colbench.recipe import deviations
from colbench.training.config import CriticConfig, PolicyConfig

app = typer.Typer(help="Whole studies: rollouts, critics, policies and evaluation in one resumable command.",
                  no_args_is_help=True)


class _RichReporter:
    def __init__(self, quiet: bool):
        self.quiet = quiet

    def stage(self, text: str) -> None:
        if not self.quiet:
            err_console.print(Text(text, style="bold"), highlight=False)

    def progress(self, description: str):
        return reporting(description, enabled=not self.quiet)


@app.command("backend")
@flags_from(PolicyConfig, into="policy", prefix="policy-", exclude=POLICY_SET, defaults=study_policy())
@flags_from(CriticConfig, into="critic", prefix="critic-", exclude=CRITIC_SET, defaults=study_critic())
@flags_from(ExperimentConfig, into="study", exclude={"critic", "policy"})
def backend(
    study: ExperimentConfig,
    critic: CriticConfig,
    policy: PolicyConfig,
    folder: Path = typer.Option(None, "--dir", help=(
        "Where the study keeps its store (unless --db is given), checkpoints and results.md/json. Default:"
        " experiments/backend-<model>."
    )),
    as_json: bool = typer.Option(False, "--json", help="Print the results as JSON."),
    dry_run: bool = typer.Option(False, "--dry-run", help=(
        "Print the stages the study would run and where its settings depart from the official run, then exit:"
        " nothing is rolled out, trained or written, and no store or model is opened. Exits 1 when the study"
        " could not run (a task set it only plans)."
    )),
) -> None:
    """Zero-shot rollouts on train (k per task) → critic (and its ablation) → rft, mtdpo and
    SWEET-RL policies → every policy on the test tasks → a paper-style table.

    Every stage is stored; rerunning the same command skips what is done and goes on where
    it stopped. Sizes default to a CPU-sized study; the paper's scale is thousands of tasks.
    The study's settings are ExperimentConfig's (colbench/experiment_config.py); --critic-* and
    --policy-* are the trainers' own (colbench/training/config.py).
    """
    from colbench.experiment import BackendExperiment, recipe_view
    from colbench.store.db import Database

    model = study.model
    folder = (folder or Path("experiments") / f"backend-{_slug(model)}").resolve()
    config = replace(study, critic=critic, policy=policy,
                     tags=list(dict.fromkeys([*study.tags, f"study:{folder.name}"])))
    if dry_run:
        _print_plan(config, folder, as_json)
    if config.unsupported:
        fail(f"--tasks {config.tasks}: {config.unsupported}")
    folder.mkdir(parents=True, exist_ok=True)
    db = state.db() if state.db_url else Database(f"sqlite:///{folder / 'colbench.db'}", artifacts=state.artifacts)
    started = time.perf_counter()
    result = BackendExperiment(db, config, _RichReporter(quiet=as_json), folder=folder).run()
    payload = result.as_dict() | {"store": db.url, "elapsed_s": round(time.perf_counter() - started, 1)}
    (folder / "results.json").write_text(json.dumps(payload, indent=2, default=str) + "\n")
    (folder / "results.md").write_text(study_markdown(payload) + "\n")
    if as_json:
        print_json(payload)
        return
    for table in study_tables(payload):
        console.print(table)
    for line in study_notes(payload):
        console.print(line, highlight=False)
    console.print(Text("deviations from the official run's recipe:", style="bold"))
    for line in deviations(recipe_view(config)):
        console.print(f"- {line}", highlight=False)
    console.print(f"results: {folder / 'results.md'}; store: {db.url} (colbench --db {db.url} inspect <id>)",
                  highlight=False)


def _print_plan(config, folder: Path, as_json: bool) -> None:
    """The dry run: the study's stages and deviations, as the real run would enter and print them."""
    from colbench.experiment import plan, recipe_view

    stages, departures = plan(config), deviations(recipe_view(config))
    store = state.db_url or f"sqlite:///{folder / 'colbench.db'}"
    if as_json:
        print_json({"stages": [asdict(stage) for stage in stages], "deviations": departures,
                    "unsupported": config.unsupported, "folder": str(folder), "store": store,
                    "config": asdict(config)})
    else:
        console.print(Text(f"dry run: the stages of this study (folder {folder}; store {store})", style="bold"),
                      highlight=False)
        for number, stage in enumerate(stages, 1):
            console.print(f"{number}/{len(stages)} {stage.title}", highlight=False)
            for line in stage.details:
                console.print(f"    {line}", highlight=False)
        console.print(Text("deviations from the official run's recipe:", style="bold"))
        for line in departures:
            console.print(f"- {line}", highlight=False)
    if config.unsupported:
        fail(f"--tasks {config.tasks} cannot run: {config.unsupported}")
    raise typer.Exit(0)


def _slug(model: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in Path(model).name or model).strip("-") or "model"
