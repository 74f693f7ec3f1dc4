"""Builds what a rollout needs from command-line references: tasks, engine, simulator, grader."""
from __future__ import annotations

from colbench.store import queries
from colbench.store.db import Database
from colbench.store.models import Checkpoint, Task
from colbench.tasks.spec import FAMILIES, SPLITS


def parse_task_selector(selector: str) -> tuple[str, str]:
    family, _, split = selector.partition(":")
    if family not in FAMILIES or split not in SPLITS:
        raise ValueError(f"--tasks takes FAMILY:SPLIT with FAMILY in {'|'.join(FAMILIES)} and SPLIT in {'|'.join(SPLITS)}; got {selector!r}")
    return family, split


def select_tasks(db: Database, selector: str, limit: int | None) -> list[Task]:
    """Stored tasks of a family and split, first by id; the built-in set is added if missing."""
    family, split = parse_task_selector(selector)
    from colbench.tasks.builtin import ensure_builtin_tasks

    ensure_builtin_tasks(db, family)
    with db.read() as session:
        tasks = queries.tasks_in(session, family=family, split=split)
    if not tasks:
        raise ValueError(f"no {family} tasks in the {split} split; import some with `colbench tasks import`")
    return tasks[:limit] if limit else tasks


def checkpoint_lookup(db: Database):
    """ckpt:<id> → (base model, adapter folder, merged folder), for colbench.model_refs.resolve_model."""

    def lookup(checkpoint_id: str):
        with db.read() as session:
            row = session.get(Checkpoint, int(checkpoint_id))
        if row is None:
            return None
        return (row.base_model, row.path, None) if row.adapter else (row.base_model, None, row.path)

    return lookup


def build_engine(db: Database, kind: str, model: str, **options):
    from colbench.engines import make_engine

    if kind in ("hf", "transformers", "vllm"):
        options.setdefault("checkpoint_lookup", checkpoint_lookup(db))
    return make_engine(kind, model, **options)


def build_simulator(db: Database, spec: str, engine_kind: str = "hf", family: str = "backend", **served):
    """``served``: timeout_s, max_retries, concurrency of a simulator behind a server."""
    from colbench.simulators import make_simulator

    return make_simulator(spec, engine_factory=lambda ref: build_engine(db, engine_kind, ref), family=family, **served)


def build_env(
    db: Database, family: str, *, sandbox: str = "auto", workers: int = 2, clip: str | None = None, render_pool: int = 2,
    grading: str = "official",
):
    """The family's environment: the sandboxed grader (backend, under ``grading``) or browser and similarity (frontend).

    Returns (env, close): call close() when done.
    """
    if family == "backend":
        from colbench.envs.backend import BackendEnv
        from colbench.grading.grader import Grader

        grader = Grader(sandbox=sandbox, workers=workers, grading=grading)
        return BackendEnv(grader), grader.close
    from colbench.envs.frontend import FrontendEnv
    from colbench.render.browser import Renderer
    from colbench.render.storage import ScreenshotStore
    from colbench.similarity import make_similarity

    renderer = Renderer(pool_size=render_pool).start()
    env = FrontendEnv(renderer, make_similarity(clip), ScreenshotStore(screenshot_folder(db)))
    return env, renderer.close


def screenshot_folder(db: Database):
    return db.folder / "screenshots"
