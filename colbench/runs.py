"""Runs as a user names them: rollout runs, training runs and evaluations.

A run's reference is ``rollout:<id>``, ``train:<id>`` or ``eval:<id>``; ``ckpt:<id>``
stands for the training run that made that checkpoint; and a name given with ``--name``
names a rollout or training run. Names are unique across both kinds and never look
like a reference (no ``:``, not only digits), so the two never collide.

A rollout run is one policy, simulator and setting on one task set (a rerun of the same
command continues it); a training run is one fit; an evaluation is one row of `colbench
eval`. Removing a run removes what only it made, and is refused while anything else
still needs it (a checkpoint a rollout used, trajectories a training run consumed).
"""
from __future__ import annotations

import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from colbench.errors import ColbenchError
from colbench.families import family_of_selector

KINDS = ("rollout", "train", "eval")


class RunNotFound(ColbenchError, ValueError):
    pass


def labelled(policy: str, setting: str) -> str:
    """A policy with its rollout setting, the way every table names a rollout: ``ckpt:3 [seed=5]``."""
    return f"{policy} [{setting}]" if setting else policy


def named(ref: str, name: str | None) -> str:
    """A run's reference with its name when it has one: ``rollout:3 (warm)``."""
    return f"{ref} ({name})" if name else ref


def check_run_name(name: str | None) -> None:
    if name is None:
        return
    if not name or name != name.strip() or ":" in name or name.isdigit() or any(c.isspace() or c in "[]" for c in name):
        raise ValueError(f"a run's name takes no ':', spaces or brackets and is not only digits; got {name!r}")


@dataclass(frozen=True)
class RunRef:
    kind: str  # rollout | train | eval
    id: int

    def __str__(self) -> str:
        return f"{self.kind}:{self.id}"


def resolve(session, ref: str) -> RunRef:
    """``rollout:3``, ``train:5``, ``eval:2``, ``ckpt:7`` (its training run) or a run's name."""
    from colbench.store import queries
    from colbench.store.models import Checkpoint, Evaluation, RolloutRun, TrainingRun

    kind, sep, number = ref.partition(":")
    if sep and number.isdigit():
        tables = {"rollout": RolloutRun, "train": TrainingRun, "eval": Evaluation, "ckpt": Checkpoint}
        if kind not in tables:
            raise RunNotFound(
                f"{ref!r} is not a run: give rollout:<id>, train:<id>, eval:<id>, ckpt:<id> or a run's name"
            )
        row = session.get(tables[kind], int(number))
        if row is None:
            raise RunNotFound(f"no {ref} in this store (see `colbench runs ls`)")
        return RunRef("train", row.run_id) if kind == "ckpt" else RunRef(kind, row.id)
    holder = queries.name_holder(session, ref)
    if holder is None:
        raise RunNotFound(f"no run is named {ref!r} (see `colbench runs ls`)")
    kind, _, number = holder.partition(":")
    return RunRef(kind, int(number))


def rollout_id_of(db, ref: str) -> int:
    """The id of the rollout run ``ref`` names (rollout:<id> or a name)."""
    with db.read() as session:
        found = resolve(session, ref)
    if found.kind != "rollout":
        raise RunNotFound(f"{ref} is a {'training run' if found.kind == 'train' else 'evaluation'}, not a rollout run")
    return found.id


# ---------------------------------------------------------------- listing


def rollout_row(run, figures: dict) -> dict:
    total = sum(figures.get(s, 0) for s in ("pending", "running", "done", "failed"))
    graded = figures.get("graded", 0)
    status = "running" if figures.get("running") else "unfinished" if figures.get("pending") else "done"
    return {
        "ref": f"rollout:{run.id}", "kind": "rollout", "name": run.name, "tags": run.tags or [],
        "policy": run.policy, "simulator": run.simulator, "setting": run.setting, "tasks": run.tasks,
        "status": status, "trajectories": total,
        "by_status": {s: figures.get(s, 0) for s in ("done", "failed", "running", "pending")},
        "graded": graded,
        "success_rate": figures["successes"] / graded if graded else None,
        "mean_reward": figures["reward_sum"] / graded if graded else None,
        "created_at": run.created_at, "updated_at": run.updated_at,
    }


def training_row(run, checkpoints) -> dict:
    metrics = run.metrics or {}
    return {
        "ref": f"train:{run.id}", "kind": "train", "name": run.name, "tags": run.tags or [],
        "what": run.kind, "base_model": run.base_model, "status": run.status,
        "checkpoints": [f"ckpt:{c.id}" for c in checkpoints],
        "train_loss": metrics.get("train_loss"),
        "heldout_accuracy": metrics.get("heldout_accuracy"),
        "error": run.error, "created_at": run.started_at, "finished_at": run.finished_at,
        "minutes": run.minutes, "paused_minutes": (run.paused_s or 0.0) / 60,
    }


def evaluation_row(evaluation) -> dict:
    metrics = evaluation.metrics or {}
    success, reward = metrics.get("success"), metrics.get("reward")
    return {
        "ref": f"eval:{evaluation.id}", "kind": "eval", "name": None, "tags": [],
        "policy": evaluation.policy, "simulator": evaluation.simulator, "setting": metrics.get("setting", ""),
        "tasks": f"{evaluation.family}:{evaluation.split}", "n_tasks": evaluation.n_tasks,
        "n_trajectories": evaluation.n_trajectories,
        "success": success.get("mean") if success else None, "reward": reward.get("mean") if reward else None,
        "metric": metrics.get("metric"), "created_at": evaluation.created_at,
    }


def what(row: dict) -> str:
    """What a run ran: a training run's kind and base model, else the policy with its setting."""
    if row["kind"] == "train":
        return f"{row['what']} ← {row['base_model']}"
    return labelled(row["policy"], row.get("setting") or "")


def progress(row: dict) -> str:
    """How far a run got: a rollout's status with its finished share (done 40/40), a training run's status."""
    if row["kind"] == "rollout":
        return f"{row['status']} {row['by_status']['done'] + row['by_status']['failed']}/{row['trajectories']}"
    return row["status"] if row["kind"] == "train" else ""


def headline(row: dict) -> str:
    """The figure that says how a run went, in a few words."""
    if row["kind"] == "rollout":
        if not row["graded"]:
            return ""
        owner = family_of_selector(row["tasks"])
        if owner.headline_metric == "reward":
            return f"{owner.headline_label} {row['mean_reward']:.3f} ({row['graded']} graded)"
        return f"{owner.headline_label} {row['success_rate']:.1%} ({row['graded']} graded)"
    if row["kind"] == "train":
        parts = [f"loss {row['train_loss']:.4f}"] if row.get("train_loss") is not None else []
        parts += [f"held-out acc. {row['heldout_accuracy']:.1%}"] if row.get("heldout_accuracy") is not None else []
        return " · ".join(parts + row["checkpoints"])
    if row.get("success") is not None:
        return f"success {row['success']:.1%} of {row['n_tasks']} tasks"
    return (
        f"{row.get('metric') or 'reward'} {row['reward']:.3f} of {row['n_tasks']} tasks"
        if row.get("reward") is not None
        else ""
    )


def listing(db, *, kind: str | None = None, tag: str | None = None) -> list[dict]:
    """Every run of the store (of one kind, with one tag), oldest first within each kind."""
    from colbench.store import queries

    rows: list[dict] = []
    with db.read() as session:
        if kind in (None, "rollout"):
            rows += [rollout_row(run, figures) for run, figures in queries.rollout_runs(session, tag=tag)]
        if kind in (None, "train"):
            rows += [training_row(run, checkpoints) for run, checkpoints in queries.training_runs(session, tag=tag)]
        if kind in (None, "eval") and tag is None:  # evaluations carry no tags
            rows += [evaluation_row(e) for e in queries.evaluations(session)]
    return rows


# ---------------------------------------------------------------- one run


def details(db, ref: str) -> dict:
    """Everything about one run: its row, config and figures; for a training run also its data
    (per rollout run), checkpoints and per-step figures; for a rollout run, who trained on it."""
    from colbench.store import queries
    from colbench.store.models import Evaluation

    with db.read() as session:
        found = resolve(session, ref)
        if found.kind == "eval":
            evaluation = session.get(Evaluation, found.id)
            return evaluation_row(evaluation) | {"metrics": evaluation.metrics}
        if found.kind == "rollout":
            ((run, figures),) = queries.rollout_runs(session, run_id=found.id)
            actions = queries.leak_actions(session, queries.rollout_trajectory_ids(session, run.id))
            leaks = Counter(action for per_dialogue in actions.values() for action in per_dialogue)
            return rollout_row(run, figures) | {
                "config": run.config, "trained": [f"train:{i}" for i in queries.consumers_of_rollout(session, run.id)],
                # the simulator guard's verdicts: leaking replies by action, and dialogues with one
                "simulator_leaks": dict(leaks), "dialogues_leaking": len(actions),
            }
        ((run, checkpoints),) = queries.training_runs(session, run_id=found.id)
        names = queries.rollout_run_names(session)
        data = [{"rollout": f"rollout:{rid}" if rid else "none", "name": names.get(rid), "trajectories": n}
                for rid, n in queries.data_of_run(session, run.id)]
        steps = step_rows(session, run.id)
        return training_row(run, checkpoints) | {
            "config": run.config, "metrics": run.metrics,
            "parent": run.parent_checkpoint_id and f"ckpt:{run.parent_checkpoint_id}",
            "data": data, "checkpoint_paths": {f"ckpt:{c.id}": c.path for c in checkpoints}, "steps": steps,
        }


# ---------------------------------------------------------------- removing


@dataclass
class Removal:
    ref: str
    trajectories: int = 0  # rollout: how many go
    checkpoints: list[str] = field(default_factory=list)  # train: which go
    folders: list[str] = field(default_factory=list)  # train: checkpoint folders deleted with them
    kept_folders: list[str] = field(default_factory=list)  # train: --out folders outside the store's, left in place
    blocked_by: list[str] = field(default_factory=list)  # what still needs the run; nothing is removed while any

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def remove(db, ref: str, *, unfinished_only: bool = False, dry_run: bool = False) -> Removal:
    """Remove a run and what only it made, in one transaction; refused (``blocked_by``) while
    another run needs it. ``unfinished_only`` (rollouts): only its pending, running and failed
    trajectories, e.g. after an interrupted rollout that will not be resumed."""
    from colbench.store import queries
    from colbench.store.models import Evaluation, RolloutRun

    with db.write() as session:
        found = resolve(session, ref)
        removal = Removal(str(found))
        if found.kind == "eval":
            if not dry_run:
                session.delete(session.get(Evaluation, found.id))
            return removal
        if found.kind == "rollout":
            ids = queries.rollout_trajectory_ids(session, found.id, unfinished_only=unfinished_only)
            removal.trajectories = len(ids)
            if not unfinished_only:
                removal.blocked_by = [
                    f"train:{i} trained on it" for i in queries.consumers_of_rollout(session, found.id)
                ]
            if dry_run or removal.blocked_by:
                return removal
            queries.delete_trajectories(session, ids)
            if not unfinished_only:
                session.delete(session.get(RolloutRun, found.id))
            return removal
        ((run, checkpoints),) = queries.training_runs(session, run_id=found.id)
        removal.checkpoints = [f"ckpt:{c.id}" for c in checkpoints]
        removal.blocked_by = [
            f"{user} uses its checkpoint" for user in queries.users_of_checkpoints(session, [c.id for c in checkpoints])
        ]
        removal.blocked_by += [
            f"train:{i} trained on its SWEET candidates" for i in queries.reusers_of_candidates(session, run.id)
        ]
        if run.status == "running":
            removal.blocked_by.append("it is still running")
        ours = _checkpoint_root(db)
        for checkpoint in checkpoints:
            path = Path(checkpoint.path)
            (removal.folders if ours and path.parent == ours else removal.kept_folders).append(str(path))
        if dry_run or removal.blocked_by:
            return removal
        queries.delete_training_run(session, run.id)
    for folder in removal.folders:  # after the commit: a failed transaction keeps its weights
        shutil.rmtree(folder, ignore_errors=True)
    return removal


def _checkpoint_root(db) -> Path | None:
    try:
        return (db.folder / "checkpoints").resolve()
    except Exception:  # a PostgreSQL store without --artifacts: it has no folder of its own
        return None


def step_rows(session, run_id: int) -> list[dict]:
    """A training run's stored per-step figures, as `colbench runs show --json` gives them."""
    from colbench.store import queries

    return [{"step": s.step, "epoch": s.epoch, **s.values} for s in queries.training_steps(session, run_id)]
