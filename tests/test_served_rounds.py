"""On-policy rounds against a served policy (`experiment --engine openai`, `--policy-sampler openai`): after
round 1 trains its LoRA actor, the study loads that checkpoint's folder onto the server (vLLM's
/v1/load_lora_adapter) and round 2's rollouts and SWEET candidates ask for it by name.

The loopback server answers the adapter routes, statuses and unknown-model 404s as vLLM does; for every name it
samples the tiny base model (tests/test_sampler_openai.py's serve_policy), so what these tests check is the name
each request asks for and the folder each name was loaded from, not the adapter's arithmetic."""
from __future__ import annotations

from pathlib import Path

import pytest
from sqlmodel import select

from colbench.engines.base import EngineError, SamplingParams
from colbench.engines.openai import OpenAIEngine, served_model
from colbench.official import import_trajectories
from colbench.openai_client import EndpointError, OpenAIClient
from colbench.store.db import Database
from colbench.store import queries
from colbench.store.models import Checkpoint, RolloutRun, TrainingRun, Trajectory
from conftest import write_jsonl
from officialdata import backend_task, trajectory
from test_experiment import TINY_STUDY, cli, counts  # noqa: F401 (cli is a fixture)
from test_sampler_openai import serve_policy


def adapter_folder(path: Path) -> str:
    path.mkdir()
    (path / "adapter_config.json").write_text("{}")
    return str(path)


def test_the_server_loads_adapters_as_vllm_does(openai_server, tmp_path):
    with OpenAIClient(openai_server.base_url, max_retries=0) as client:
        with pytest.raises(EndpointError, match="VLLM_ALLOW_RUNTIME_LORA_UPDATING=True"):  # a server started without it
            client.load_lora_adapter("a", adapter_folder(tmp_path / "a"))
        openai_server.allow_runtime_lora()
        client.load_lora_adapter("a", str(tmp_path / "a"))
        client.load_lora_adapter("a", str(tmp_path / "a"))  # loaded already: the same name is the same weights
        with pytest.raises(EndpointError, match="HTTP 404: Loading lora b failed: No adapter found") as missing:
            client.load_lora_adapter("b", str(tmp_path / "nowhere"))
        assert "\n" not in str(missing.value)
        assert client.list_models() == ["test-model", "a"] and client.list_models(adapters=False) == ["test-model"]
    assert openai_server.adapters == {"a": str(tmp_path / "a")}
    assert served_model(openai_server.base_url) == "test-model"  # the adapters loaded are not base models
    with OpenAIClient(openai_server.base_url, max_retries=0) as client:
        client.load_lora_adapter("c", adapter_folder(tmp_path / "c"))
        client.unload_lora_adapter("c")
        client.unload_lora_adapter("c")  # not held (a restarted server): nothing to do
    assert openai_server.adapters == {"a": str(tmp_path / "a")}
    with (
        OpenAIEngine("b", openai_server.base_url, max_retries=0) as engine,
        pytest.raises(EngineError, match="HTTP 404: The model `b` does not exist")
    ):
        engine.generate([[{"role": "user", "content": "hi"}]], SamplingParams(n=1, max_new_tokens=4))


def test_served_turns_are_stored_exact_when_the_engine_has_the_policys_tokenizer(openai_server, tiny_engine, tokenizer):
    """With the policy's tokenizer the engine renders its chat template and sends token ids, so a rollout
    stores the templated prompt and the sampled ids (what the trainers read), not a JSON message list."""
    served = serve_policy(openai_server, tiny_engine)
    conversation = [{"role": "user", "content": "Write a function that adds two numbers."}]
    with OpenAIEngine("test-model", openai_server.base_url, tokenizer=tokenizer, model_ref="hf:tiny") as engine:
        [generation] = engine.generate([conversation], SamplingParams(temperature=1.0, max_new_tokens=6, n=2, seed=3))
    prompt = tokenizer.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True)
    [request] = openai_server.requests
    assert (
        generation.prompt_text == prompt
        and request["prompt"] == tokenizer(prompt, add_special_tokens=False)["input_ids"]
    )
    [(_, sampled)] = served
    assert [s.token_ids for s in generation.samples] == [s.token_ids for s in sampled] and all(
        s.token_ids for s in sampled
    )
    assert [s.token_logprobs for s in generation.samples] == [s.token_logprobs for s in sampled]


def test_a_served_round_two_samples_round_one_adapter_and_a_failed_load_loses_nothing(openai_server, tiny_engine,
                                                                                      tiny_model_dir, tmp_path, cli):
    folder = tmp_path / "study"
    folder.mkdir()
    db = Database(f"sqlite:///{folder / 'colbench.db'}")
    records = [t for i in range(2) for t in (trajectory(backend_task(i), 2, 1.0), trajectory(backend_task(i), 3, 0.0))]
    import_trajectories(db, write_jsonl(tmp_path / "offline.jsonl", records))
    openai_server.allow_runtime_lora()
    serve_policy(openai_server, tiny_engine)
    url = openai_server.base_url
    study = ["experiment", "backend", "--model", str(tiny_model_dir), "--dir", str(folder), "--json", "--no-on-policy",
             "--arm", "sweet",
             "--rounds", "2", "--engine", "openai", "--base-url", url, "--policy-sampler", "openai",
             "--policy-base-url", url, *TINY_STUDY]

    openai_server.fail_loading = "Loading lora colbench failed: out of LoRA slots"  # as vLLM words a failed add_lora
    code, out, err = cli(*study)
    assert code != 0 and err.strip().splitlines()[-1] == (
        f"error: endpoint {url} rejected the request: HTTP 400: {openai_server.fail_loading} (loading LoRA adapter "
        f"{openai_server.requests[-1]['lora_name']} from {openai_server.requests[-1]['lora_path']})")
    assert "Traceback" not in err
    before = counts(db)
    with db.read() as session:
        trained = {(r.kind, r.id) for r in session.exec(select(TrainingRun))}
    assert sorted(kind for kind, _ in trained) == [
        "critic",
        "policy:sweet"
    ]  # round 1 was done and stored before the load

    openai_server.fail_loading = None
    code, out, err = cli(*study)
    assert code == 0, err
    arms = {a["arm"]: a for a in out["arms"]}
    first, second = arms["sweet"]["model"], arms["sweet-round-2"]["model"]
    with db.read() as session:
        checkpoints = {f"ckpt:{c.id}": c for c in session.exec(select(Checkpoint))}
        runs = {r.id: r for r in session.exec(select(TrainingRun))}
        fresh = session.exec(select(RolloutRun).where(RolloutRun.policy == first,
                                                      RolloutRun.tasks == "backend:train")).one()
        fresh_ids = session.exec(select(Trajectory.id).where(Trajectory.rollout_id == fresh.id)).all()
        fresh_turns = [t for i in fresh_ids for t in queries.turns_of(session, i) if t.role == "assistant"]
    assert (
        trained <= {(r.kind, r.id) for r in runs.values()} and len(runs) == 4
    )  # round 1 reused: only round 2's critic and policy are new
    assert counts(db)[2] > before[2]

    def name(ref):
        return f"colbench-ckpt-{checkpoints[ref].id}-{checkpoints[ref].sha256[:8]}"

    # Each adapter served is its checkpoint's own folder, and round 2's actor sampled its candidates from round 1's.
    assert openai_server.adapters == {name(first): str(Path(checkpoints[first].path).resolve()),
                                      name(second): str(Path(checkpoints[second].path).resolve())}
    assert runs[arms["sweet-round-2"]["training"]["run_id"]].config["served_model"] == name(first)
    asked = [r for r in openai_server.requests if "prompt" in r]
    loaded_at = next(i for i, r in enumerate(openai_server.requests) if r.get("lora_name") == name(first))
    candidates = [r["model"] for r in asked if r["n"] == 2]  # --policy-candidates 2; rollouts ask for one sample
    assert set(candidates) == {"test-model", name(first)} and candidates[-1] == name(first)
    assert all(r.get("model") != name(first) for r in openai_server.requests[:loaded_at])
    # Round 2's rollouts asked for round 1's adapter, and stored exact turns under round 1's checkpoint.
    assert fresh.config["served_model"] == name(first) and fresh.config["engine"] == "openai"
    assert fresh_turns and all(t.token_ids for t in fresh_turns)
    assert all(
        t.prompt.startswith("<|im_start|>system") and t.prompt.endswith("<|im_start|>assistant\n") for t in fresh_turns
    )


def test_a_full_fine_tune_is_refused_before_any_work_for_served_rounds(cli, tmp_path):
    base = ["experiment", "backend", "--dir", str(tmp_path / "x"), "--train-tasks", "1", "--arm", "sweet",
            "--policy-full"]
    for served in (["--engine", "openai", "--base-url", "http://127.0.0.1:9/v1"],
                   ["--rounds", "2", "--policy-sampler", "openai", "--policy-base-url", "http://127.0.0.1:9/v1"]):
        code, out, err = cli(*base, *served)
        assert (
            code != 0 and len(err.strip().splitlines()) == 1 and "vLLM loads new LoRA adapters, not new weights" in err
        )
    assert not (tmp_path / "x" / "colbench.db").exists()
    code, out, err = cli("experiment", "backend", "--dir", str(tmp_path / "x"), "--engine", "openai")
    assert code != 0 and "--engine openai needs --base-url" in err and len(err.strip().splitlines()) == 1
    code, out, err = cli("rollout", "--served-model", "policy")
    assert code != 0 and "--served-model goes with --engine openai" in err and len(err.strip().splitlines()) == 1
