"""Checkpoint folders and rows: where a trained model goes, and how it comes back.

A checkpoint is a folder, by default ``<artefact root>/checkpoints/<kind>-<run id>-<store>``
(the store's id: two stores sharing a folder never share a checkpoint): a peft adapter
(``adapter_config.json`` and weights) or, after ``--full`` training, full weights with
the tokenizer. It is written under a temporary name and renamed when complete. Its
``Checkpoint`` row names the run, the base model reference the run started from (so
``ckpt:<id>`` resolves), the step, metrics, and the sha256 of its weights, checked on
every load.
"""
from __future__ import annotations

import os
import shutil
import threading
from contextlib import contextmanager
from pathlib import Path

from colbench.model_refs import ModelSource, get_checkpoint, load_model, load_tokenizer, model_source, weights_digest
from colbench.processes import worker_abandoned, worker_id
from colbench.store import queries


def run_label(db, kind: str, run_id: int) -> str:
    """<kind>-<run id>-<store id[:8]>: a run's folders (checkpoint, tracker logs) are named by it."""
    return f"{kind}-{run_id}-{db.store_id[:8]}"


def checkpoint_folder(db, kind: str, run_id: int, out: str | None = None) -> Path:
    if out:
        return Path(out).expanduser().resolve()
    return db.folder / "checkpoints" / run_label(db, kind, run_id)


def step_folder(final: Path, step: int) -> Path:
    """Where a run's step ``step`` checkpoint goes: beside its final folder."""
    return final.with_name(f"{final.name}-step-{step}")


def check_artifact_root(db, out: str | None) -> None:
    """Before a run starts: the store must have somewhere to put its checkpoint (a
    PostgreSQL store needs --artifacts), so no training is lost to a late refusal."""
    if not out:
        db.folder  # noqa: B018 -- the property raises StoreError for a store without a folder


def check_name_free(db, name: str | None) -> None:
    """Before a run starts: its --name must not be another run's."""
    if name:
        with db.read() as session:
            holder = queries.name_holder(session, name)
        if holder is not None:
            raise ValueError(f"the name {name!r} is taken by {holder}")


def save_model(model, tokenizer, folder: Path, card=None, state_dict: dict | None = None) -> tuple[bool, str]:
    """Write an adapter (peft model) or full weights and tokenizer, all or nothing: into a
    temporary sibling folder, renamed to ``folder`` once complete. ``card(adapter)`` gives the
    model card (README.md). ``state_dict``: the weights to write in place of the model's own
    (a sharded model's, gathered). Returns (adapter, sha256)."""
    from colbench.training.modeling import is_peft

    folder.parent.mkdir(parents=True, exist_ok=True)
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise FileExistsError(f"checkpoint folder {folder} exists and is not empty")
    partial = folder.parent / f".{folder.name}.partial-{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    model = getattr(model, "module", model)
    model = getattr(model, "lm", model)
    model = getattr(model, "module", model)
    adapter = is_peft(model)
    try:
        if state_dict is None:
            model.save_pretrained(partial)
        else:
            model.save_pretrained(partial, state_dict=state_dict)
        if not adapter:
            tokenizer.save_pretrained(partial)
        if card is not None:
            (partial / "README.md").write_text(card(adapter))
        digest = weights_digest(partial)
        if folder.exists():
            folder.rmdir()  # empty (checked above): rename needs it gone
        os.rename(partial, folder)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return adapter, digest


def save_trained(accelerator, scorer, tokenizer, folder: Path, card=None, dtype=None) -> tuple[bool, str | None]:
    """Save what a recipe trained (the main process writes; the others wait). Returns (adapter, sha256).

    A sharded model (``--shard full``) is gathered whole on rank 0 first (every process takes part):
    an adapter's weights as trained (float32), full weights in ``dtype`` (the dtype the same run would
    have kept them in unsharded), so the folder is the one an unsharded run writes."""
    from colbench.training.modeling import full_state_dict, is_peft, is_sharded, without_checkpoint_wrappers

    accelerator.wait_for_everyone()
    state = None
    if is_sharded(scorer):
        adapter = is_peft(scorer)
        state = full_state_dict(scorer, adapter)
        if not adapter and dtype is not None:
            state = {k: v.to(dtype) if v.is_floating_point() else v for k, v in state.items()}
    if not accelerator.is_main_process:
        return True, None
    model = accelerator.unwrap_model(scorer).lm
    if state is not None and not is_peft(model) and dtype is not None:
        model.config.dtype = dtype  # config.json says what the files hold
    with without_checkpoint_wrappers(model):
        return save_model(model, tokenizer, folder, card, state_dict=state)


def card_maker(db, *, kind: str, run_id: int, name: str | None, base_model: str, config: dict, metrics: dict,
               trajectory_ids):
    """``card(adapter)`` for save_model: the run's model card, naming the rollout runs its data came from."""
    from colbench.runs import named
    from colbench.training.card import model_card

    with db.read() as session:
        data = [(named(f"rollout:{rid}", rname) if rid else "imported before runs", n)
                for rid, rname, n in queries.rollouts_of(session, list(trajectory_ids))]
    return lambda adapter: model_card(
        kind=kind,
        run_ref=f"train:{run_id}",
        name=name,
        base_model=base_model,
        adapter=adapter,
        store_id=db.store_id,
        config=config,
        metrics=metrics,
        data=data
    )


def fail_run(db, run_id: int | None, exc: BaseException) -> None:
    """Mark a training run failed with the first line of what stopped it."""
    if run_id is None:  # a non-main process under accelerate writes nothing
        return
    lines = str(exc).strip().splitlines()
    reason = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    try:
        with db.write() as session:
            queries.fail_run(session, run_id, reason)
    except Exception:  # the store is gone too; the original error matters more
        pass


# ---------------------------------------------------------------- runs


RUN_HEARTBEAT_S = 30.0
RUN_STALE_AFTER_S = 600.0  # a run on another host that has not beaten for this long is failed


def start_run(db, *, kind: str, base_model: str, parent_checkpoint_id: int | None, config: dict,
              name: str | None = None, tags=()) -> int:
    """A training run's row, marked running with this process as its worker, before
    anything is trained (runs whose process is gone are marked failed first)."""
    with db.write() as session:
        queries.fail_stale_runs(session, run_is_gone)
        return queries.start_run(session, kind=kind, base_model=base_model, parent_checkpoint_id=parent_checkpoint_id,
                                 config=config, worker=worker_id(), name=name, tags=tags)


def reopen_run(db, run_id: int, settings: dict | None = None, final: Path | None = None) -> int:
    """A failed or finished run runs again under this process (an online run resumed or extended), with
    ``settings``. A finished run's checkpoint in ``final`` (its run's final folder) moves beside it as the step
    checkpoint it is, leaving ``final`` for the end of the extended run. Returns the run's id."""
    with db.write() as session:
        row = next((c for c in queries.run_checkpoints(session, run_id) if final and c.path == str(final)), None)
        if row is not None:
            moved = step_folder(final, row.step)
            if moved.exists():  # the run also saved its last step (a validation there)
                moved = moved.with_name(moved.name + "-end")
            final.rename(moved)  # a store that fails to commit moves it back below
            row.path = str(moved)
            session.add(row)
        try:
            queries.reopen_run(session, run_id, worker_id(), settings)
            session.flush()
        except BaseException:
            if row is not None:
                moved.rename(final)
            raise
    return run_id


def add_checkpoint(db, run_id: int, *, kind: str, base_model: str, folder: Path, adapter: bool, step: int,
                   metrics: dict) -> int:
    import json

    metrics = json.loads(json.dumps(metrics, default=str))  # what the JSON column can hold
    with db.write() as session:
        return queries.add_checkpoint(session, run_id, kind=kind, base_model=base_model, path=str(folder),
                                      adapter=adapter, step=step, metrics=metrics)


def run_is_gone(run) -> bool:
    """A running run's process has ended (this host), or has not beaten for RUN_STALE_AFTER_S."""
    return worker_abandoned(run.worker, run.heartbeat_at or run.started_at, RUN_STALE_AFTER_S)


def fail_stale_runs(db) -> list[int]:
    with db.write() as session:
        return queries.fail_stale_runs(session, run_is_gone)


def stopped_run(db, kind: str, settings: dict, name: str | None):
    """The newest failed run of ``kind`` with these settings (and name): what a rerun of the same command may
    continue. A run whose process is gone (kill -9) is failed first."""
    fail_stale_runs(db)
    with db.read() as session:
        return queries.unfinished_run(session, kind, settings, name=name)


def extendable_run(db, kind: str, settings: dict, name: str | None):
    """The run that a rerun with other --steps (and nothing else changed) extends: the run called ``name`` (one
    that differs in another setting is refused in one line naming the flags), or the newest unnamed one with fewer
    steps."""
    from colbench.options import flag_of

    with db.read() as session:
        candidates = queries.extendable_runs(session, kind, name=name)
    for run in candidates:
        old = run.config or {}
        changed = [k for k in sorted(old.keys() | settings.keys()) if k != "steps" and old.get(k) != settings.get(k)]
        if not changed and (name is not None or settings.get("steps", 0) > old.get("steps", 0)):
            return run  # unnamed: only a longer run extends one (the same command again makes a new run)
        if changed and name is not None:
            # A derived setting (learning_rate) differs beside the flag it follows (--lr, --full): name the flag.
            keys = [k for k in changed if k not in DERIVED_SETTINGS] or changed
            said = "; ".join(f"{SETTING_FLAGS.get(k) or flag_of(k)} {old.get(k)!r} there, {settings.get(k)!r} here"
                             for k in keys)
            raise ValueError(f"train:{run.id} ({name!r}) was made with other settings ({said}): only --steps can"
                             " change to extend a run")
    return None


# Settings a run records that follow from its flags, and the flags of recorded settings not named after them.
DERIVED_SETTINGS = {"learning_rate", "adam_betas", "algo"}
SETTING_FLAGS = {"learning_rate": "--lr", "critic_checkpoint_id": "--critic", "algo": "--algo"}


@contextmanager
def heartbeat(db, run_id: int | None, every_s: float = RUN_HEARTBEAT_S):
    """Beat the run's row every ``every_s`` while the block runs (a thread: training holds the
    main one), so that another host can tell a live run from a dead one."""
    if run_id is None:  # not the main process: it writes nothing
        yield
        return
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(every_s):
            try:
                with db.write() as session:
                    queries.beat_run(session, run_id)
            except Exception:  # a busy or lost store: the next beat tries again
                pass

    thread = threading.Thread(target=beat, name=f"run-{run_id}-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)


def finish_run(db, run_id: int, *, kind: str, base_model: str, folder: Path, adapter: bool, sha256: str | None,
               metrics: dict, watermark: int | None, lineage) -> int:
    """The run is done: its checkpoint row, metrics, data watermark and lineage. Returns the checkpoint id."""
    import json

    metrics = json.loads(json.dumps(metrics, default=str))  # what the JSON column can hold
    with db.write() as session:
        return queries.finish_run(
            session, run_id, kind=kind, base_model=base_model, path=str(folder), adapter=adapter, sha256=sha256,
            metrics=metrics, watermark=watermark, lineage=lineage,
        )


# ---------------------------------------------------------------- checkpoints out of the store


def export_checkpoint(db, ref, out, *, merge: bool = True, device: str = "cpu", dtype=None) -> Path:
    """Write a checkpoint as a folder that ``--model DIR`` loads.

    - ``merge`` (adapter checkpoints): base + adapter merged into plain HF weights, with
      the tokenizer;
    - without ``merge``: the peft adapter folder as is (its config names the base model),
      with the tokenizer;
    - full-weight checkpoints are copied either way.
    """
    import shutil

    checkpoint, run = get_checkpoint(db, ref)
    out = Path(out).expanduser().resolve()
    if out.exists() and any(out.iterdir()):
        raise ValueError(f"{out} exists and is not empty")
    out.mkdir(parents=True, exist_ok=True)
    if not checkpoint.adapter:
        shutil.copytree(checkpoint.path, out, dirs_exist_ok=True)
        return out
    base = model_source(db, checkpoint.base_model)
    tokenizer = load_tokenizer(base)
    if not merge:
        shutil.copytree(checkpoint.path, out, dirs_exist_ok=True)
        tokenizer.save_pretrained(out)
        return out
    model = load_model(ModelSource(base=base.base, adapter=checkpoint.path, ref=f"ckpt:{checkpoint.id}"), device=device,
                       dtype=dtype)
    merged = model.merge_and_unload()
    merged.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def list_checkpoints(db) -> list[dict]:
    fail_stale_runs(db)
    with db.read() as session:
        rows = queries.checkpoints_with_runs(session)
    return [
        {
            "id": c.id, "ref": f"ckpt:{c.id}", "kind": r.kind, "run_id": r.id, "base_model": c.base_model,
            "adapter": c.adapter, "step": c.step, "path": c.path, "created_at": c.created_at,
            "metrics": c.metrics or {},
            "parent": r.parent_checkpoint_id,
        }
        for c, r in rows
    ]
