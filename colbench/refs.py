"""A user's model or checkpoint reference, resolved once, at the edge, against the store.

A reference is ``smollm2`` (the default), a local folder, a hub id, or ``ckpt:<id>`` /
``ckpt:<training run's name>`` (that run's last checkpoint). The front door of a command
resolves it here, once:

- ``checkpoint(db, ref)``: the checkpoint row and its training run (the weights verified);
- ``model_source(db, ref)``: what to load (colbench.model_refs.ModelSource);
- ``stored_ref(db, ref)``: the reference as the store keeps it, ``ckpt:<id>`` for a run's
  name (a name can be removed or taken again, an id cannot), any other as given;

and passes the resolved object down. Errors are one line (ModelNotFound).
"""
from __future__ import annotations

from colbench.model_refs import (
    CheckpointLookup,
    ModelNotFound,
    ModelSource,
    checkpoint_name,
    checkpoint_part,
    resolve_model
)
from colbench.store import queries
from colbench.store.models import Checkpoint, TrainingRun


def checkpoint_id(db, ref) -> int:
    """``7``, ``"7"``, ``"ckpt:7"`` or ``"ckpt:<run name>"`` → 7."""
    if isinstance(ref, int):
        return ref
    text = str(ref).strip()
    named = checkpoint_part(text)
    if named is None and not text.isdigit():
        raise ModelNotFound(f"not a checkpoint reference: {ref!r} (expected ckpt:<id>)")
    named = text if named is None else named
    if named.isdigit():
        return int(named)
    with db.read() as session:
        holder = queries.name_holder(session, named)
        found = (
            queries.training_runs(session, run_id=int(holder.partition(":")[2]))
            if holder and holder.startswith("train:")
            else []
        )
    if not found or not found[0][1]:
        raise ModelNotFound(
            f"{text}: no checkpoint has that id, and no trained run that name (see `colbench runs ls --kind train`)"
        )
    return found[0][1][-1].id


def checkpoint(db, ref) -> tuple[Checkpoint, TrainingRun]:
    """The checkpoint ``ref`` names and the run that wrote it; its weights are checked to be the run's."""
    from colbench.weights import verify_checkpoint

    number = checkpoint_id(db, ref)
    with db.read() as session:
        found = queries.checkpoint_and_run(session, number)
    if found is None:
        raise ModelNotFound(f"checkpoint {checkpoint_name(number)} not found")
    verify_checkpoint(found[0])
    return found


def stored_ref(db, ref):
    """``ckpt:<run name>`` → ``ckpt:<id>``; any other reference (None too) as given."""
    named = checkpoint_part(ref)
    if named is None or named.isdigit():
        return ref
    return checkpoint_name(checkpoint_id(db, ref))


def checkpoint_lookup(db) -> CheckpointLookup:
    """ckpt:<id> → (base model, adapter folder, merged folder), for colbench.model_refs.resolve_model."""

    def lookup(number: str):
        from colbench.weights import verify_checkpoint

        with db.read() as session:
            row = session.get(Checkpoint, int(number))
        if row is None:
            return None
        verify_checkpoint(row)
        return (row.base_model, row.path, None) if row.adapter else (row.base_model, None, row.path)

    return lookup


def model_source(db, ref) -> ModelSource:
    """What to load for ``ref`` (any model reference; ``ckpt:<run name>`` too)."""
    if isinstance(ref, ModelSource):
        return ref
    return resolve_model(stored_ref(db, ref), checkpoint_lookup(db))
