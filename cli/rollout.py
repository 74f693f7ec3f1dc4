"""`colbench rollout` and `colbench grade`."""
from __future__ import annotations

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from colbench.cli.common import console, err_console, print_json, progress_bar, state
from colbench.grading.semantics import DEFAULT_GRADING, GRADING_HELP
from colbench.protocol import NO_RESPONSE


def _sandbox_warning(grader) -> None:
    if grader.backend == "none":
        err_console.print(
            "[bold red]WARNING: --sandbox none: model-written code runs WITHOUT a sandbox "
            "(only resource limits). Use it only for code you trust.[/]"
        )


def rollout(
    model: str = typer.Option("smollm2", "--model", help="Policy: 'smollm2' (embedded), a local folder, a hub id, ckpt:<id>, or a served model name with --engine openai."),
    engine: str = typer.Option("hf", "--engine", help="Generation engine: hf (transformers), vllm, or openai."),
    base_url: str = typer.Option(None, "--base-url", envvar="OPENAI_BASE_URL", help="Server URL for --engine openai."),
    simulator: str = typer.Option("builtin", "--simulator", help="Simulated human: builtin, endpoint:<url>#<model>, or local:<model>."),
    tasks: str = typer.Option("backend:test", "--tasks", help="FAMILY:SPLIT of the tasks to roll out."),
    limit: int = typer.Option(None, "--limit", help="Only the first N tasks of the split."),
    samples_per_task: int = typer.Option(1, "--samples-per-task", "-k", min=1, help="Trajectories per task."),
    seed: int = typer.Option(0, "--seed", help="Base sampling seed."),
    temperature: float = typer.Option(1.0, "--temperature", min=0.0, help="Sampling temperature (the protocol uses 1.0)."),
    max_new_tokens: int = typer.Option(1024, "--max-new-tokens", min=1, help="Tokens per agent turn (the protocol uses 1024)."),
    batch_size: int = typer.Option(16, "--batch-size", min=1, help="Episodes stepped together in one generate call."),
    sandbox: str = typer.Option("auto", "--sandbox", help="Grading sandbox: auto (docker, else bwrap), docker, bwrap, or none (unsafe)."),
    grade_workers: int = typer.Option(2, "--grade-workers", min=1, help="Sandboxed grading workers."),
    grading: str = typer.Option(DEFAULT_GRADING, "--grading", help="Backend grading semantics. " + GRADING_HELP),
    rerank_critic: str = typer.Option(None, "--rerank-critic", help="Best-of-N: a critic checkpoint (ckpt:<id>) that picks the best of --candidates samples at every agent turn."),
    candidates: int = typer.Option(16, "--candidates", min=2, help="Samples per agent turn for --rerank-critic."),
    clip: str = typer.Option(None, "--clip", help="Frontend reward: CLIP ViT-B/32 weights (folder or hub id). Default: the weight-free ssim-edges similarity."),
    device: str = typer.Option("auto", "--device", help="auto, cpu or cuda (hf engine)."),
    as_json: bool = typer.Option(False, "--json", help="Print a machine-readable summary at the end."),
) -> None:
    """Roll out a policy against a simulated human on a task split; grade and store everything.

    With no arguments: the embedded SmolLM2-135M-Instruct, the built-in deterministic simulator,
    the built-in backend test tasks, and the bwrap sandbox. Rerunning the same command finishes
    what is missing and duplicates nothing.
    """
    from colbench.rollout import Rollout, RolloutConfig
    from colbench.wiring import build_engine, build_env, build_simulator, parse_task_selector, select_tasks

    config = RolloutConfig(
        tasks=tasks, limit=limit, samples_per_task=samples_per_task, seed=seed,
        temperature=temperature, max_new_tokens=max_new_tokens, batch_size=batch_size,
        candidates=candidates if rerank_critic else 1, rerank_critic=rerank_critic,
    )
    family, _ = parse_task_selector(tasks)
    if engine == "openai" and not base_url:
        raise ValueError("--engine openai needs --base-url (or $OPENAI_BASE_URL)")
    db = state.db()
    chosen = select_tasks(db, tasks, limit)
    env, close_env = build_env(db, family, sandbox=sandbox, workers=grade_workers, clip=clip, grading=grading)
    try:
        if family == "backend":
            _sandbox_warning(env.grader)
        engine_options = {"base_url": base_url} if engine == "openai" else {"device": device}
        critic = None
        if rerank_critic:
            from colbench.training.scoring import CriticModel

            critic = CriticModel.from_checkpoint(db, rerank_critic, device=device)
        with build_engine(db, engine, model, **engine_options) as policy:
            human = build_simulator(db, simulator, engine, family=family)
            try:
                stats = _run_with_progress(Rollout, db, policy, human, env, config, chosen, quiet=as_json, critic=critic)
            finally:
                human.close()
    finally:
        close_env()
    if as_json:
        where = env.grader.backend if family == "backend" else env.similarity.name
        print_json(stats.as_dict() | {"policy": policy.model_ref, "simulator": human.ref, "graded_by": where})
        return
    rate = "n/a" if stats.success_rate is None else f"{stats.success_rate:.1%}"
    console.print(
        f"{stats.finished} trajectories finished, {stats.already_done} were already done"
        + (f" ({stats.no_replies} simulator replies failed and became {NO_RESPONSE!r})" if stats.no_replies else "") + "; "
        f"{stats.agent_turns} agent turns at {stats.turns_per_s:.2f}/s; success {rate} of {stats.graded} graded"
    )


def _run_with_progress(rollout_class, db, policy, human, env, config, chosen, *, quiet: bool, critic=None):
    if quiet or not err_console.is_terminal:
        return rollout_class(db, policy, human, env, config, critic=critic).run(chosen)
    columns = [
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[turns]:.2f} turns/s"),
        TextColumn("success {task.fields[success]}"),
        TimeElapsedColumn(),
    ]
    with Progress(*columns, console=err_console) as progress:
        bar = progress.add_task("rollouts", total=None, turns=0.0, success="–")

        def update(stats):
            success = "–" if stats.success_rate is None else f"{stats.success_rate:.0%} of {stats.graded}"
            progress.update(bar, total=stats.total, completed=stats.already_done + stats.finished, turns=stats.turns_per_s, success=success)

        job = rollout_class(db, policy, human, env, config, critic=critic, on_progress=update)
        return job.run(chosen)


def grade(
    policy: str = typer.Option(None, "--policy", help="Only this policy's trajectories."),
    ungraded_only: bool = typer.Option(False, "--ungraded", help="Only trajectories with no grade yet."),
    sandbox: str = typer.Option("auto", "--sandbox", help="auto, docker, bwrap, or none (unsafe)."),
    workers: int = typer.Option(2, "--workers", min=1),
    grading: str = typer.Option(DEFAULT_GRADING, "--grading", help="Grading semantics. " + GRADING_HELP),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Re-grade stored backend answers in the sandbox (e.g. after importing official trajectories, or under another --grading)."""
    from colbench.grading.grader import Grader
    from colbench.grading.regrade import regrade

    with Grader(sandbox=sandbox, workers=workers, grading=grading) as grader, progress_bar("grading", None, enabled=not as_json) as advance:
        _sandbox_warning(grader)
        summary = regrade(state.db(), grader, policy=policy, ungraded_only=ungraded_only, on_progress=advance)
    if as_json:
        print_json(summary)
        return
    console.print(f"graded {summary['graded']} trajectories ({grading} grading): mean tests passed {summary['mean_reward']:.3f}, success {summary['success_rate']:.1%}")


def register(app: typer.Typer) -> None:
    app.command("rollout")(rollout)
    app.command("grade")(grade)
