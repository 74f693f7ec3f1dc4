"""`colbench experiment backend`: the whole SWEET-RL study on one model, and its table."""
from __future__ import annotations

import json
import time
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import typer
from rich.table import Table

from colbench.cli.common import console, err_console, print_json, progress_bar, state
from colbench.cli.options import flags_from
from colbench.experiment import CRITIC_SET, POLICY_SET, ExperimentConfig, study_critic, study_policy
from colbench.training.config import CriticConfig, PolicyConfig

app = typer.Typer(help="Whole studies: rollouts, critics, policies and evaluation in one resumable command.", no_args_is_help=True)


class _RichReporter:
    def __init__(self, quiet: bool):
        self.quiet = quiet

    def stage(self, text: str) -> None:
        if not self.quiet:
            err_console.print(f"[bold]{text}[/]", highlight=False)

    @contextmanager
    def progress(self, description: str):
        with progress_bar(description, None, enabled=not self.quiet) as advance:
            seen = [0]

            def update(done: int, total: int) -> None:
                if done < seen[0]:  # a trainer moved to its next stage: restart the bar
                    advance(-seen[0], total=total)
                    seen[0] = 0
                advance(done - seen[0], total=total)
                seen[0] = done

            yield update


@app.command("backend")
@flags_from(PolicyConfig, into="policy", prefix="policy-", exclude=POLICY_SET, defaults=study_policy())
@flags_from(CriticConfig, into="critic", prefix="critic-", exclude=CRITIC_SET, defaults=study_critic())
@flags_from(ExperimentConfig, into="study", exclude={"critic", "policy"})
def backend(
    study: ExperimentConfig,
    critic: CriticConfig,
    policy: PolicyConfig,
    folder: Path = typer.Option(None, "--dir", help="Where the study keeps its store (unless --db is given), checkpoints and results.md/json. Default: experiments/backend-<model>."),
    as_json: bool = typer.Option(False, "--json", help="Print the results as JSON."),
) -> None:
    """Zero-shot rollouts on train (k per task) → critic (and its ablation) → rft, mtdpo and
    SWEET-RL policies → every policy on the test tasks → a paper-style table.

    Every stage is stored; rerunning the same command skips what is done and goes on where
    it stopped. Sizes default to a CPU-sized study; the paper's scale is thousands of tasks.
    The study's settings are ExperimentConfig's (colbench/experiment.py); --critic-* and
    --policy-* are the trainers' own (colbench/training/config.py).
    """
    from colbench.experiment import BackendExperiment
    from colbench.store.db import Database

    config = replace(study, critic=critic, policy=policy)
    model = config.model
    folder = (folder or Path("experiments") / f"backend-{_slug(model)}").resolve()
    folder.mkdir(parents=True, exist_ok=True)
    db = state.db() if state.db_url else Database(f"sqlite:///{folder / 'colbench.db'}")
    started = time.perf_counter()
    result = BackendExperiment(db, config, _RichReporter(quiet=as_json)).run()
    payload = result.as_dict() | {"store": db.url, "elapsed_s": round(time.perf_counter() - started, 1)}
    (folder / "results.json").write_text(json.dumps(payload, indent=2, default=str) + "\n")
    (folder / "results.md").write_text(markdown_table(payload) + "\n")
    if as_json:
        print_json(payload)
        return
    console.print(rich_table(payload))
    for line in notes(payload):
        console.print(line, highlight=False)
    console.print(f"results: {folder / 'results.md'}; store: {db.url} (colbench --db {db.url} inspect <id>)", highlight=False)


def _slug(model: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in Path(model).name or model).strip("-") or "model"


def _cells(arm: dict) -> tuple[str, str, str]:
    test = arm["test"]
    if test is None:
        return "–", "–", "0"
    r, s = test["reward"], test["success"]
    return (f"{r['mean']:.1%} [{r['low']:.1%}, {r['high']:.1%}]", f"{s['mean']:.1%} [{s['low']:.1%}, {s['high']:.1%}]", str(test["n_trajectories"]))


def _trained_on(arm: dict) -> str:
    training = arm["training"]
    if "skipped" in training:  # the reason's last clause; notes() and results.json have it whole
        return "not trained: " + training["skipped"].rsplit(": ", 1)[-1]
    m = training.get("metrics", {})
    if arm["arm"] == "zero-shot":
        return "the base model"
    if arm["arm"] == "rft":
        return f"{m.get('trajectories')} successful trajectories, {m.get('steps')} steps ({training['checkpoint']})"
    what = f"{m.get('pairs')} pairs, {m.get('steps')} steps, train reward accuracy {m.get('train_reward_accuracy', float('nan')):.0%}"
    return f"{what} ({training['checkpoint']})"


def _recipe(cfg: dict) -> str:
    """The grading, pair rule and rft threshold, flagged when they leave the paper's backend recipe."""
    grading = cfg.get("grading", "strict")  # results written before the grading was recorded were strict
    text = "grading: official" if grading == "official" else f"grading: {grading} (not the official grader's semantics)"
    policy = cfg.get("policy") or cfg  # results written before the trainers' configs were embedded kept them flat
    pairs = (cfg.get("critic") or cfg).get("pairs") or "correct"
    text += "; pairs: fully correct vs lower (the paper's)" if pairs == "correct" else "; pairs: rewards ≥ 0.1 apart (not the paper's backend rule)"
    threshold = policy.get("rft_threshold")
    return text + ("; rft: fully correct trajectories" if threshold is None else f"; rft: each task's best trajectory with ≥ {threshold:.0%} tests passed (not the paper's)")


def rich_table(payload: dict) -> Table:
    cfg = payload["config"]
    table = Table(title=f"backend:test, {cfg['model']}, first {cfg['test_tasks']} tasks × {cfg['test_samples']}; {_recipe(cfg)}", title_justify="left")
    for name in ("method", "% tests passed (95% CI)", "success (95% CI)", "trajectories", "paper, 8B", "trained on"):
        table.add_column(name, justify="right" if name in ("trajectories", "paper, 8B") else "left", overflow="fold")
    for arm in payload["arms"]:
        paper = arm["paper_8b"]
        table.add_row(arm["title"], *_cells(arm), f"{paper[0]:.1f} / {paper[1]:.1f}", _trained_on(arm))
    return table


def notes(payload: dict) -> list[str]:
    train = payload["train"]
    lines = []
    if train.get("trajectories"):
        lines.append(
            f"zero-shot on train: {train['trajectories']} trajectories over {train['tasks']} tasks, "
            f"{train['tests_passed']:.1%} tests passed, success {train['success']:.1%}, "
            f"{train['tasks_with_a_success']:.0%} of tasks with at least one success"
        )
    for name, critic in payload["critics"].items():
        if "skipped" in critic:
            lines.append(f"critic {name}: skipped: {critic['skipped']}")
            continue
        m = critic["metrics"]
        accuracy = m.get("heldout_accuracy")
        shown = "n/a" if accuracy is None else f"{accuracy:.0%} of {m.get('heldout_pairs')}"
        lines.append(f"critic {name} ({critic['checkpoint']}): {m.get('train_pairs')} training pairs, {m.get('steps')} steps, held-out pair accuracy {shown}")
    for arm in payload["arms"]:
        if "skipped" in arm["training"]:
            lines.append(f"{arm['title']}: not trained: {arm['training']['skipped']}")
    lines.append(f"this run took {payload['elapsed_s'] / 60:.1f} min (stages already in the store are skipped, not timed)")
    lines.append("paper, 8B: Llama-3.1-8B-Instruct's % tests / success in the SWEET-RL paper, for scale; not comparable to a small model.")
    return lines


def markdown_table(payload: dict) -> str:
    cfg = payload["config"]
    out = [
        f"# Backend study: {cfg['model']}",
        "",
        f"Train: first {cfg['train_tasks']} tasks × k={cfg['samples_per_task']}; test: first {cfg['test_tasks']} tasks × "
        f"{cfg['test_samples']}; temperature {cfg['temperature']}, {cfg['max_new_tokens']} tokens per turn, simulator {cfg['simulator']}; "
        f"{_recipe(cfg)}.",
        "",
        "| method | % tests passed (95% CI) | success (95% CI) | trajectories | paper, 8B | trained on |",
        "|---|---|---|---|---|---|",
    ]
    for arm in payload["arms"]:
        paper = arm["paper_8b"]
        out.append(f"| {arm['title']} | " + " | ".join(_cells(arm)) + f" | {paper[0]:.1f} / {paper[1]:.1f} | {_trained_on(arm)} |")
    out += [""] + [f"- {line}" for line in notes(payload)]
    return "\n".join(out)
