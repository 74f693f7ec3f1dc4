"""Against a real vLLM server (its CPU build, started once for the session by `colbench serve`: plugins/vllm_server.py)
on the embedded SmolLM2: what a served rollout stores is what the trainer scores, the sampling vLLM applied is the
unfiltered one colbench asked for, SWEET-RL's served candidates, online RL loading each step's adapter, and vLLM's
offline engine in the CPU build's own environment. The loopback server (plugins/openai_server.py) stays for latency
and faults, where a fake is the right tool."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request

import pytest
import torch
from sqlmodel import select

from colbench.store import queries
from colbench.store.db import Database
from colbench.store.models import RolloutRun, SweetCandidate, Trajectory
from colbench.training import data as D
from colbench.training import sequences as S

COLBENCH = [sys.executable, "-m", "colbench.cli.app"]
# float32 on both sides: measured within 6e-5 nats on this machine; the bound leaves room for other CPUs' kernels.
LOGPROB_TOLERANCE = 2e-3
UNFILTERED = {"top_p": 1.0, "top_k": -1, "min_p": 0.0, "repetition_penalty": 1.0, "temperature": 1.0}


def cli_env(**variables) -> dict:
    from test_online_rl import plugin_path

    env = dict(os.environ, NO_COLOR="1", PYTHONPATH=plugin_path(), **variables)
    env.pop("COLBENCH_DEBUG", None)
    return env


def colbench(db_url: str, *args, timeout: int = 600) -> dict:
    done = subprocess.run(COLBENCH + ["--db", db_url, *args, "--json"], capture_output=True, text=True,
                          env=cli_env(), timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def smollm2():
    """The trainer's view of the embedded model: its tokenizer and float32 weights."""
    from colbench.model_refs import load_model, load_tokenizer, resolve_model

    source = resolve_model("smollm2")
    return load_tokenizer(source), load_model(source, device="cpu", dtype=torch.float32).eval()


def trainer_logps(model, tokenizer, turns) -> list[list[float]]:
    """The trainer's log-probs of each stored agent turn's sampled tokens, read as training reads the dialogue."""
    from colbench.training.modeling import TokenLogProbs

    agent = S.agent_turns(tokenizer, "backend", turns)
    out = []
    for row in S.pack(agent, (), 100_000):
        ids, mask, turn_ids = D.collate([row], tokenizer.pad_token_id)
        with torch.no_grad():
            values = TokenLogProbs(model)(ids, mask, turn_ids >= 0)[0]
        for turn in sorted({t for t in row.turn_ids if t >= 0}):
            out.append(values[turn_ids[0] == turn].tolist())
    return out


def parsed(params: str) -> dict:
    return {key: float(value) for key, value in re.findall(r"\b(top_p|top_k|min_p|repetition_penalty|temperature|seed)"
                                                           r"=(-?[\d.]+)", params)}


def stored_rollout(url: str):
    """(the rollout run, its dialogues, their turns by dialogue id) of the one rollout a store at ``url`` holds."""
    db = Database(url)
    with db.read() as session:
        [run] = session.exec(select(RolloutRun)).all()
        dialogues = session.exec(select(Trajectory)).all()
        turns = queries.turns_for(session, [t.id for t in dialogues])
    db.close()
    return run, dialogues, turns


def tokens_scored_alike(dialogues, turns, model, tokenizer) -> int:
    """How many sampled tokens were checked: each agent turn's stored log-probs are the trainer's of ``model``."""
    checked = 0
    for t in dialogues:
        agent = [x for x in turns[t.id] if x.role == "assistant"]
        assert agent and all(x.token_ids and len(x.token_ids) == len(x.token_logprobs) for x in agent)
        for stored, scored in zip(agent, trainer_logps(model, tokenizer, turns[t.id]), strict=True):
            assert len(scored) == len(stored.token_ids)
            assert max(abs(a - b) for a, b in zip(stored.token_logprobs, scored)) < LOGPROB_TOLERANCE
            checked += len(scored)
    return checked


def test_a_served_rollout_stores_the_policys_own_logprobs_sampled_unfiltered(vllm_server, smollm2, tmp_path):
    from colbench.rollout import turn_seed

    tokenizer, model = smollm2
    url = f"sqlite:///{tmp_path / 'served.db'}"
    offset = vllm_server.log_size()
    colbench(url, "rollout", "--engine", "openai", "--base-url", vllm_server.base_url, "--served-model",
             vllm_server.served_model, "--model", "smollm2", "--tasks", "backend-lite:train", "--limit", "2",
             "--max-new-tokens", "40", "--seed", "3")
    applied = [parsed(p) for p in vllm_server.applied_since(offset)]
    run, dialogues, turns = stored_rollout(url)
    assert run.config["sampling"] == {k: v for k, v in UNFILTERED.items() if k != "temperature"}
    # What vLLM applied, from its own log: every filter off despite the model's generation config, and each turn's
    # own seed.
    assert applied and all({k: a[k] for k in UNFILTERED} == UNFILTERED for a in applied)
    seeds = {turn_seed(3, t.id, k) for t in dialogues for k in range(sum(x.role == "assistant" for x in turns[t.id]))}
    assert {int(a["seed"]) for a in applied} == seeds
    assert tokens_scored_alike(dialogues, turns, model, tokenizer) > 50


def test_sweet_samples_its_candidates_from_the_real_server(vllm_server, smollm2, tmp_path):
    from colbench.official import import_trajectories
    from conftest import write_jsonl
    from officialdata import backend_task, trajectory

    tokenizer, model = smollm2
    url = f"sqlite:///{tmp_path / 'c.db'}"
    db = Database(url)
    records = [trajectory(backend_task(i), turns, reward) for i in range(2) for turns, reward in ((2, 1.0), (1, 0.0))]
    import_trajectories(db, write_jsonl(tmp_path / "data.jsonl", records))
    tiny = ["--device", "cpu", "--lora-rank", "4", "--max-len", "1024", "--batch-size", "2", "--lr", "1e-3"]
    critic = colbench(url, "critic", "fit", "--model", "smollm2", "--epochs", "1", "--heldout", "0", *tiny)
    offset = vllm_server.log_size()
    result = colbench(url, "policy", "fit", "--algo", "sweet", "--model", "smollm2", "--critic", critic["checkpoint"],
                      "--fraction", "1", "--candidates", "3", "--max-new-tokens", "8", "--sampler", "openai",
                      "--base-url", vllm_server.base_url, *tiny)
    assert result["metrics"]["sampler"] == "openai" and result["metrics"]["turns_sampled"] == 6
    applied = [parsed(p) for p in vllm_server.applied_since(offset)]
    assert len(applied) == 6 and all({k: a[k] for k in UNFILTERED} == UNFILTERED for a in applied)
    with db.read() as session:
        candidates = session.exec(select(SweetCandidate).where(SweetCandidate.run_id == result["run_id"])).all()
        dialogues = queries.turns_for(session, [t.id for t in session.exec(select(Trajectory)).all()])
    db.close()
    prompts = {turn.id: prompt for rows in dialogues.values() for turn, prompt in S.agent_prompts(tokenizer, "backend",
                                                                                                   rows)}
    assert len(candidates) == 18
    from colbench.training.modeling import TokenLogProbs

    for candidate in candidates:
        prompt = S.encode_text(tokenizer, prompts[candidate.turn_id])
        ids = torch.tensor([prompt + list(candidate.token_ids)])
        with torch.no_grad():
            values = TokenLogProbs(model)(ids, torch.ones_like(ids), torch.arange(ids.shape[1])[None] >= len(prompt))
        mean = values[0, len(prompt):].mean().item()
        assert candidate.sampler_logp == pytest.approx(mean, abs=LOGPROB_TOLERANCE)


def served_adapters(base_url: str) -> list[str]:
    with urllib.request.urlopen(base_url + "/models", timeout=10) as answer:
        listed = json.load(answer)["data"]
    return [m["id"] for m in listed if m.get("parent")]


def test_online_grpo_loads_each_steps_adapter_and_samples_from_it(vllm_server, smollm2, tmp_path):
    """Two GRPO steps through the server: each step's adapter is loaded, sampled from and unloaded; the step-2
    dialogues' stored log-probs are those of the weights step 1 trained, not the base's; nothing is left loaded."""
    from colbench.model_refs import load_model, resolve_model
    from colbench.store.models import TrainingRun
    from colbench.training.modeling import adapter_disabled, load_adapter

    tokenizer, _ = smollm2
    url = f"sqlite:///{tmp_path / 'online.db'}"
    offset = vllm_server.log_size()
    result = colbench(url, "policy", "fit", "--algo", "grpo", "--tasks", "brevity:train", "--model", "smollm2",
                      "--engine", "openai", "--base-url", vllm_server.base_url, "--steps", "2", "--tasks-per-step",
                      "1", "--group", "4", "--max-new-tokens", "6", "--save-every", "1", "--batch-size", "2",
                      "--lora-rank", "4", "--lr", "5e-3", "--device", "cpu", "--autocast", "off")
    run_id = result["run_id"]
    names = [f"colbench-online-{run_id}-step-{k}" for k in (1, 2)]
    log = vllm_server.log_since(offset)
    asked = re.findall(r"lora_request: LoRARequest\(lora_name='([^']+)'", log)
    assert asked and set(asked) == set(names) and asked.index(names[1]) == asked.count(names[0])
    assert served_adapters(vllm_server.base_url) == []
    db = Database(url)
    with db.read() as session:
        steps = queries.training_steps(session, run_id)
        checkpoints = queries.run_checkpoints(session, run_id)
        step_2 = session.exec(select(Trajectory).where(Trajectory.policy == f"online:{run_id}:step-2")).all()
        turns = queries.turns_for(session, [t.id for t in step_2])
        assert session.get(TrainingRun, run_id).status == "done"
    db.close()
    assert steps[0].values["sampler_ratio"] == pytest.approx(1.0, abs=1e-2)
    trained = load_adapter(load_model(resolve_model("smollm2"), device="cpu", dtype=torch.float32).eval(),
                           checkpoints[0].path, trainable=False)
    for t in step_2:
        [stored] = [x for x in turns[t.id] if x.role == "assistant"]
        [after] = trainer_logps(trained, tokenizer, turns[t.id])
        with adapter_disabled(trained):
            [before] = trainer_logps(trained, tokenizer, turns[t.id])
        assert max(abs(a - b) for a, b in zip(stored.token_logprobs, after)) < LOGPROB_TOLERANCE
        assert max(abs(a - b) for a, b in zip(stored.token_logprobs, before)) > 10 * LOGPROB_TOLERANCE


OFFLINE = """
import json, sys
from colbench.engines import SamplingParams, make_engine

def main():
    with make_engine("vllm", "smollm2", device="cpu", max_model_len=1024) as engine:
        conversation = [{"role": "user", "content": "Write a Python function that adds two numbers."}]
        [generation] = engine.generate([conversation], SamplingParams(temperature=1.0, max_new_tokens=24, n=2, seed=7))
    print(json.dumps({"model_ref": engine.model_ref, "prompt": generation.prompt_text,
                      "samples": [[s.token_ids, s.token_logprobs] for s in generation.samples]}))

if __name__ == "__main__":  # vLLM's engine core starts by spawning
    main()
"""


def test_the_offline_vllm_engine_runs_in_the_cpu_builds_environment(vllm_install, smollm2, tmp_path):
    """--engine vllm (vLLM's LLM class in process) where vLLM imports: the CPU build's own environment. Its float32
    log-probs are the trainer's; the engine's device argument (which every builder passes) is taken."""
    tokenizer, model = smollm2
    script = tmp_path / "offline.py"
    script.write_text(OFFLINE)
    done = subprocess.run([vllm_install.python, str(script)], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, HF_HUB_OFFLINE="1"))
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["model_ref"] == "smollm2"  # float32: the policy itself
    prompt = S.encode_text(tokenizer, out["prompt"])
    for token_ids, logprobs in out["samples"]:
        ids = torch.tensor([prompt + token_ids])
        with torch.no_grad():
            logits = model(ids).logits[0, len(prompt) - 1 : -1].float()
        mine = torch.log_softmax(logits, -1)[torch.arange(len(token_ids)), torch.tensor(token_ids)]
        assert (mine - torch.tensor(logprobs)).abs().max().item() < LOGPROB_TOLERANCE


def test_a_policy_sampled_in_another_dtype_is_stored_under_its_own_name():
    from colbench.engines.vllm import policy_name

    assert policy_name("smollm2", "float32") == "smollm2"
    assert policy_name("ckpt:3", "bfloat16") == "vllm-bfloat16:ckpt:3"


@pytest.fixture(scope="module")
def servable_tiny(servable_tiny_dir):
    """(folder, tokenizer, model): the trainer's view of a tiny full-weight model vLLM can serve."""
    from colbench.model_refs import load_model, load_tokenizer

    folder = str(servable_tiny_dir)
    return servable_tiny_dir, load_tokenizer(folder), load_model(folder, device="cpu", dtype=torch.float32).eval()


def vllm_servers_of(folder) -> list[int]:
    """The process groups of vLLM servers whose command line names ``folder`` (a server, its engine and its
    watchdog share one)."""
    found = set()
    for entry in os.listdir("/proc"):
        try:
            command = open(f"/proc/{entry}/cmdline", "rb").read().replace(b"\0", b" ").decode()
            if "vllm.entrypoints.openai.api_server" in command and str(folder) in command:
                found.add(os.getpgid(int(entry)))
        except (OSError, ValueError):
            continue
    return sorted(found)


def process_group(pgid: int) -> list[int]:
    members = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.getpgid(int(entry)) == pgid:
                members.append(int(entry))
        except ProcessLookupError:
            continue
    return members


def test_vllm_serve_samples_the_models_own_weights_and_stops_its_server(vllm_install, servable_tiny, tmp_path):
    """--engine vllm-serve on a folder of full weights (a full fine-tune's checkpoint): the server it starts samples
    that model (its stored log-probs are the trainer's of those weights, unfiltered), the dialogues are stored under
    the model's own name, as a local engine stores them, and no server is left when the command ends."""
    folder, tokenizer, model = servable_tiny
    url = f"sqlite:///{tmp_path / 'serve.db'}"
    done = subprocess.run(COLBENCH + ["--db", url, "rollout", "--engine", "vllm-serve", "--model", str(folder),
                                      "--tasks", "backend-lite:train", "--limit", "2", "--max-new-tokens", "40",
                                      "--seed", "3", "--json"],
                          capture_output=True, text=True, timeout=600,
                          env=cli_env(COLBENCH_VLLM_PYTHON=vllm_install.python))
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout)["policy"] == f"hf:{folder}"
    assert vllm_servers_of(folder) == []
    run, dialogues, turns = stored_rollout(url)
    assert run.config["sampling"] == {k: v for k, v in UNFILTERED.items() if k != "temperature"}
    assert run.config["arithmetic"]["vllm"].startswith("vLLM")
    assert tokens_scored_alike(dialogues, turns, model, tokenizer) > 50


def answers_health(folder) -> bool:
    """Whether the vLLM server of ``folder`` answers /health (its port read from its command line)."""
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = open(f"/proc/{entry}/cmdline", "rb").read().decode().split("\0")
        except (OSError, ValueError):
            continue
        if "vllm.entrypoints.openai.api_server" in argv and str(folder) in argv:
            try:
                port = argv[argv.index("--port", argv.index("vllm.entrypoints.openai.api_server")) + 1]
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as answer:
                    return answer.status == 200
            except (OSError, ValueError):
                return False
    return False


def engine_started(pgid: int) -> bool:
    """Whether vLLM's engine process (VLLM::EngineCore) runs in the process group ``pgid``."""
    for pid in process_group(pgid):
        try:
            if "EngineCore" in open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace"):
                return True
        except OSError:
            continue
    return False


@pytest.mark.parametrize("when", ["starting", "serving"])
def test_a_command_killed_mid_rollout_leaves_no_vllm_server(when, vllm_install, servable_tiny, tmp_path):
    """kill -9 of a command whose vllm-serve engine is starting its server, or serving: the server and its engine
    processes go too (engines/watchdog.py), rather than holding the cores and memory. "starting" is the case the
    kernel's parent-death signal on the server missed: vLLM loses a SIGTERM that lands while its engine starts."""
    import signal
    import time

    folder, _, _ = servable_tiny
    command = subprocess.Popen(COLBENCH + ["--db", f"sqlite:///{tmp_path / 'killed.db'}", "rollout", "--engine",
                                           "vllm-serve", "--model", str(folder), "--tasks", "backend-lite:train",
                                           "--limit", "40", "-k", "4", "--max-new-tokens", "200"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env=cli_env(COLBENCH_VLLM_PYTHON=vllm_install.python))
    try:
        deadline = time.monotonic() + 300
        while not (servers := vllm_servers_of(folder)) and command.poll() is None and time.monotonic() < deadline:
            time.sleep(1)
        assert servers, "no server started"
        [server] = servers
        while not engine_started(server) and time.monotonic() < deadline:
            time.sleep(0.2)
        if when == "serving":
            while not answers_health(folder) and time.monotonic() < deadline:
                time.sleep(1)
            assert answers_health(folder)
        else:
            assert engine_started(server) and not answers_health(folder)
        command.send_signal(signal.SIGKILL)
        command.wait(10)
        deadline = time.monotonic() + 90
        while process_group(server) and time.monotonic() < deadline:
            time.sleep(1)
        assert process_group(server) == []
    finally:
        command.kill()
        for pid in vllm_servers_of(folder):
            os.killpg(pid, signal.SIGKILL)
