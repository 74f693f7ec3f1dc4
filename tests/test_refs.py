"""A user's model reference resolved against the store (colbench/model_refs.py): ``ckpt:<id>``,
``ckpt:<run name>``, a bare id, or any model reference, to a checkpoint row or what to load; once."""
from __future__ import annotations

import pytest

from colbench import model_refs
from colbench.model_refs import DEFAULT_MODEL, ModelNotFound, ModelSource, checkpoint_name, checkpoint_part
from colbench.store.db import Database
from colbench.store.models import Checkpoint, TrainingRun


@pytest.fixture
def db(tmp_path, tiny_model_dir):
    """A store with one training run, named warm, whose checkpoint is the tiny model's full weights."""
    db = Database(f"sqlite:///{tmp_path / 'c.db'}")
    with db.write() as session:
        run = TrainingRun(kind="policy:sft", name="warm", base_model=DEFAULT_MODEL, status="done")
        session.add(run)
        session.flush()
        session.add(Checkpoint(run_id=run.id, kind="policy", base_model=DEFAULT_MODEL, path=str(tiny_model_dir),
                               adapter=False))
    return db


def test_one_reader_of_the_prefix():
    assert checkpoint_part("ckpt:7") == "7" and checkpoint_part(" ckpt:warm ") == "warm"
    assert checkpoint_part("smollm2") is None and checkpoint_part(None) is None and checkpoint_part(7) is None
    assert checkpoint_name(7) == "ckpt:7"


def test_every_way_to_name_a_checkpoint_finds_it(db, tiny_model_dir):
    for ref in (1, "1", "ckpt:1", "ckpt:warm", " ckpt:warm "):
        row, run = model_refs.get_checkpoint(db, ref)
        assert (row.id, run.name) == (1, "warm"), ref
    assert model_refs.stored_ref(db, "ckpt:warm") == "ckpt:1"  # stored by id: a name can be removed or taken again
    assert model_refs.stored_ref(db, "ckpt:1") == "ckpt:1"
    assert model_refs.stored_ref(db, DEFAULT_MODEL) == DEFAULT_MODEL and model_refs.stored_ref(db, None) is None
    assert model_refs.model_source(db, "ckpt:warm") == ModelSource(base=str(tiny_model_dir), ref="ckpt:1")
    assert model_refs.model_source(db, str(tiny_model_dir)) == model_refs.resolve_model(str(tiny_model_dir))


@pytest.mark.parametrize("ref, message", [
    ("ckpt:99", "checkpoint ckpt:99 not found"),
    ("ckpt:nobody",
     "ckpt:nobody: no checkpoint has that id, and no trained run that name (see `colbench runs ls --kind train`)"),
    ("bogus", "not a checkpoint reference: 'bogus' (expected ckpt:<id>)"),
])
def test_a_missing_checkpoint_is_one_line(db, ref, message):
    with pytest.raises(ModelNotFound) as err:
        model_refs.get_checkpoint(db, ref)
    assert str(err.value) == message


def test_a_missing_checkpoints_weights_are_one_line(db, tmp_path):
    with db.write() as session:
        session.get(Checkpoint, 1).path = str(tmp_path / "gone")
    with pytest.raises(ModelNotFound, match=r"^checkpoint ckpt:1: folder .*gone is missing$"):
        model_refs.model_source(db, "ckpt:warm")


def test_engine_auto_resolves_the_model_once(db, monkeypatch, tmp_path):
    """--engine auto chooses its engine from the same resolved model the engine then loads."""
    pytest.importorskip("ctranslate2")
    from colbench.engines import ct2, hf
    from colbench.wiring import build_engine

    monkeypatch.setenv("COLBENCH_CACHE", str(tmp_path / "cache"))
    calls = []
    real = model_refs.resolve_model

    def counting(ref, lookup=None):
        calls.append(ref)
        return real(ref, lookup)

    monkeypatch.setattr(model_refs, "resolve_model", counting)  # the resolver's and default_engine's
    for engine_module in (ct2, hf):
        monkeypatch.setattr(
            engine_module, "resolve_model", lambda *a, **k: pytest.fail("the engine resolved the model again")
        )
    with build_engine(db, "auto", "ckpt:warm", device="cpu", max_batch_size=2) as engine:
        assert engine.kind == "ct2" and engine.model_ref == "ckpt:1"  # the tiny model is a Llama: ct2 on a CPU
    assert calls == ["ckpt:1"]


def test_a_critic_ensemble_reaches_sweet_as_the_checkpoints_it_names(db, monkeypatch):
    """The experiment passes an ensemble's ids as a list, the CLI as comma-separated references:
    both reach SWEET-RL as the same checkpoints (a list once became "[1, 2]" and failed)."""
    from colbench.training import policy, sweet

    seen = []
    monkeypatch.setattr(
        sweet,
        "fit",
        lambda db, config, critic_checkpoint=None, **run: seen.append((critic_checkpoint, run["base_model"]))
    )
    policy.fit_policy(db, algo="sweet", critic_checkpoint=[1, 3])
    policy.fit_policy(db, algo="sweet", critic_checkpoint="ckpt:warm, ckpt:3", base_model="ckpt:warm")
    policy.fit_policy(db, algo="sweet", critic_checkpoint=1)
    assert seen == [("1,3", None), ("ckpt:1,ckpt:3", "ckpt:1"), ("1", None)]
