"""The SWEET-RL critic on a tiny random Llama with the real SmolLM2 tokenizer: masks,
adapter-only gradients, the frozen reference, checkpoints, a fit end to end (and a
second, incremental one), stored turn scores, and shared-prefix candidate scoring."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from sqlmodel import select

from colbench.model_refs import ModelNotFound
from colbench.official import import_trajectories
from colbench.store.db import Database
from colbench.store.models import Checkpoint, CriticScore, Lineage, TrainingRun, Trajectory, Turn
from colbench.training import data as D
from colbench.training import sequences as S
from colbench.training.critic import CriticConfig, NothingToTrain, fit_critic, latest_critic
from colbench.training.losses import bradley_terry_loss, critic_scores
from colbench.training.modeling import TokenLogProbs, adapter_disabled, attach_lora, load_adapter
from conftest import command_line, write_jsonl
from officialdata import backend_task, trajectory

DIALOGUE = [
    {"role": "user", "content": "Write a function that adds two numbers."},
    {"role": "assistant", "content": "Should it accept floats?"},
    {"role": "user", "content": "Yes, floats too."},
    {"role": "assistant", "content": "I WANT TO ANSWER:\ndef add(a, b):\n    return a + b"},
]
REFERENCE = "def add(a, b):\n    return a + b\n"


def tiny(tiny_model_dir):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)


def perturbed_lora(tiny_model_dir, seed: int, std: float):
    """The tiny model with a LoRA adapter whose B is random, so the adapter changes the outputs."""
    torch.manual_seed(seed)
    model = attach_lora(tiny(tiny_model_dir), rank=4, alpha=8)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "lora_B" in name:
                parameter.normal_(std=std)
    return model


def agent_texts(tokenizer, ids, turn_ids):
    turns = sorted({t for t in turn_ids if t >= 0})
    return [tokenizer.decode([i for i, t in zip(ids, turn_ids) if t == k]) for k in turns]


# ---------------------------------------------------------------- rows (see also test_sequences.py)


def prompt_before(tokenizer, history):
    return tokenizer.apply_chat_template(S.conversation("backend", history), tokenize=False, add_generation_prompt=True)


def toy_batch(tokenizer, reward_turns):
    """One row per candidate last turn: c, the exact prompt, the turn's ids and <|im_end|>."""
    prefix = D.training_info_ids(tokenizer, REFERENCE)
    prompt = S.encode_text(tokenizer, prompt_before(tokenizer, DIALOGUE[:3]))
    rows = [
        S.turn_row(prefix, prompt, S.encode_text(tokenizer, text) + S.end_of_turn_ids(tokenizer), None)
        for text in reward_turns
    ]
    return D.collate(rows, tokenizer.pad_token_id)


def test_training_info_precedes_exactly_the_prompt_the_policy_saw(tokenizer):
    from test_sequences import stored_turns

    turns = stored_turns(tokenizer, DIALOGUE)
    example = D.Example(1, 1, 1.0,
                        S.pack(S.agent_turns(tokenizer, "backend", turns), D.training_info_ids(tokenizer, REFERENCE)))
    (row,) = example.rows
    text = tokenizer.decode(row.input_ids)
    assert text.startswith(D.training_info_text(REFERENCE) + turns[1].prompt)
    outside = tokenizer.decode([i for i, t in zip(row.input_ids, row.turn_ids) if t < 0])
    assert "Reference solution" in outside and "floats too" in outside and "<|im_start|>system" in outside
    assert agent_texts(tokenizer, row.input_ids, row.turn_ids) == [
        m["content"] + "<|im_end|>" for m in DIALOGUE if m["role"] == "assistant"
    ]


def test_gradients_reach_only_the_adapter_and_the_reference_stays_frozen(tiny_model_dir, tokenizer):
    torch.manual_seed(0)
    model = attach_lora(tiny(tiny_model_dir), rank=4, alpha=8)
    model.train()
    ids, mask, turns = toy_batch(tokenizer, ["def add(a, b):\n    return a + b", "I do not know."])
    scorer = TokenLogProbs(model)
    with torch.no_grad(), adapter_disabled(model):
        ref_before = scorer(ids, mask, turns >= 0)
    # B starts at zero: before any step the critic is the reference.
    assert torch.equal(scorer(ids, mask, turns >= 0).detach(), ref_before)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    margins = []
    for _ in range(2):
        scores = critic_scores(scorer(ids, mask, turns >= 0), ref_before, turns, beta=0.1)
        margins.append(float((scores[0] - scores[1]).detach()))
        loss = bradley_terry_loss(scores[:1], scores[1:])
        optimizer.zero_grad()
        loss.backward()
        for name, parameter in model.named_parameters():
            if "lora_" in name:
                assert parameter.requires_grad
            else:
                assert not parameter.requires_grad and parameter.grad is None, name
        assert any(p.grad is not None and p.grad.abs().sum() > 0 for n, p in model.named_parameters() if "lora_B" in n)
        optimizer.step()
    # One step moved the margin the right way.
    assert margins[1] > margins[0]
    with torch.no_grad():
        with adapter_disabled(model):
            ref_after = scorer(ids, mask, turns >= 0)
        critic_after = scorer(ids, mask, turns >= 0)
    assert torch.equal(ref_after, ref_before)
    assert not torch.allclose(critic_after, ref_before)


def test_saved_adapter_reloads_to_identical_logps(tiny_model_dir, tokenizer, tmp_path):
    model = perturbed_lora(tiny_model_dir, seed=1, std=0.1)
    model.eval()
    ids, mask, turns = toy_batch(tokenizer, ["Sure.", "No."])
    with torch.no_grad():
        before = TokenLogProbs(model)(ids, mask, turns >= 0)
    model.save_pretrained(tmp_path / "adapter")
    reloaded = load_adapter(tiny(tiny_model_dir), str(tmp_path / "adapter"), trainable=False).eval()
    with torch.no_grad():
        after = TokenLogProbs(reloaded)(ids, mask, turns >= 0)
    assert torch.equal(before, after)


def test_token_logprobs_match_a_plain_forward(tiny_model_dir, tokenizer):
    model = tiny(tiny_model_dir).eval()
    ids, mask, turns = toy_batch(tokenizer, ["Sure, floats are fine.", "No."])
    with torch.no_grad():
        ours = TokenLogProbs(model)(ids, mask, turns >= 0)
        logits = model(input_ids=ids, attention_mask=mask).logits.float()
    full = torch.log_softmax(logits[:, :-1], -1).gather(-1, ids[:, 1:, None]).squeeze(-1)
    target = (turns >= 0)[:, 1:]
    assert torch.allclose(ours[:, 1:][target], full[target], atol=1e-5)
    assert (ours[:, 1:][~target] == 0).all()


def test_bf16_autocast_keeps_float32_log_probs_close_and_trains(tiny_model_dir, tokenizer):
    """Autocast changes the decoder's arithmetic, not what is computed: log-probs stay float32
    and near the float32 ones, and gradients flow to float32 weights."""
    model = tiny(tiny_model_dir).eval()
    ids, mask, turns = toy_batch(tokenizer, ["Sure, floats are fine.", "No."])
    target = turns >= 0
    with torch.no_grad():
        exact = TokenLogProbs(model)(ids, mask, target)
        mixed = TokenLogProbs(model, autocast=torch.bfloat16)(ids, mask, target)
    assert mixed.dtype == torch.float32
    assert not torch.equal(mixed, exact)  # the decoder did run in bfloat16
    error = (mixed - exact)[:, 1:][target[:, 1:]].abs()
    assert error.mean() < 0.15 and error.max() < 0.5  # SmolLM2-135M: 0.024 mean, 0.16 most; this random one 0.07 mean
    model.train()
    loss = -TokenLogProbs(model, autocast=torch.bfloat16)(ids, mask, target).sum()
    loss.backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(g.dtype == torch.float32 for g in grads) and any(g.abs().sum() > 0 for g in grads)


def test_autocast_setting_resolves_per_device_and_weights():
    from colbench.training.config import PolicyConfig, cpu_has_native_bf16

    assert PolicyConfig(autocast="off").autocast_dtype("cpu") is None
    assert PolicyConfig(autocast="bf16").autocast_dtype("cpu") == torch.bfloat16
    # Weights already in bfloat16 (a GPU's default): nothing to autocast.
    assert PolicyConfig(autocast="bf16", dtype="bfloat16").autocast_dtype("cpu") is None
    assert PolicyConfig().autocast_dtype("cuda") is None
    assert PolicyConfig().autocast_dtype("cpu") == (torch.bfloat16 if cpu_has_native_bf16() else None)
    with pytest.raises(ValueError):
        PolicyConfig(autocast="fp8")


# ---------------------------------------------------------------- fit, continue, score


def import_records(db, tmp_path, name, records):
    return import_trajectories(db, write_jsonl(tmp_path / f"{name}.jsonl", records))


def first_batch():
    records = []
    for i in range(4):  # per task: a correct one, a partial one, a failure
        task = backend_task(i)
        records += [trajectory(task, 2, 1.0), trajectory(task, 1, 0.3), trajectory(task, 3, 0.0)]  # distinct dialogues
    records.append(trajectory(backend_task(9), 2, 0.5))  # no fully correct trajectory: no pairs
    return records


SMALL = dict(epochs=2, batch_size=4, max_len=160, heldout_fraction=0.25, lora_rank=4, device="cpu")


def test_fit_writes_run_checkpoint_lineage_then_continues_on_new_data_only(tiny_model_dir, sqlite_url, tmp_path):
    db = Database(sqlite_url)
    import_records(db, tmp_path, "first", first_batch())
    progress = []
    result = fit_critic(
        db, CriticConfig(**SMALL), base_model=str(tiny_model_dir), on_progress=lambda *a: progress.append(a)
    )
    with db.read() as session:
        run = session.get(TrainingRun, result.run_id)
        checkpoint = session.get(Checkpoint, result.checkpoint_id)
        lineage = {l.trajectory_id for l in session.exec(select(Lineage).where(Lineage.run_id == run.id))}
        first_ids = {t.id for t in session.exec(select(Trajectory))}
        max_seq = max(t.graded_seq for t in session.exec(select(Trajectory)))
    assert run.kind == "critic" and run.status == "done" and run.data_watermark == max_seq
    assert run.config["normalize"] == "turn" and run.config["beta"] == 0.1 and run.config["training_info"]
    assert run.metrics["pairs"] == 8 and run.metrics["train_pairs"] == 6 and run.metrics["heldout_pairs"] == 2
    assert run.metrics["heldout_accuracy"] is not None and 0 <= result.metrics["heldout_accuracy"] <= 1
    assert (
        checkpoint.kind == "critic"
        and checkpoint.adapter
        and checkpoint.path.startswith(str(db.folder / "checkpoints"))
    )
    assert checkpoint.path == str(tmp_path / "checkpoints" / f"critic-{run.id}-{db.store_id[:8]}")
    assert (Path(checkpoint.path) / "adapter_config.json").is_file() and checkpoint.sha256
    assert len(lineage) == 9 and lineage <= first_ids  # the 3 trajectories of each of the 3 training tasks
    assert progress and progress[-1][:3] == ("train", run.metrics["steps"], run.metrics["steps"])

    # Nothing new: nothing to train, and no run is written.
    with pytest.raises(NothingToTrain):
        fit_critic(db, CriticConfig(**SMALL), parent_checkpoint=result.checkpoint_id)

    # New data: one more failure on an old task, and a fresh task with a pair.
    import_records(db, tmp_path, "second",
                   [trajectory(backend_task(0), 4, 0.2), trajectory(backend_task(5), 2, 1.0),
                    trajectory(backend_task(5), 1, 0.1)])
    with db.read() as session:
        new_ids = {t.id for t in session.exec(select(Trajectory))} - first_ids
    second = fit_critic(db, CriticConfig(**SMALL), parent_checkpoint="latest")
    with db.read() as session:
        run2 = session.get(TrainingRun, second.run_id)
        lineage2 = {l.trajectory_id for l in session.exec(select(Lineage).where(Lineage.run_id == run2.id))}
    assert run2.parent_checkpoint_id == result.checkpoint_id and run2.base_model == str(tiny_model_dir)
    assert run2.metrics["new_trajectories"] == 3 and run2.metrics["pairs"] == 2  # every pair has a new side
    assert run2.data_watermark > run.data_watermark
    assert lineage2 - first_ids <= new_ids and (lineage2 & new_ids)
    # Old trajectories enter only as the partner of a new one (task 0's old success).
    assert lineage2 & first_ids <= {min(first_ids)}

    # From scratch: all the data again.
    third = fit_critic(db, CriticConfig(**SMALL), parent_checkpoint=second.checkpoint_id, from_scratch=True)
    assert third.metrics["new_trajectories"] == 16 and third.metrics["pairs"] == 10

    # Scores of every agent turn go to critic_score, one per (turn, checkpoint), replaced on a rerun.
    from colbench.training.scoring import score_turns

    summary = score_turns(db, f"ckpt:{result.checkpoint_id}", device="cpu", limit=5)
    again = score_turns(db, f"ckpt:{result.checkpoint_id}", device="cpu", limit=5)
    with db.read() as session:
        stored = session.exec(select(CriticScore).where(CriticScore.checkpoint_id == result.checkpoint_id)).all()
        roles = {session.get(Turn, s.turn_id).role for s in stored}
    assert summary["trajectories"] == 5 and summary["scores_written"] == again["scores_written"] == len(stored) > 0
    assert roles == {"assistant"}


def test_a_crash_marks_the_run_failed_and_a_bad_model_writes_no_run(sqlite_url, tmp_path, tiny_model_dir, monkeypatch):
    from colbench.training.critic import CriticRecipe

    db = Database(sqlite_url)
    import_records(db, tmp_path, "first", first_batch()[:3])
    with pytest.raises(ModelNotFound):
        fit_critic(db, CriticConfig(**SMALL), base_model=str(tmp_path))  # not a model folder: refused up front
    with db.read() as session:
        assert session.exec(select(TrainingRun)).all() == []

    def crash(self, *args):
        raise RuntimeError("out of memory\nand a second line")

    monkeypatch.setattr(CriticRecipe, "train", crash)
    with pytest.raises(RuntimeError):
        fit_critic(db, CriticConfig(**SMALL), base_model=str(tiny_model_dir))
    with db.read() as session:
        run = session.exec(select(TrainingRun)).one()
    assert run.status == "failed" and run.error == "RuntimeError: out of memory"


# ---------------------------------------------------------------- candidates


def test_shared_prefix_scoring_equals_naive_full_forwards(tiny_model_dir, tokenizer):
    from colbench.training.scoring import CriticModel

    model = perturbed_lora(tiny_model_dir, seed=2, std=0.05)
    critic = CriticModel(model, tokenizer)
    prefix = critic.context(prompt_before(tokenizer, DIALOGUE[:3]), REFERENCE).ids
    candidates = ["Sure.", "def add(a, b):\n    return a + b", "I WANT TO ANSWER: return a+b and more text here",
                  [1, 2, 3]]
    shared = critic.score_candidates(prefix, candidates, batch_size=3)
    naive = critic.score_candidates_naive(prefix, candidates, batch_size=3)
    for a, b in zip(shared, naive):
        assert a.tokens == b.tokens
        assert a.critic_logp == pytest.approx(b.critic_logp, abs=1e-4)
        assert a.reference_logp == pytest.approx(b.reference_logp, abs=1e-4)
        assert a.advantage == pytest.approx(b.advantage, abs=1e-4)
    assert any(abs(s.advantage) > 1e-4 for s in shared)  # the adapter makes a difference
    # Sampled ids are scored exactly: a candidate cut by the token limit (no <|im_end|>) gets none added.
    assert shared[3].tokens == 3


@pytest.mark.parametrize("cut", [False, True])
def test_a_candidate_scores_as_its_turn_does_in_training_cut_or_not(tiny_model_dir, tokenizer, cut):
    """Training rows and candidate scoring read a turn with the same tokens, also when
    max_len cuts its context: the advantage of a stored turn equals its score as a candidate."""
    from test_sequences import stored_turns

    from colbench.training.scoring import CriticModel

    model = perturbed_lora(tiny_model_dir, seed=3, std=0.05)
    agent = S.agent_turns(tokenizer, "backend", stored_turns(tokenizer, DIALOGUE))
    prefix = D.training_info_ids(tokenizer, REFERENCE)
    max_len = len(prefix) + len(agent[0].prompt_ids) + 4 if cut else 4096
    critic = CriticModel(model, tokenizer, max_len=max_len)
    example = D.Example(1, 1, 0.0, S.pack(agent, prefix, max_len), turn_rows=[None, None])
    whole = critic.turn_advantages([example])[0]
    for k, turn in enumerate(agent):
        context = critic.context(turn.prompt_ids, REFERENCE)
        assert context.truncated == (cut and k == 1)
        (score,) = critic.score_candidates(context.ids, [turn.completion_ids])
        assert whole[k] == pytest.approx(score.advantage, abs=1e-4)


# ---------------------------------------------------------------- the command


def test_cli_fit_and_score(tiny_model_dir, sqlite_url, tmp_path, capsys, monkeypatch):
    db = Database(sqlite_url)
    import_records(db, tmp_path, "first", first_batch())
    colbench = command_line(sqlite_url, capsys, monkeypatch)

    def run(*args):  # `colbench critic ARGS`, its output's lines joined (Rich wraps them at the terminal's width)
        code, out, err = colbench("critic", *args)
        return code, out if "--json" in args else " ".join(out.split()), err

    code, out, err = run(
        "fit", "--model", str(tiny_model_dir), "--epochs", "1", "--batch-size", "4", "--max-len", "128", "--lora-rank",
        "4", "--normalize", "trajectory", "--no-training-info", "--device", "cpu", "--heldout", "0.25"
    )
    assert code == 0, err
    assert "held-out pair accuracy" in out and "critic ckpt:1 (run 1)" in out
    with db.read() as session:
        config = session.get(TrainingRun, 1).config
    assert config["normalize"] == "trajectory" and config["training_info"] is False and config["lora_rank"] == 4
    code, out, err = run("score", "--critic", "ckpt:1", "--limit", "2", "--json", "--device", "cpu")
    assert code == 0, err
    assert out["trajectories"] == 2
    # Continuing the latest matching critic: nothing new, one line.
    code, out, err = run("fit", "--normalize", "trajectory", "--no-training-info", "--device", "cpu")
    assert code == 1 and err.strip().startswith("error: no training pairs") and len(err.strip().splitlines()) == 1
    code, out, err = run("fit", "--normalize", "tokens")
    assert code != 0 and "normalize" in err and len(err.strip().splitlines()) == 1
    code, out, err = run("score", "--critic", "ckpt:99")
    assert code != 0 and "ckpt:99 not found" in err


def test_margin_pairs_train_a_critic_where_nothing_is_fully_correct(tiny_model_dir, tmp_path, sqlite_url):
    db = Database(sqlite_url)
    import_records(db, tmp_path, "partial",
                   [trajectory(backend_task(i), 1 + k, r) for i in range(2) for k, r in enumerate((0.4, 0.0, 0.35))])
    with pytest.raises(NothingToTrain, match="fully correct"):
        fit_critic(db, CriticConfig(**SMALL), base_model=str(tiny_model_dir))
    result = fit_critic(db, CriticConfig(**(SMALL | dict(pairs="margin", heldout_fraction=0.0))),
                        base_model=str(tiny_model_dir))
    assert result.metrics["pairs"] == 4  # per task: 0.4 vs 0.0 and 0.35 vs 0.0 (0.4 vs 0.35 is too close)
    with db.read() as session:
        assert session.get(TrainingRun, result.run_id).config["pairs"] == "margin"
    assert latest_critic(db, str(tiny_model_dir), CriticConfig(**SMALL)) is None  # another pair rule: not continued
    assert latest_critic(db, str(tiny_model_dir), CriticConfig(**SMALL, pairs="margin")) == result.checkpoint_id
