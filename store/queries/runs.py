"""Runs: training runs (with their checkpoints, steps and the lineage they record on finishing) and rollout runs, by
name and tag."""
from __future__ import annotations

from collections import defaultdict
from typing import Iterable, Sequence

from sqlalchemy import case, func, insert, true
from sqlmodel import col, select, Session

from colbench.store.models import (Checkpoint, Lineage, RolloutRun, TrainingRun, TrainingStep, Trajectory, as_utc,
                                   utcnow)
from colbench.store.queries._shared import ROWS_PER_STATEMENT, insert_new


def record_lineage(session: Session, run_id: int, items: Iterable[tuple[int, int | None]]) -> int:
    """Record (trajectory_id, turn_id or None) pairs as consumed by a run."""
    rows = [{"run_id": run_id, "trajectory_id": t, "turn_id": u} for t, u in items]
    for start in range(0, len(rows), ROWS_PER_STATEMENT * 4):
        session.connection().execute(insert(Lineage.__table__), rows[start : start + ROWS_PER_STATEMENT * 4])
    return len(rows)


def start_run(session: Session, *, kind: str, base_model: str, parent_checkpoint_id: int | None, config: dict,
              worker: str | None = None,
              name: str | None = None, tags: Sequence[str] = ()) -> int:
    if name is not None and (holder := name_holder(session, name)) is not None:
        raise ValueError(f"the name {name!r} is taken by {holder}")
    run = TrainingRun(kind=kind, base_model=base_model, parent_checkpoint_id=parent_checkpoint_id, config=config,
                      status="running",
                      worker=worker, heartbeat_at=utcnow(), name=name, tags=list(dict.fromkeys(tags)))
    session.add(run)
    session.flush()
    return run.id


def beat_run(session: Session, run_id: int) -> None:
    session.connection().execute(
        TrainingRun.__table__.update().where(TrainingRun.__table__.c.id == run_id).values(heartbeat_at=utcnow())
    )


def fail_stale_runs(session: Session, is_gone) -> list[int]:
    """Mark failed the running training runs whose process is gone (``is_gone(run)``):
    a kill -9 or a lost machine leaves no other trace. Returns their ids."""
    stale = [run for run in session.exec(select(TrainingRun).where(TrainingRun.status == "running")) if is_gone(run)]
    for run in stale:
        run.status, run.finished_at = "failed", utcnow()
        run.error = (
            f"its process ({run.worker or 'unknown'}) stopped without finishing it (killed, or its machine lost)"
        )
        session.add(run)
    return [run.id for run in stale]


def finish_run(
    session: Session, run_id: int, *, kind: str, base_model: str, path: str, adapter: bool, sha256: str | None,
    metrics: dict, watermark: int | None, lineage: Iterable[tuple[int, int | None]],
) -> int:
    """The run is done: its checkpoint, metrics, data watermark and lineage, in one transaction. Returns the checkpoint
    id."""
    checkpoint = Checkpoint(
        run_id=run_id, kind=kind, base_model=base_model, path=path, adapter=adapter,
        step=int(metrics.get("steps", 0)), sha256=sha256, metrics=metrics,
    )
    session.add(checkpoint)
    run = session.get(TrainingRun, run_id)
    run.status, run.metrics, run.finished_at, run.data_watermark = "done", metrics, utcnow(), watermark
    session.add(run)
    # A run extended (more steps) records its lineage again, whole: the rows of its first finish go.
    session.connection().execute(Lineage.__table__.delete().where(Lineage.__table__.c.run_id == run_id))
    record_lineage(session, run_id, lineage)
    session.flush()
    return checkpoint.id


def run_metrics(session: Session, run_id: int) -> dict:
    run = session.get(TrainingRun, run_id)
    return dict(run.metrics or {}) if run is not None else {}


def add_run_metrics(session: Session, run_id: int, extra: dict) -> None:
    """Figures measured after a run finished (a critic's evaluation), added to its metrics."""
    run = session.get(TrainingRun, run_id)
    run.metrics = dict(run.metrics or {}) | extra  # a new dict: the JSON column sees the change
    session.add(run)


def end_run(session: Session, run_id: int, metrics: dict) -> None:
    """A run that makes no checkpoint (a candidates run) is done, with its metrics."""
    run = session.get(TrainingRun, run_id)
    run.status, run.metrics, run.finished_at, run.error = "done", metrics, utcnow(), None
    session.add(run)


def fail_run(session: Session, run_id: int, reason: str) -> None:
    run = session.get(TrainingRun, run_id)
    if run is not None:
        run.status, run.error, run.finished_at = "failed", reason, utcnow()
        session.add(run)


def checkpoint_and_run(session: Session, checkpoint_id: int) -> tuple[Checkpoint, TrainingRun] | None:
    row = session.get(Checkpoint, checkpoint_id)
    run = session.get(TrainingRun, row.run_id) if row else None
    return (row, run) if row and run else None


def checkpoints_with_runs(session: Session) -> list[tuple[Checkpoint, TrainingRun]]:
    query = select(Checkpoint, TrainingRun).join(TrainingRun,
                                                 TrainingRun.id == Checkpoint.run_id).order_by(Checkpoint.id)
    return [tuple(row) for row in session.exec(query)]


def same_run(
    session: Session, kind: str, settings: dict, *, base_model: str | None = None, started_from: str | None = None,
    ignored: Iterable[str] = (), defaults: dict | None = None,
) -> tuple[Checkpoint, TrainingRun] | None:
    """The newest finished run of ``kind`` (with its checkpoint) whose recorded config agrees with
    ``settings`` on every key not in ``ignored``, of ``base_model`` when one is named, and
    ``started_from`` a model when one is named (see run_started_from).

    The one rule for "the same run" (continuing the latest critic, a study's resumable
    stages): a run is the same when it was made with the same settings. A setting that a run
    made by an older colbench did not record counts as its value in ``defaults``: a new setting's
    default is what colbench did before it existed, so a study resumed after an upgrade keeps
    its trained stages.
    """
    skip = set(ignored)
    defaults = defaults or {}
    query = (
        select(Checkpoint, TrainingRun)
        .join(TrainingRun, TrainingRun.id == Checkpoint.run_id)
        .where(TrainingRun.kind == kind, TrainingRun.status == "done")
        .order_by(col(Checkpoint.id).desc())
    )
    for checkpoint, run in session.exec(query):
        if base_model is not None and checkpoint.base_model != base_model:
            continue
        if started_from is not None and run_started_from(run, checkpoint) != started_from:
            continue
        config = run.config or {}
        if all(config.get(key, defaults.get(key)) == value for key, value in settings.items()
               if key not in skip):
            return checkpoint, run
    return None


def run_started_from(run: TrainingRun, checkpoint: Checkpoint) -> str:
    """The model a run's training began with: the checkpoint it continued (a LoRA policy trained
    from an adapter continues it, and its own base model is the adapter's), else its base model."""
    return f"ckpt:{run.parent_checkpoint_id}" if run.parent_checkpoint_id is not None else checkpoint.base_model


def open_rollout_run(session: Session, *, policy: str, simulator: str, setting: str, tasks: str, config: dict,
                     name: str | None = None, tags: Sequence[str] = ()) -> RolloutRun:
    """The rollout run of (policy, simulator, setting, task set), made on first use; a rerun
    continues it, takes its latest config, adds its tags and, when given, its name."""
    identity = {"policy": policy, "simulator": simulator, "setting": setting, "tasks": tasks}
    same = [getattr(RolloutRun, k) == v for k, v in identity.items()]
    run = session.exec(select(RolloutRun).where(*same)).first()
    if (
        run is None
    ):  # insert_new: another worker may be making it at this moment (PostgreSQL spends an id on a conflict)
        insert_new(session, RolloutRun.__table__, [identity | {"tags": [], "config": {}, "created_at": utcnow()}])
        run = session.exec(select(RolloutRun).where(*same)).one()
    if name and run.name != name:
        holder = name_holder(session, name)
        if holder is not None:
            raise ValueError(f"the name {name!r} is taken by {holder}")
        run.name = name
    run.tags = list(dict.fromkeys([*(run.tags or []), *tags]))
    run.config, run.updated_at = config, utcnow()
    session.add(run)
    session.flush()
    return run


def name_holder(session: Session, name: str) -> str | None:
    """The reference (rollout:<id> or train:<id>) of the run called ``name``, if any."""
    rollout = session.exec(select(RolloutRun.id).where(RolloutRun.name == name)).first()
    if rollout is not None:
        return f"rollout:{rollout}"
    run = session.exec(select(TrainingRun.id).where(TrainingRun.name == name)).first()
    return None if run is None else f"train:{run}"


def rollout_runs(session: Session, *, tag: str | None = None,
                 run_id: int | None = None) -> list[tuple[RolloutRun, dict]]:
    """Rollout runs (every one, or one) with their trajectories' figures: counts by status, graded, successes, reward
    sum."""
    figures: dict[int, dict] = defaultdict(
        lambda: {"pending": 0, "running": 0, "done": 0, "failed": 0, "graded": 0, "successes": 0, "reward_sum": 0.0}
    )
    query = select(
        Trajectory.rollout_id, Trajectory.status, func.count(), func.count(Trajectory.graded_seq),
        func.sum(case((Trajectory.success == true(), 1), else_=0)), func.sum(Trajectory.reward),
    ).group_by(Trajectory.rollout_id, Trajectory.status)
    if run_id is not None:
        query = query.where(Trajectory.rollout_id == run_id)
    for rollout_id, status, count, graded, successes, reward_sum in session.exec(query):
        row = figures[rollout_id]
        row[status] = row.get(status, 0) + count
        row["graded"] += graded
        row["successes"] += successes or 0
        row["reward_sum"] += reward_sum or 0.0
    runs = session.exec(
        select(RolloutRun).where(true() if run_id is None else RolloutRun.id == run_id).order_by(RolloutRun.id)
    ).all()
    return [(run, dict(figures[run.id])) for run in runs if tag is None or tag in (run.tags or [])]


def rollout_run_names(session: Session) -> dict[int, str | None]:
    return dict(session.exec(select(RolloutRun.id, RolloutRun.name)).all())


def training_runs(session: Session, *, tag: str | None = None,
                  run_id: int | None = None) -> list[tuple[TrainingRun, list[Checkpoint]]]:
    """Training runs (every one, or one) with their checkpoints."""
    checkpoints: dict[int, list[Checkpoint]] = defaultdict(list)
    chosen = true() if run_id is None else Checkpoint.run_id == run_id
    for checkpoint in session.exec(select(Checkpoint).where(chosen).order_by(Checkpoint.id)):
        checkpoints[checkpoint.run_id].append(checkpoint)
    runs = session.exec(
        select(TrainingRun).where(true() if run_id is None else TrainingRun.id == run_id).order_by(TrainingRun.id)
    ).all()
    return [(run, checkpoints[run.id]) for run in runs if tag is None or tag in (run.tags or [])]


def training_steps(session: Session, run_id: int) -> list[TrainingStep]:
    return list(session.exec(select(TrainingStep).where(TrainingStep.run_id == run_id).order_by(TrainingStep.step)))


def add_training_steps(session: Session, run_id: int, rows: Sequence[tuple[int, int, dict]]) -> None:
    """(step, epoch, values) rows of a run; a step already stored (a resumed write) is kept."""
    insert_new(session, TrainingStep.__table__,
               [{"run_id": run_id, "step": s, "epoch": e, "values": v, "created_at": utcnow()} for s, e, v in rows])


def find_rollout_run(session: Session, *, policy: str, simulator: str, setting: str, tasks: str) -> RolloutRun | None:
    """The rollout run of (policy, simulator, setting, task set), if one was made: what a rollout
    with them continues (open_rollout_run makes it otherwise)."""
    identity = {"policy": policy, "simulator": simulator, "setting": setting, "tasks": tasks}
    return session.exec(select(RolloutRun).where(*(getattr(RolloutRun, k) == v for k, v in identity.items()))).first()


def add_checkpoint(session: Session, run_id: int, *, kind: str, base_model: str, path: str, adapter: bool, step: int,
                   metrics: dict) -> int:
    """A checkpoint a run writes before it finishes (an online run's every few steps). Returns its id."""
    checkpoint = Checkpoint(run_id=run_id, kind=kind, base_model=base_model, path=path, adapter=adapter, step=step,
                            metrics=metrics)
    session.add(checkpoint)
    session.flush()
    return checkpoint.id


def run_checkpoints(session: Session, run_id: int) -> list[Checkpoint]:
    """A run's checkpoints, by step."""
    query = select(Checkpoint).where(Checkpoint.run_id == run_id).order_by(Checkpoint.step, Checkpoint.id)
    return list(session.exec(query))


def unfinished_run(session: Session, kind: str, config: dict, *, name: str | None = None,
                   status: str = "failed") -> TrainingRun | None:
    """The newest failed run of ``kind`` made with exactly ``config`` (and ``name``, when one is given): what a rerun
    of the same command continues (a run whose process is gone is failed first: fail_stale_runs). ``status`` "done":
    the newest finished one instead (a run that makes no checkpoint, asked again, is that run)."""
    query = select(TrainingRun).where(TrainingRun.kind == kind, TrainingRun.status == status)
    if name is not None:
        query = query.where(TrainingRun.name == name)
    for run in session.exec(query.order_by(col(TrainingRun.id).desc())):
        if (run.config or {}) == config:
            return run
    return None


def extendable_runs(session: Session, kind: str, *, name: str | None) -> list[TrainingRun]:
    """Finished or failed runs of ``kind``, newest first, that a rerun with more steps may extend: the run called
    ``name``, or (no name) the unnamed ones."""
    query = select(TrainingRun).where(TrainingRun.kind == kind, col(TrainingRun.status).in_(("done", "failed")))
    query = query.where(TrainingRun.name == name if name is not None else col(TrainingRun.name).is_(None))
    return list(session.exec(query.order_by(col(TrainingRun.id).desc())))


def reopen_run(session: Session, run_id: int, worker: str | None, config: dict | None = None) -> None:
    """A failed or finished run runs again, under this process (with ``config``: a run extended)."""
    run = session.get(TrainingRun, run_id)
    now = utcnow()
    # It stopped when it finished, or (failed: its worker died, or was found dead later) at its last heartbeat.
    stopped = run.finished_at if run.status == "done" else run.heartbeat_at or run.finished_at
    if stopped is not None:
        run.paused_s = (run.paused_s or 0.0) + max(0.0, (now - as_utc(stopped)).total_seconds())
    run.status, run.error, run.finished_at, run.worker, run.heartbeat_at = "running", None, None, worker, now
    if config is not None:
        run.config = config
    session.add(run)


def newest_checkpoint_of(session: Session, kind: str) -> int | None:
    """The id of the newest checkpoint of a run of ``kind`` ("critic", "policy:sweet", ...), if any."""
    return session.exec(select(Checkpoint.id).join(TrainingRun, col(TrainingRun.id) == Checkpoint.run_id)
                        .where(TrainingRun.kind == kind).order_by(col(Checkpoint.id).desc())).first()
