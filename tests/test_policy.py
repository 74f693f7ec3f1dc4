"""Policy training on a tiny random Llama with the real SmolLM2 tokenizer: what the policy
reads and is trained on (masks), the DPO + NLL loss as the trainer uses it, adapter-only
gradients and a frozen reference, checkpoints (reload, export, ckpt:<id> in an engine),
sweet (stored candidates, scores and pairs; a rerun resumes), rft, mtdpo, and the
whole pipeline through the CLI."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from sqlmodel import select

from colbench.official import import_trajectories
from colbench.store import queries
from colbench.store.db import Database
from colbench.store.models import (
    Checkpoint,
    Lineage,
    SweetCandidate,
    SweetPair,
    TrainingRun,
    TrainingStep,
    Trajectory,
    Turn
)
from colbench.training import data as D
from colbench.training import mtdpo, rft, sweet
from colbench.training.checkpoints import export_checkpoint
from colbench.training.policy import fit_policy
from colbench.training.trainer import NothingToTrain, PolicyConfig
from colbench.training import sequences as S
from colbench.training.losses import policy_dpo_loss, sft_loss, turn_sums
from colbench.training.modeling import TokenLogProbs, adapter_disabled, attach_lora, load_adapter
from conftest import command_line, write_jsonl
from officialdata import backend_task, trajectory

DIALOGUE = [
    {"role": "user", "content": "Write a function that adds two numbers."},
    {"role": "assistant", "content": "Should it accept floats?"},
    {"role": "user", "content": "Yes, floats too."},
    {"role": "assistant", "content": "I WANT TO ANSWER:\ndef add(a, b):\n    return a + b"},
]
SMALL = dict(batch_size=4, max_len=192, lora_rank=4, device="cpu", lr=1e-3)


def tiny(tiny_model_dir):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)


def logps_of(model, tokenizer, seqs):
    ids, mask, turns = D.collate(seqs, tokenizer.pad_token_id)
    return TokenLogProbs(model)(ids, mask, turns >= 0), turns


# ---------------------------------------------------------------- what the policy reads (see also test_sequences.py)


def stored_agent_turns(tokenizer, dialogue=DIALOGUE):
    from test_sequences import stored_turns

    return S.agent_turns(tokenizer, "backend", stored_turns(tokenizer, dialogue))


def test_a_packed_trajectory_gives_each_turn_the_logps_it_has_on_its_own_prompt(tiny_model_dir, tokenizer):
    """mtdpo's and rft's rows: a turn continued in a shared row is scored as after its own prompt alone."""
    model = tiny(tiny_model_dir).eval()
    agent = stored_agent_turns(tokenizer)
    (row,) = S.pack(agent)
    alone = [S.turn_row([], t.prompt_ids, t.completion_ids, None, turn=k) for k, t in enumerate(agent)]
    with torch.no_grad():
        token_logps, turn_ids = logps_of(model, tokenizer, [row])
        per_turn = turn_sums(token_logps, turn_ids)[0][0]
        separate = [float(logps_of(model, tokenizer, [r])[0].sum()) for r in alone]
    assert per_turn.tolist() == pytest.approx(separate, abs=1e-4)


# ---------------------------------------------------------------- the loss


def test_dpo_plus_nll_by_hand_with_masks():
    # Two pairs. Rows 0 and 4 are pair 0's chosen side (two rows of one trajectory, as mtdpo
    # packs it), row 1 pair 1's chosen; rows 2, 3 the rejected sides. -1 marks tokens outside
    # agent turns, whose (large) values must not count.
    logps = torch.tensor([
        [-9.0, -1.0, -2.0, -50.0, -9.0],
        [-9.0, -9.0, -1.5, -0.5, -50.0],
        [-9.0, -2.0, -2.0, -50.0, -1.0],
        [-9.0, -9.0, -3.0, -1.0, -50.0],
        [-9.0, -50.0, -9.0, -9.0, -0.5],
    ])
    turns = torch.tensor([[-1, 0, 0, -1, -1], [-1, -1, 0, 0, -1], [-1, 0, 0, -1, 1], [-1, -1, 0, 0, -1],
                          [-1, -1, -1, -1, 1]])
    owner = torch.tensor([0, 1, 2, 3, 0])
    ref_chosen, ref_rejected = torch.tensor([-4.0, -2.5]), torch.tensor([-4.5, -3.0])
    loss, stats = policy_dpo_loss(logps, turns, owner, ref_chosen, ref_rejected, beta=0.5, nll_weight=0.1)
    # chosen sums: -3.5 (rows 0 and 4), -2.0; rejected: -5.0, -4.0
    m1 = (-3.5 - -4.0) - (-5.0 - -4.5)  # 1.0
    m2 = (-2.0 - -2.5) - (-4.0 - -3.0)  # 1.5
    dpo = (
        -torch.nn.functional.logsigmoid(torch.tensor(0.5 * m1)) - torch.nn.functional.logsigmoid(torch.tensor(0.5 * m2))
    ) / 2
    nll = (1.0 + 2.0 + 0.5 + 1.5 + 0.5) / 5  # mean over the chosen rows' 5 agent tokens
    assert float(loss) == pytest.approx(float(dpo) + 0.1 * nll, abs=1e-6)
    assert stats["nll"] == pytest.approx(nll) and stats["reward_margin"] == pytest.approx(0.5 * (m1 + m2) / 2)
    assert stats["reward_accuracy"] == 1.0
    # Swapping the sides turns every margin negative: the loss tells chosen from rejected.
    swapped, swapped_stats = policy_dpo_loss(
        logps, turns, torch.tensor([2, 3, 0, 1, 2]), ref_rejected, ref_chosen, beta=0.5, nll_weight=0.0
    )
    assert swapped_stats["reward_accuracy"] == 0.0 and float(swapped) > float(dpo)
    sft, _ = sft_loss(logps[[0, 1, 4]], turns[[0, 1, 4]])
    assert float(sft) == pytest.approx(nll)


# ---------------------------------------------------------------- the model


def toy_pair(tokenizer):
    prompt = S.encode_text(tokenizer,
                           tokenizer.apply_chat_template(S.conversation("backend", DIALOGUE[:3]), tokenize=False,
                                                         add_generation_prompt=True))
    good = tokenizer("I WANT TO ANSWER: def add(a, b): return a + b",
                     add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    bad = tokenizer("I do not know.", add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    return S.turn_row([], prompt, good, None), S.turn_row([], prompt, bad, None)


def test_one_step_moves_the_margin_only_the_adapter_learns_reference_frozen_and_reload(tiny_model_dir, tokenizer,
                                                                                       tmp_path):
    torch.manual_seed(0)
    model = attach_lora(tiny(tiny_model_dir), rank=4, alpha=8)
    model.train()
    chosen, rejected = toy_pair(tokenizer)
    with torch.no_grad(), adapter_disabled(model):
        ref, turns = logps_of(model, tokenizer, [chosen, rejected])
    ref_seq = (ref * (turns >= 0)).sum(-1)
    params = [p for p in model.parameters() if p.requires_grad]
    assert params and all("lora_" in n for n, p in model.named_parameters() if p.requires_grad)
    optimizer = torch.optim.AdamW(params, lr=1e-2)

    logps, turns = logps_of(model, tokenizer, [chosen, rejected])
    loss, stats = policy_dpo_loss(
        logps, turns, torch.tensor([0, 1]), ref_seq[:1], ref_seq[1:], beta=0.1, nll_weight=0.01
    )
    assert stats["reward_margin"] == pytest.approx(0.0, abs=1e-6)  # B = 0: the policy is the reference
    loss.backward()
    for name, p in model.named_parameters():
        if "lora_" in name:
            assert p.grad is not None
        else:
            assert p.grad is None, name
    optimizer.step()
    optimizer.zero_grad()

    with torch.no_grad():
        after, _ = logps_of(model, tokenizer, [chosen, rejected])
        _, after_stats = policy_dpo_loss(after, turns, torch.tensor([0, 1]), ref_seq[:1], ref_seq[1:])
        with adapter_disabled(model):
            ref_after, _ = logps_of(model, tokenizer, [chosen, rejected])
    assert after_stats["reward_margin"] > 0  # chosen up relative to rejected
    assert torch.equal(ref_after, ref)  # the reference is untouched by the step

    from colbench.training.checkpoints import save_model

    adapter, _ = save_model(model, tokenizer, tmp_path / "ckpt")
    assert adapter and (tmp_path / "ckpt" / "adapter_config.json").is_file()
    reloaded = load_adapter(tiny(tiny_model_dir), str(tmp_path / "ckpt"), trainable=False).eval()
    model.eval()
    with torch.no_grad():
        a, _ = logps_of(model, tokenizer, [chosen, rejected])
        b, _ = logps_of(reloaded, tokenizer, [chosen, rejected])
    assert torch.equal(a, b)


# ---------------------------------------------------------------- runs in the store


def import_records(db, tmp_path, name, records):
    return import_trajectories(db, write_jsonl(tmp_path / f"{name}.jsonl", records))


def small_batch():
    records = []
    for i in range(2):  # per task: a correct one (2 agent turns), a partial one (1), a failure (3)
        task = backend_task(i)
        records += [trajectory(task, 2, 1.0), trajectory(task, 1, 0.3), trajectory(task, 3, 0.0)]
    return records


@pytest.fixture(scope="module")
def trained(tiny_model_dir, tmp_path_factory):
    """A store with graded trajectories and a tiny critic (shared by the sweet tests)."""
    from colbench.training.critic import CriticConfig, fit_critic

    tmp_path = tmp_path_factory.mktemp("policy-store")
    db = Database(f"sqlite:///{tmp_path / 'colbench.db'}")
    import_records(db, tmp_path, "first", small_batch())
    critic = fit_critic(db,
                        CriticConfig(epochs=1, batch_size=4, max_len=160, heldout_fraction=0.0, lora_rank=4,
                                     device="cpu", lr=1e-3), base_model=str(tiny_model_dir))
    return db, tmp_path, critic.checkpoint_id


SWEET = dict(SMALL, fraction=1.0, candidates=4, pairs_per_turn=2, max_new_tokens=6, sample_batch_size=8)


def test_sweet_stores_candidates_scores_pairs_and_a_rerun_resumes(trained, tiny_model_dir):
    db, tmp_path, critic_id = trained
    progress = []
    result = fit_policy(db, PolicyConfig(**SWEET), "sweet", base_model=str(tiny_model_dir),
                        critic_checkpoint=f"ckpt:{critic_id}",
                          on_progress=lambda *a: progress.append(a))
    with db.read() as session:
        run = session.get(TrainingRun, result.run_id)
        checkpoint = session.get(Checkpoint, result.checkpoint_id)
        candidates = session.exec(select(SweetCandidate)).all()
        pairs = session.exec(select(SweetPair).where(SweetPair.run_id == run.id)).all()
        agent_turns = session.exec(select(Turn).where(Turn.role == "assistant")).all()
        lineage = session.exec(select(Lineage).where(Lineage.run_id == run.id)).all()
        max_seq = max(t.graded_seq for t in session.exec(select(Trajectory)))
    assert run.kind == "policy:sweet" and run.status == "done" and run.data_watermark == max_seq
    assert run.config["critic_checkpoint_id"] == critic_id and run.config["candidates"] == 4
    assert (
        checkpoint.kind == "policy"
        and checkpoint.adapter
        and (tmp_path / "checkpoints" / f"policy-{run.id}-{db.store_id[:8]}" / "adapter_config.json").is_file()
    )
    # Every agent turn got 4 scored candidates (fraction 1: every trajectory, every turn).
    assert len(agent_turns) == 12 and len(candidates) == 48
    by_turn = {}
    for c in candidates:
        by_turn.setdefault(c.turn_id, []).append(c)
        assert c.run_id == run.id and c.critic_checkpoint_id == critic_id and 1 <= len(c.token_ids) <= 6
    assert set(by_turn) == {t.id for t in agent_turns}
    # Pairs: chosen from the top half, rejected from the bottom half, at most 2 per turn.
    for p in pairs:
        ranked = sorted(by_turn[p.turn_id], key=lambda c: -c.score)
        assert p.chosen_id in {c.id for c in ranked[:2]} and p.rejected_id in {c.id for c in ranked[2:]}
    assert 0 < len(pairs) <= 24 and run.metrics["pairs"] == len(pairs)
    assert {(l.trajectory_id, l.turn_id) for l in lineage} == {
        (session_t.trajectory_id, session_t.id)
        for session_t in agent_turns
        if session_t.id in {p.turn_id for p in pairs}
    }
    assert run.metrics["turns_sampled"] == 12 and run.metrics["turns_reused"] == 0
    for key in ("train_loss", "train_dpo_loss", "train_nll", "train_reward_margin", "steps"):
        assert key in run.metrics
    assert any(a[0] == "sample" for a in progress) and progress[-1][0] == "train"
    with db.read() as session:  # every optimiser step's figures, stored as it trained
        steps = session.exec(
            select(TrainingStep).where(TrainingStep.run_id == run.id).order_by(TrainingStep.step)
        ).all()
    assert [s.step for s in steps] == list(range(1, run.metrics["steps"] + 1))
    assert all({"loss", "reward_margin", "reward_accuracy", "nll", "lr", "grad_norm"} <= s.values.keys() for s in steps)
    card = (Path(checkpoint.path) / "README.md").read_text()
    assert "SWEET-RL: turn-level DPO" in card and f"train:{run.id}" in card and "trajectories of `rollout:" in card

    # A rerun (same command) reuses every candidate: nothing is sampled again, the pairs are the same.
    again = fit_policy(db, PolicyConfig(**SWEET), "sweet", base_model=str(tiny_model_dir), critic_checkpoint=critic_id)
    assert again.metrics["turns_sampled"] == 0 and again.metrics["turns_reused"] == 12
    with db.read() as session:
        assert len(session.exec(select(SweetCandidate)).all()) == 48
        pairs2 = session.exec(select(SweetPair).where(SweetPair.run_id == again.run_id)).all()
    assert sorted((p.chosen_id, p.rejected_id) for p in pairs2) == sorted((p.chosen_id, p.rejected_id) for p in pairs)
    from colbench.runs import remove

    blocked = remove(db, f"train:{run.id}", dry_run=True).blocked_by  # its candidates trained the rerun too
    assert f"train:{again.run_id} trained on its SWEET candidates" in blocked

    # A run that stopped half-way: only the turns without stored candidates are sampled.
    from sqlalchemy import delete

    lost = sorted(by_turn)[:3]
    with db.write() as session:
        session.connection().execute(delete(SweetPair).where(SweetPair.turn_id.in_(lost)))
        session.connection().execute(delete(SweetCandidate).where(SweetCandidate.turn_id.in_(lost)))
    third = fit_policy(db, PolicyConfig(**SWEET), "sweet", base_model=str(tiny_model_dir), critic_checkpoint=critic_id)
    assert third.metrics["turns_sampled"] == 3 and third.metrics["turns_reused"] == 9
    with db.read() as session:
        assert len(session.exec(select(SweetCandidate)).all()) == 48

    # Continuing the policy: nothing new was graded since its run, so nothing to train and no run.
    with pytest.raises(NothingToTrain):
        fit_policy(db, PolicyConfig(**SWEET), "sweet", critic_checkpoint=critic_id,
                   parent_checkpoint=result.checkpoint_id)


def test_sweet_candidates_from_ct2_are_the_policys_own_samples(trained, tiny_model_dir, tokenizer):
    """The ct2 sampler draws from the policy as training starts: each candidate's stored sampler
    log-prob is what the loaded model itself gives those tokens; hf and ct2 keep separate candidates."""
    from colbench.training.critic import CriticConfig, fit_critic

    db, _, _ = trained
    # A critic that reads whole dialogues: a cut prompt has its sampler log-probs recomputed by hf.
    critic = fit_critic(db,
                        CriticConfig(epochs=1, batch_size=4, max_len=2048, heldout_fraction=0.0, lora_rank=4,
                                     device="cpu", lr=1e-3),
                        base_model=str(tiny_model_dir))
    runs = {s: fit_policy(db, PolicyConfig(**SWEET, sampler=s), "sweet", base_model=str(tiny_model_dir),
                          critic_checkpoint=critic.checkpoint_id)
            for s in ("ct2", "hf")}
    assert {s: r.metrics["sampler"] for s, r in runs.items()} == {"ct2": "ct2", "hf": "hf"}
    assert runs["ct2"].metrics["sampling_key"] != runs["hf"].metrics["sampling_key"]
    assert runs["ct2"].metrics["turns_sampled"] == runs["hf"].metrics["turns_sampled"] == 12
    with db.read() as session:
        key = runs["ct2"].metrics["sampling_key"]
        candidates = session.exec(select(SweetCandidate).where(SweetCandidate.sampling_key == key)).all()
    jobs, _, _ = sweet.select_turns(db, PolicyConfig(**SWEET), None, tokenizer)
    prompts = {j.turn_id: j.prompt for j in jobs}
    assert len(candidates) == 48
    model = tiny(tiny_model_dir).eval()
    for c in candidates[::4]:
        prompt = S.encode_text(tokenizer, prompts[c.turn_id])
        ids = torch.tensor([prompt + list(c.token_ids)])
        target = torch.zeros_like(ids, dtype=torch.bool)
        target[0, len(prompt):] = True
        with torch.no_grad():
            own = TokenLogProbs(model)(ids, torch.ones_like(ids), target)[target].mean().item()
        assert abs(own - c.sampler_logp) < 1e-3, (own, c.sampler_logp)


def test_sweet_without_a_critic_or_with_a_policy_as_critic_is_refused(trained, tiny_model_dir):
    db, _, critic_id = trained
    with pytest.raises(ValueError, match="critic"):
        fit_policy(db, PolicyConfig(**SWEET), "sweet", base_model=str(tiny_model_dir))


def test_rft_trains_only_on_successful_trajectories_agent_tokens_only(trained, tiny_model_dir, tokenizer):
    db, _, _ = trained
    items, info, _ = rft.items(db, tokenizer, PolicyConfig(**SMALL), None)
    with db.read() as session:
        rows = {t.id: t for t in session.exec(select(Trajectory))}
        turns = queries.turns_for(session, list(rows))  # prompts whole again
    successful = {i for i, t in rows.items() if t.success}
    assert {it.source for it in items} == successful and len(successful) == 2 and info["new_trajectories"] == 6
    for item in items:
        # Each turn is read after exactly its stored prompt (the record's `input`) and trains its output.
        agent = [t for t in turns[item.source] if t.role == "assistant"]
        for k in sorted({t for t in item.seq.turn_ids if t >= 0}):
            start = item.seq.turn_ids.index(k)
            assert tokenizer.decode(item.seq.input_ids[:start]) == agent[k].prompt
            assert (
                tokenizer.decode([i for i, t in zip(item.seq.input_ids, item.seq.turn_ids) if t == k])
                == agent[k].raw + "<|im_end|>"
            )
    result = fit_policy(db, PolicyConfig(**SMALL, epochs=2), "rft", base_model=str(tiny_model_dir))
    with db.read() as session:
        run = session.get(TrainingRun, result.run_id)
        lineage = {l.trajectory_id for l in session.exec(select(Lineage).where(Lineage.run_id == run.id))}
    assert run.kind == "policy:rft" and run.status == "done" and lineage == successful
    assert result.metrics["trajectories"] == 2 and result.metrics["steps"] == 2 and result.metrics["train_loss"] > 0


def test_rft_threshold_keeps_each_tasks_best_trajectory_when_it_reaches_it(trained, tokenizer):
    db, _, _ = trained  # per task: rewards 1.0, 0.3 and 0.0
    with db.read() as session:
        rows = session.exec(select(Trajectory)).all()
    best = {t.id for t in rows if t.reward == 1.0}
    assert {t.id for t in rft.successful(rows, "backend")} == best
    assert {
        t.id for t in rft.successful(rows, "backend", threshold=0.2)
    } == best  # the best per task, not every one above
    assert rft.successful(rows, "backend", threshold=1.01) == []
    partial = [t for t in rows if t.reward < 1.0]
    assert {t.reward for t in rft.successful(partial, "backend", threshold=0.2)} == {0.3}
    assert rft.successful(partial, "backend") == []


def test_mtdpo_uses_the_critics_pairs_without_training_info(trained, tiny_model_dir, tokenizer):
    db, _, _ = trained
    items, _, _ = mtdpo.items(db, tokenizer, PolicyConfig(**dict(SMALL, max_len=4096)), None)
    pairs = D.read_pairs(db, family="backend").pairs
    assert [(it.source.chosen, it.source.rejected) for it in items] == [(p.chosen, p.rejected) for p in pairs] and len(
        pairs
    ) == 4
    for item in items:
        text = "".join(tokenizer.decode(row.input_ids) for row in item.chosen)
        # What the policy saw: the stored prompt, its system message included, and no training-time information.
        assert D.TRAINING_INFO_HEADER not in text and text.startswith("<|im_start|>system\nYou are a helpful agent.")
        assert (
            len({t for row in item.chosen for t in row.turn_ids if t >= 0}) == 2
        )  # both agent turns of the correct trajectory
    progress = []
    result = fit_policy(db, PolicyConfig(**SMALL), "mtdpo", base_model=str(tiny_model_dir),
                        on_progress=lambda *report: progress.append(report[:3]))
    assert result.metrics["pairs"] == 4 and result.metrics["steps"] == 1
    # The reference pass before the first step (minutes at a study's scale) reports its batches too.
    batches = -(-4 // SMALL["batch_size"])
    assert [r for r in progress if r[0] == "reference"] == [("reference", n, batches) for n in range(1, batches + 1)]
    assert progress.index(("reference", batches, batches)) < progress.index(("train", 1, 1))
    assert "train_reward_margin" in result.metrics and result.metrics["train_dpo_loss"] == pytest.approx(
        0.6931, abs=1e-3
    )


def test_export_merge_gives_base_plus_adapter_logps_and_ckpt_works_in_an_engine(trained, tiny_model_dir, tokenizer,
                                                                                tmp_path):
    db, _, _ = trained
    result = fit_policy(db, PolicyConfig(**dict(SMALL, lr=5e-2), epochs=1), "rft", base_model=str(tiny_model_dir))
    ref = f"ckpt:{result.checkpoint_id}"
    from colbench.model_refs import load_model, model_source, resolve_model

    source = model_source(db, ref)
    assert source.adapter == result.path
    with_adapter = load_model(source, device="cpu")
    out = export_checkpoint(db, ref, tmp_path / "merged", merge=True)
    from transformers import AutoModelForCausalLM

    merged = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
    assert resolve_model(str(out)).adapter is None
    seqs = list(toy_pair(tokenizer))
    with torch.no_grad():
        a, _ = logps_of(with_adapter, tokenizer, seqs)
        b, _ = logps_of(merged, tokenizer, seqs)
        base, _ = logps_of(tiny(tiny_model_dir).eval(), tokenizer, seqs)
    assert torch.allclose(a, b, atol=1e-4)
    assert not torch.allclose(a, base, atol=1e-4)  # the adapter did change something
    # Without --merge: the adapter folder with its tokenizer, loadable as --model DIR too.
    plain = export_checkpoint(db, ref, tmp_path / "adapter", merge=False)
    assert resolve_model(str(plain)).adapter == str(plain)

    from colbench.engines.base import SamplingParams
    from colbench.wiring import build_engine

    engine = build_engine(db, "hf", ref, device="cpu")
    generation = engine.generate([S.conversation("backend", DIALOGUE[:1])], SamplingParams(max_new_tokens=4, seed=0))[0]
    assert engine.model_ref == ref and 1 <= len(generation.samples[0].token_ids) <= 4


# ---------------------------------------------------------------- the whole pipeline through the CLI


def test_cli_import_critic_sweet_rollout_eval(tiny_model_dir, sqlite_url, tmp_path, capsys, monkeypatch):
    db = Database(sqlite_url)
    import_records(db, tmp_path, "offline", small_batch())
    run = command_line(sqlite_url, capsys, monkeypatch)

    code, out, err = run(
        "critic", "fit", "--model", str(tiny_model_dir), "--epochs", "1", "--batch-size", "4", "--max-len", "128",
        "--lora-rank", "4", "--device", "cpu", "--heldout", "0"
    )
    assert code == 0, err
    code, out, err = run(
        "policy", "fit", "--algo", "sweet", "--critic", "ckpt:1", "--model", str(tiny_model_dir), "--fraction", "1",
        "--candidates", "2", "--pairs-per-turn", "1", "--max-new-tokens", "3", "--lora-rank", "4", "--max-len", "160",
        "--lr", "1e-3", "--device", "cpu"
    )
    assert code == 0, err
    out = " ".join(out.split())
    assert out.startswith("policy:sweet ckpt:2 (run 2):") and "pairs" in out and "reward margin" in out
    code, out, err = run("checkpoint", "ls", "--json")
    assert code == 0 and [(r["ref"], r["kind"]) for r in out] == [
        ("ckpt:1", "critic"),
        ("ckpt:2", "policy:sweet")
    ]
    code, out, err = run("policy", "fit", "--algo", "sweet")
    assert code != 0 and "--critic" in err

    env = dict(os.environ, COLBENCH_DB=sqlite_url)
    cmd = [sys.executable, "-m", "colbench.cli.app"]
    rollout = subprocess.run(cmd + ["rollout", "--model", "ckpt:2", "--tasks", "backend:test", "--limit", "2",
                                    "--max-new-tokens", "4",
                                    "--sandbox", "bwrap", "--device", "cpu", "--json"], capture_output=True, text=True,
                                    env=env, timeout=300)
    assert rollout.returncode == 0, rollout.stderr
    evaluation = subprocess.run(cmd + ["eval", "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert evaluation.returncode == 0, evaluation.stderr
    rows = {row["policy"]: row for row in json.loads(evaluation.stdout)}
    assert "ckpt:2" in rows and rows["ckpt:2"]["n_tasks"] == 2
