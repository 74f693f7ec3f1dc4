"""The checks of scripts/gpu_check.sh (run that): colbench's CUDA paths on the tests' tiny Llama.

1. hf engine: HFEngine samples on the GPU with bf16 weights; the log-probs it returns for its
   own samples agree with a float32 recomputation of the same weights.
2. critic: one epoch of fit_critic in bf16 on a SQLite store of graded trajectories; the
   checkpoint reloads and scores.
3. sweet: one SWEET-RL step (hf sampler, that critic ranking) in bf16; pairs and a finite loss.
4. fsdp2: fully_shard over every visible GPU (nccl), bf16 mixed precision, a few AdamW steps
   on a fixed batch, then the full state dict gathered on rank 0 loads into a fresh model.
5. grpo: one online GRPO step in bf16 on the tests' plugin family 'brevity' (no sandbox needed):
   the model being trained rolls out 2 tasks x 2 dialogues, stored with the sampler's log-probs,
   then one PPO-clipped update; a finite loss, the ratio to the sampler near 1, a checkpoint.

Without CUDA every check prints SKIP, unless ``--device cpu`` runs them on the CPU.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import socket
import sys
import tempfile
import traceback
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))  # the tests' tiny model and official-format tasks
sys.path.insert(0, str(REPO / "tests" / "plugin_package"))  # its brevity family, for the grpo check
from officialdata import asked_then_answered as record, backend_task  # noqa: E402
from plugins.models import TINY_CONFIG  # noqa: E402

# bf16 keeps 8 bits of mantissa: the tiny model (initializer_range 0.5, logits up to ~20) loses
# ~0.1 nat per token against float32 through its two bf16 layers (measured on a CPU). A sample
# whose log-probs were read at the wrong position would be off by several nats (mean |log p| ~4).
ENGINE_MEAN_TOLERANCE = 0.25  # nat, mean |Δ| over every sampled token
ENGINE_MAX_TOLERANCE = 2.0  # nat, any one token
FSDP_LOGIT_TOLERANCE = 0.05  # the gathered weights, computing as the MixedPrecisionPolicy does

GOOD = "Is the weight in kilograms, and is express 1.5 times the price?"
BAD = "I do not know what to do here, sorry."

failed: list[str] = []


def report(status: str, name: str, figures: str) -> None:
    print(f"{status} {name}: {figures}", flush=True)
    if status == "FAIL":
        failed.append(name)


def run_check(name: str, check, *args) -> None:
    """A check returns (passed, figures); an exception FAILs it with its one-line message."""
    try:
        passed, figures = check(*args)
    except Exception as exc:  # noqa: BLE001 - every failure is reported, then the next check runs
        traceback.print_exc()
        passed, figures = False, f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
    report("PASS" if passed else "FAIL", name, figures)


def finite(*values) -> bool:
    return all(v is not None and math.isfinite(v) for v in values)


# ---------------------------------------------------------------- the tiny model and the store


def tokenizer_dir() -> Path:
    carried = REPO / ".gpu" / "smol-tokenizer"
    if carried.is_dir():
        return carried
    from colbench.model_cache import embedded_tokenizer_dir

    return embedded_tokenizer_dir()


def tiny_config(tokenizer):
    from transformers import LlamaConfig

    return LlamaConfig(vocab_size=len(tokenizer), bos_token_id=tokenizer.bos_token_id,
                       eos_token_id=tokenizer.eos_token_id,
                       pad_token_id=tokenizer.pad_token_id, **TINY_CONFIG)


def tiny_model_dir(work: Path) -> Path:
    """The tests' tiny random Llama (fixed seed, float32) with SmolLM2's tokenizer, as a model folder."""
    from transformers import AutoTokenizer, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir())
    torch.manual_seed(0)
    path = work / "tiny-llama"
    LlamaForCausalLM(tiny_config(tokenizer)).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def seeded_store(work: Path):
    """A SQLite store of 4 tasks, each with a success asking GOOD and a failure asking BAD: 4 critic pairs."""
    from colbench.official import import_trajectories
    from colbench.store.db import Database

    db = Database(f"sqlite:///{work / 'colbench.db'}")
    records = [r for i in range(4) for r in (record(backend_task(i), GOOD, 1.0), record(backend_task(i), BAD, 0.0))]
    path = work / "graded.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    import_trajectories(db, path)
    return db


# ---------------------------------------------------------------- 1. the hf engine


def check_engine(model_dir: Path, device: str):
    import copy

    from colbench.engines.base import SamplingParams
    from colbench.engines.hf import HFEngine

    engine = HFEngine(str(model_dir), device=device, max_batch_size=8)  # the default dtype: bf16 on a GPU
    dtype = next(engine.model.parameters()).dtype
    questions = ["What unit is the weight in?", "Write a function that adds two numbers.", "Hello"]
    prompts = [
        engine.tokenizer.apply_chat_template(
            [{"role": "user", "content": q}], tokenize=False, add_generation_prompt=True
        )
        for q in questions
    ]
    generations = engine.generate_from_prompts(prompts, SamplingParams(temperature=1.0, max_new_tokens=24, n=2, seed=0))
    samples = [(g.prompt_text, s) for g in generations for s in g.samples]
    if not all(s.token_ids and len(s.token_ids) == len(s.token_logprobs) for _, s in samples):
        return False, "a sample came back without token ids, or with a log-prob count that differs from them"
    # float32 recomputation: the very same (bf16-rounded) weights, upcast, teacher-forced.
    exact = HFEngine(model=copy.deepcopy(engine.model).float(), tokenizer=engine.tokenizer)
    reference = exact.logprobs([p for p, _ in samples], [s.token_ids for _, s in samples])
    own = engine.logprobs([p for p, _ in samples], [s.token_ids for _, s in samples])  # its own dtype, no KV cache
    pairs = [
        (a, b, c) for (_, s), ref, tf in zip(samples, reference, own) for a, b, c in zip(s.token_logprobs, ref, tf)
    ]
    diff = [abs(a - b) for a, b, _ in pairs]
    mean, worst = sum(diff) / len(diff), max(diff)
    own_worst = max(abs(a - c) for a, _, c in pairs)
    sampled_on = str(engine.device)
    engine.close()
    passed = finite(mean, worst) and mean <= ENGINE_MEAN_TOLERANCE and worst <= ENGINE_MAX_TOLERANCE
    return passed, (
        f"{len(samples)} samples, {len(diff)} tokens on {sampled_on} ({str(dtype).removeprefix('torch.')}); "
        f"sampled log-probs vs float32 recomputation: mean |Δ| {mean:.4f}, max {worst:.4f} nat "
        f"(tolerance {ENGINE_MEAN_TOLERANCE}, {ENGINE_MAX_TOLERANCE}); vs its own teacher forcing: max {own_worst:.4f}"
    )


# ---------------------------------------------------------------- 2. a critic step, 3. a SWEET step


def check_critic(db, model_dir: Path, device: str, state: dict):
    from colbench.training import data as D
    from colbench.training.critic import CriticConfig, fit_critic
    from colbench.training.modeling import unwrap
    from colbench.training.scoring import CriticModel

    config = CriticConfig(epochs=1, batch_size=4, lr=3e-3, lora_rank=4, heldout_fraction=0.0, device=device,
                          max_len=512)
    result = fit_critic(db, config, base_model=str(model_dir))
    state["critic"] = result.checkpoint_id
    loss = result.metrics.get("train_loss")
    files = sorted(p.name for p in Path(result.path).iterdir())
    critic = CriticModel.from_checkpoint(db, f"ckpt:{result.checkpoint_id}", device=device)
    from sqlmodel import select

    from colbench.store.models import Trajectory

    with db.read() as session:
        stored = list(session.exec(select(Trajectory.id)).all())
    examples = D.load_examples(db, critic.tokenizer, stored, max_len=512)
    advantages = [a for turns in critic.turn_advantages(list(examples.values())) for a in turns if a is not None]
    weights = next(unwrap(critic.model).parameters())
    passed = finite(loss, *advantages) and bool(advantages) and "adapter_model.safetensors" in files
    return (
        passed,
        (
            f"ckpt:{result.checkpoint_id}, {result.metrics['steps']} step(s), loss {loss:.4f} (log 2 = 0.6931),"
            f" {result.metrics['train_seconds']:.2f} s; reloaded on"
            f" {weights.device} ({str(weights.dtype).removeprefix('torch.')}): {len(advantages)} turn advantages, |A|"
            f" max {max(map(abs, advantages)):.4f}; files {', '.join(files)}"
        ),
    )


def check_sweet(db, model_dir: Path, device: str, state: dict):
    from colbench.training.config import PolicyConfig
    from colbench.training.policy import fit_policy

    if state.get("critic") is None:
        return False, "no critic checkpoint (check 2 failed)"
    config = PolicyConfig(fraction=0.5, candidates=4, pairs_per_turn=2, max_new_tokens=8, sample_batch_size=8,
                          lora_rank=4,
                          device=device, sampler="hf", lr=1e-3, epochs=1, seed=1)
    result = fit_policy(db, config, "sweet", base_model=str(model_dir), critic_checkpoint=state["critic"])
    m = result.metrics
    passed = m.get("pairs", 0) > 0 and finite(m.get("train_loss")) and result.checkpoint_id is not None
    return (
        passed,
        (
            f"ckpt:{result.checkpoint_id}, sampler {m.get('sampler')}, {m.get('turns_sampled')} turns x"
            f" {config.candidates} candidates, {m.get('pairs')} pairs, {m.get('steps')} step(s), loss"
            f" {m.get('train_loss'):.4f} (DPO {m.get('train_dpo_loss'):.4f}, NLL {m.get('train_nll'):.4f}), score"
            f" spread {m.get('score_spread') or 0:.4f}, {m.get('train_seconds'):.2f} s"
        ),
    )


def check_grpo(db, model_dir: Path, device: str):
    from colbench.store import queries
    from colbench.training.config import PolicyConfig
    from colbench.training.policy import fit_policy

    config = PolicyConfig(tasks="brevity:train", steps=1, tasks_per_step=2, group=2, max_new_tokens=4, lora_rank=4,
                          device=device, lr=1e-3, seed=1)
    result = fit_policy(db, config, "grpo", base_model=str(model_dir))
    with db.read() as session:
        step = queries.training_steps(session, result.run_id)[0].values
    # bf16 sampling and bf16 training read the same weights with different kernels: the ratio is near 1, not 1.
    passed = (result.metrics.get("dialogues") == 4 and finite(step.get("loss")) and abs(step["sampler_ratio"] - 1) < 0.1
              and result.checkpoint_id is not None)
    return passed, (
        f"ckpt:{result.checkpoint_id}, {result.metrics.get('dialogues')} dialogues, reward {step['reward']:.3f},"
        f" loss {step['loss']:.4f}, ratio to the sampler {step['sampler_ratio']:.4f}, KL {step.get('kl', 0):.4f},"
        f" rollout {step['rollout_s']:.2f} s, update {step['train_s']:.2f} s"
    )


# ---------------------------------------------------------------- 4. FSDP2


def fsdp_worker(rank: int, world: int, port: int, config: dict, out: str) -> None:
    """One rank: shard the tiny Llama (each decoder layer, then the root), train a few steps, gather."""
    from datetime import timedelta

    import torch.distributed as dist
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from transformers import LlamaConfig, LlamaForCausalLM

    cuda = torch.cuda.is_available() and config.pop("_device") == "cuda"
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("nccl" if cuda else "gloo", rank=rank, world_size=world, timeout=timedelta(seconds=120))
    try:
        device = torch.device("cuda", rank) if cuda else torch.device("cpu")
        if cuda:
            torch.cuda.set_device(device)
        mesh = init_device_mesh(device.type, (world,))
        llama = LlamaConfig(**config)
        torch.manual_seed(0)
        model = LlamaForCausalLM(llama).to(device)
        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        for layer in model.model.layers:
            fully_shard(layer, mesh=mesh, mp_policy=policy)
        fully_shard(model, mesh=mesh, mp_policy=policy)
        held = sum(p.to_local().numel() * p.to_local().element_size() for p in model.parameters())
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
        ids = torch.randint(0, llama.vocab_size, (4, 64), generator=torch.Generator().manual_seed(0)).to(device)
        losses = []
        for _ in range(6):
            loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            losses.append(float(loss.detach()))
        with torch.no_grad():
            logits = model(input_ids=ids).logits.float()
        full = get_model_state_dict(
            model, options=StateDictOptions(full_state_dict=True, cpu_offload=True)
        )  # every rank calls it
        result = {"rank": rank, "held_bytes": held, "losses": losses}
        if rank == 0:
            fresh = LlamaForCausalLM(llama)
            fresh.load_state_dict(full, strict=True)
            fresh.to(device)
            with torch.no_grad():
                exact = fresh(input_ids=ids).logits.float()
                for (
                    p
                ) in fresh.parameters():  # bf16 parameters, float32 buffers: what MixedPrecisionPolicy computes with
                    p.data = p.data.to(torch.bfloat16)
                mixed = fresh(input_ids=ids).logits.float()
            result |= {
                "tensors": len(full), "full_bytes": sum(t.numel() * t.element_size() for t in full.values()),
                "on_cpu": all(t.device.type == "cpu" for t in full.values()),
                "logit_diff": float((mixed - logits).abs().max()), "logit_scale": float(logits.abs().max()),
                "fp32_logit_diff": float((exact - logits).abs().max()),
                "argmax_agree": float((mixed.argmax(-1) == logits.argmax(-1)).float().mean()),
            }
        Path(out, f"rank{rank}.json").write_text(json.dumps(result))
    finally:
        dist.destroy_process_group()


def check_fsdp(tokenizer_config: dict, device: str):
    import torch.multiprocessing as mp

    world = torch.cuda.device_count() if device == "cuda" else 2  # two gloo processes to debug on a CPU
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as out:
        mp.spawn(fsdp_worker, args=(world, port, tokenizer_config | {"_device": device}, out), nprocs=world, join=True)
        ranks = [json.loads(Path(out, f"rank{r}.json").read_text()) for r in range(world)]
    first = ranks[0]
    losses = first["losses"]
    decreasing = finite(*losses) and losses[-1] < losses[0]
    same = first["logit_diff"] <= FSDP_LOGIT_TOLERANCE and first["argmax_agree"] == 1.0
    passed = decreasing and same and first["on_cpu"]
    held = ", ".join(f"rank {r['rank']} {r['held_bytes'] / 2**20:.2f} MiB" for r in ranks)
    return (
        passed,
        (
            f"world {world} ({'nccl' if device == 'cuda' else 'gloo'}), loss {' > '.join(f'{x:.3f}' for x in losses)};"
            f" parameters held: {held} of {first['full_bytes'] / 2**20:.2f} MiB gathered on rank 0"
            f" ({first['tensors']} tensors, cpu {first['on_cpu']}); fresh model's logits vs the sharded model's: max"
            f" |Δ| {first['logit_diff']:.4f} in bf16 (tolerance {FSDP_LOGIT_TOLERANCE}; logits up to"
            f" {first['logit_scale']:.1f}), {first['fp32_logit_diff']:.4f} in float32, argmax agreement"
            f" {first['argmax_agree']:.3f}"
        ),
    )


# ----------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                        help="cpu: run the checks on the CPU, to debug this script")
    parser.add_argument("--only", choices=("grpo",), help="grpo: only check 5 (the suite runs it on the CPU)")
    args = parser.parse_args()
    device = args.device
    names = ["1 hf engine", "2 critic", "3 sweet", "4 fsdp2", "5 grpo"]
    if device == "cuda" and not torch.cuda.is_available():
        for name in names:
            report("SKIP", name, "no CUDA device (bash scripts/gpu_check.sh --device cpu runs the checks on the CPU)")
        return 0
    where = torch.cuda.get_device_name(0) + f" x{torch.cuda.device_count()}" if device == "cuda" else "CPU"
    print(f"gpu_check: {where}, torch {torch.__version__}", flush=True)
    from transformers import AutoTokenizer

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        model_dir = tiny_model_dir(work)
        if args.only == "grpo":
            db = seeded_store(work)
            run_check(names[4], check_grpo, db, model_dir, device)
            db.close()
            print(f"gpu_check: {len(failed)} failed", flush=True)
            return 1 if failed else 0
        run_check(names[0], check_engine, model_dir, device)
        state: dict = {}
        db = seeded_store(work)
        run_check(names[1], check_critic, db, model_dir, device, state)
        run_check(names[2], check_sweet, db, model_dir, device, state)
        run_check(names[4], check_grpo, db, model_dir, device)
        db.close()
        config = tiny_config(AutoTokenizer.from_pretrained(tokenizer_dir())).to_dict()
        run_check(names[3], check_fsdp, config, device)
    print(f"gpu_check: {len(failed)} failed" + (f" ({', '.join(failed)})" if failed else ""), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
