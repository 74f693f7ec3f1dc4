"""Builds what a rollout needs from command-line references: tasks, engine, simulator, grader."""
from __future__ import annotations

from colbench.store import queries
from colbench.store.db import Database
from colbench.store.models import Task
from colbench.families import DEFAULT_FAMILY, family as family_named, parse_selector
from colbench.tasks.spec import LITE_SPLITS


def parse_task_selector(selector: str) -> tuple[str, str]:
    """``FAMILY:SPLIT`` -> (family, stored split); the grammar is the families' (colbench.families.parse_selector)."""
    return parse_selector(selector)


def select_tasks(db: Database, selector: str, limit: int | None, offset: int = 0) -> list[Task]:
    """Stored tasks of a family and split by id, from the ``offset``-th, at most ``limit``; the built-in set is added
    if missing."""
    family, split = parse_task_selector(selector)
    from colbench.families.builtin import ensure_builtin_tasks, ensure_lite_tasks

    ensure_lite_tasks(db) if split in LITE_SPLITS.values() else ensure_builtin_tasks(db, family)
    with db.read() as session:
        tasks = queries.tasks_in(session, family=family, split=split)
    if not tasks:
        raise ValueError(f"no {family} tasks in the {split} split ({family_named(family).split_rule()}); import some"
                         " with `colbench tasks import`")
    tasks = tasks[offset:]
    if not tasks:
        raise ValueError(f"--offset {offset} skips every {family} task of the {split} split")
    return tasks[:limit] if limit else tasks


def build_engine(db: Database, kind: str, model: str, *, max_batch_size: int | None = None,
                 compute_type: str = "float32", **options):
    """An engine of ``kind`` (one of colbench.engines.ENGINES, or "auto": default_engine decides) for
    ``model``. A local engine's model is resolved here, once, and --engine auto reads the same
    resolved model. ``max_batch_size`` and ``compute_type`` go to the engines that use them."""
    from colbench.engines import AUTO, ENGINES, default_engine, make_engine
    from colbench.model_refs import load_tokenizer, model_source

    served = options.pop("served_model", None)
    if served:  # the server serves ``model``'s weights under another name: its tokenizer makes every turn exact
        from colbench.engines.openai import OpenAIEngine

        source = model_source(db, model)
        return OpenAIEngine(served, tokenizer=load_tokenizer(source), model_ref=source.ref, **options)
    if kind != AUTO and not ENGINES.get(kind).local:  # a served model's name or a scripted policy: nothing to load
        return make_engine(kind, model, **options)
    source = model_source(db, model)
    if kind == AUTO:
        kind = default_engine(source, options.get("device", "auto"))
    if max_batch_size:
        options["max_batch_size"] = max_batch_size
    return make_engine(kind, source, compute_type=compute_type, **options)


def build_simulator(db: Database, spec: str, engine_kind: str = "auto", family: str = DEFAULT_FAMILY,
                    guard: str = "flag", **served):
    """The simulator behind the family's leak guard (colbench.simulators.guard; ``guard`` off, flag, redact or
    resample). ``served``: timeout_s, max_retries, concurrency of a simulator behind a server."""
    from colbench.simulators import make_simulator
    from colbench.simulators.guard import guarded

    owner = family_named(family)
    simulator = make_simulator(spec, engine_factory=lambda ref: build_engine(db, engine_kind, ref),
                               builtin=owner.builtin_simulator, **served)
    return guarded(simulator, owner, guard)


def build_env(
    db: Database, family: str, *, sandbox: str = "auto", workers: int = 2, clip: str | None = None,
    render_pool: int = 2,
    grading: str = "official",
):
    """The family's environment (colbench.families): e.g. the sandboxed grader under ``grading``, or browser and
    similarity.

    Returns (env, close): call close() when done.
    """
    return family_named(family).env(db, sandbox=sandbox, workers=workers, clip=clip, render_pool=render_pool,
                                    grading=grading)


def screenshot_folder(db: Database):
    return db.folder / "screenshots"
