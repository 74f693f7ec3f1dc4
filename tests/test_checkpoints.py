"""Checkpoint integrity: stores that share a folder, atomic writes, hashes checked on load,
and the artefact root of a store without a folder (PostgreSQL)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlmodel import select

from colbench.model_refs import ModelNotFound, get_checkpoint, weights_digest
from colbench.official import import_trajectories
from colbench.store.db import Database, StoreError
from colbench.store.models import Store, TrainingRun
from colbench.training.checkpoints import save_model
from colbench.training.critic import CriticConfig, fit_critic
from conftest import write_jsonl
from officialdata import backend_task, trajectory

COLBENCH = [sys.executable, "-m", "colbench.cli.app"]
TINY_CRITIC = dict(epochs=1, batch_size=4, max_len=160, heldout_fraction=0.0, lora_rank=4, device="cpu", lr=1e-3)


def graded_store(url: str, folder: Path, **kwargs) -> Database:
    db = Database(url, **kwargs)
    records = [trajectory(backend_task(i), turns, reward) for i in range(2) for turns, reward in ((2, 1.0), (1, 0.0))]
    import_trajectories(db, write_jsonl(folder / f"data-{len(list(folder.iterdir()))}.jsonl", records))
    return db


def test_each_store_has_its_own_identity(tmp_path):
    first, second = Database(f"sqlite:///{tmp_path / 'a.db'}"), Database(f"sqlite:///{tmp_path / 'b.db'}")
    assert len(first.store_id) == 32 and first.store_id != second.store_id
    with first.read() as session:
        assert len(session.exec(select(Store)).all()) == 1
    assert Database(f"sqlite:///{tmp_path / 'a.db'}").store_id == first.store_id  # stable across opens


def test_two_stores_in_one_folder_keep_their_own_critics_and_a_changed_one_is_refused(tmp_path, tiny_model_dir):
    stores = [graded_store(f"sqlite:///{tmp_path / name}", tmp_path) for name in ("a.db", "b.db")]
    fitted = [fit_critic(db, CriticConfig(**TINY_CRITIC), base_model=str(tiny_model_dir)) for db in stores]
    assert fitted[0].checkpoint_id == fitted[1].checkpoint_id == 1  # the same ckpt:1 in each store...
    paths = [get_checkpoint(db, "ckpt:1")[0].path for db in stores]
    assert paths[0] != paths[1] and all(
        Path(p).parent == tmp_path / "checkpoints" for p in paths
    )  # ...in its own folder

    # Weights changed behind the store's back: every load says so, in one line.
    weights = next(Path(paths[0]).glob("*.safetensors"))
    weights.write_bytes(weights.read_bytes()[:-8] + b"\0" * 8)
    with pytest.raises(ModelNotFound, match="sha256 mismatch"):
        get_checkpoint(stores[0], "ckpt:1")
    env = dict(os.environ, NO_COLOR="1")
    env.pop("COLBENCH_DEBUG", None)
    result = subprocess.run(
        COLBENCH + ["--db", stores[0].url, "rollout", "--model", "ckpt:1", "--tasks", "backend:test", "--limit", "1",
                    "--sandbox", "bwrap"],
        capture_output=True, text=True, env=env, timeout=300,
    )
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode != 0 and len(lines) == 1 and "sha256 mismatch" in lines[0], result.stderr
    get_checkpoint(stores[1], "ckpt:1")  # the other store's is untouched


def test_a_checkpoint_is_written_whole_or_not_at_all(tmp_path, tiny_model_dir, monkeypatch):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    target = tmp_path / "checkpoints" / "policy-1"
    real = type(tokenizer).save_pretrained

    def crash(*args, **kwargs):  # the weights are written; the tokenizer is not
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(type(tokenizer), "save_pretrained", crash)
    with pytest.raises(OSError):
        save_model(model, tokenizer, target)
    assert not target.exists() and list((tmp_path / "checkpoints").iterdir()) == []  # no half folder left
    monkeypatch.setattr(type(tokenizer), "save_pretrained", real)
    adapter, digest = save_model(model, tokenizer, target)
    assert not adapter and digest == weights_digest(target) and (target / "tokenizer_config.json").is_file()
    with pytest.raises(FileExistsError):
        save_model(model, tokenizer, target)


def test_out_folder_that_holds_files_is_refused_before_a_run_is_recorded(tmp_path, tiny_model_dir):
    db = graded_store(f"sqlite:///{tmp_path / 'c.db'}", tmp_path)
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="not an empty folder"):
        fit_critic(db, CriticConfig(**TINY_CRITIC, out=str(busy)), base_model=str(tiny_model_dir))
    with db.read() as session:
        assert session.exec(select(TrainingRun)).all() == []
    assert (busy / "notes.txt").read_text() == "mine"


@pytest.mark.postgres
def test_a_postgres_store_writes_checkpoints_under_its_artifact_root_only(postgres_url, tmp_path, tiny_model_dir,
                                                                          monkeypatch):
    monkeypatch.delenv("COLBENCH_ARTIFACTS", raising=False)
    monkeypatch.chdir(tmp_path)
    db = graded_store(postgres_url, tmp_path)
    with pytest.raises(StoreError, match="--artifacts"):  # refused before any training
        fit_critic(db, CriticConfig(**TINY_CRITIC), base_model=str(tiny_model_dir))
    with db.read() as session:
        assert session.exec(select(TrainingRun)).all() == []
    root = tmp_path / "artifacts"
    db = Database(postgres_url, artifacts=root)
    fitted = fit_critic(db, CriticConfig(**TINY_CRITIC), base_model=str(tiny_model_dir))
    assert Path(get_checkpoint(db, fitted.checkpoint_id)[0].path).parent == root / "checkpoints"
    assert not (tmp_path / "checkpoints").exists()  # nothing in the working directory
