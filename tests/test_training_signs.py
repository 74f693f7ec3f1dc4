"""End-to-end checks that fail if a sign or a side is flipped anywhere in training, on the
tiny random Llama: the critic learns which side of its pairs is better, DPO raises the
chosen side against the rejected one (mtdpo and SWEET, through the store), the actor's
score is the critic minus the sampler on one dialogue, and a continued policy is its
own DPO reference. The numbers come out of the trainers, never recomputed from the
same fields."""
from __future__ import annotations

import pytest
import torch
from sqlmodel import select

from colbench.official import import_trajectories
from colbench.store import queries
from colbench.store.db import Database
from colbench.store.models import SweetCandidate, SweetPair, TrainingRun, Turn
from colbench.training.policy import fit_policy
from colbench.training.trainer import NothingToTrain, PolicyConfig, trajectory_rows
from colbench.training import sequences as S
from colbench.training.critic import CriticConfig, fit_critic
from colbench.training.modeling import TokenLogProbs
from conftest import write_jsonl
from officialdata import asked_then_answered as record, backend_task

GOOD = "Is the weight in kilograms, and is express 1.5 times the price?"
BAD = "I do not know what to do here, sorry."


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """8 tasks, each with a success that asks GOOD and a failure that asks BAD."""
    tmp = tmp_path_factory.mktemp("signs")
    db = Database(f"sqlite:///{tmp / 'colbench.db'}")
    records = [r for i in range(8) for r in (record(backend_task(i), GOOD, 1.0), record(backend_task(i), BAD, 0.0))]
    import_trajectories(db, write_jsonl(tmp / "pairs.jsonl", records))
    return db


def load(tiny_model_dir, adapter=None):
    from colbench.model_refs import ModelSource, load_model

    return load_model(ModelSource(base=str(tiny_model_dir), adapter=adapter, ref="test"), device="cpu").eval()


def logp(model, tokenizer, rows) -> float:
    from colbench.training import data as D

    ids, mask, turns = D.collate(rows, tokenizer.pad_token_id)
    with torch.no_grad():
        return float((TokenLogProbs(model)(ids, mask, turns >= 0) * (turns >= 0)).sum())


def by_task(db):
    """task id → (its successful trajectory id, its failed one), from the stored rewards alone."""
    from colbench.store.models import Trajectory

    with db.read() as session:
        rows = session.exec(select(Trajectory).where(Trajectory.policy == "import:pairs")).all()
    found: dict[int, dict[float, int]] = {}
    for t in rows:
        found.setdefault(t.task_id, {})[t.reward] = t.id
    return {task: (r[1.0], r[0.0]) for task, r in found.items()}


def test_a_critic_learns_which_side_of_its_pairs_is_better(store, tiny_model_dir):
    """Every success scores above its task's failure, held-out tasks included (scored by the
    stored-turn scorer, not the trainer); with the Bradley-Terry sides swapped all would be below."""
    from colbench.training import data as D
    from colbench.training.scoring import CriticModel

    config = CriticConfig(epochs=6, batch_size=4, lr=3e-3, lora_rank=4, heldout_fraction=0.25, device="cpu",
                          max_len=512)
    result = fit_critic(store, config, base_model=str(tiny_model_dir))
    assert result.metrics["heldout_pairs"] == 2 and result.metrics["heldout_accuracy"] == 1.0
    critic = CriticModel.from_checkpoint(store, f"ckpt:{result.checkpoint_id}", device="cpu")
    tasks = by_task(store)
    examples = D.load_examples(store, critic.tokenizer, [i for pair in tasks.values() for i in pair], max_len=512)
    total = {
        i: sum(a for a in advantages if a is not None)
        for i, advantages in zip(examples, critic.turn_advantages(list(examples.values())))
    }
    assert len(tasks) == 8 and all(total[good] > total[bad] for good, bad in tasks.values()), total


def test_multi_turn_dpo_raises_the_chosen_trajectory_against_the_rejected(store, tiny_model_dir):
    from colbench.model_refs import load_tokenizer

    config = PolicyConfig(lr=5e-3, lora_rank=4, device="cpu", epochs=3, batch_size=4)
    result = fit_policy(store, config, "mtdpo", base_model=str(tiny_model_dir))
    tokenizer = load_tokenizer(str(tiny_model_dir))
    tasks = by_task(store)
    rows = trajectory_rows(store, tokenizer, "backend", [i for pair in tasks.values() for i in pair], None)
    before, after = load(tiny_model_dir), load(tiny_model_dir, result.path)

    def gain(trajectory_id):
        return logp(after, tokenizer, rows[trajectory_id]) - logp(before, tokenizer, rows[trajectory_id])

    moved = [gain(good) - gain(bad) for good, bad in tasks.values()]
    assert len(moved) == 8 and all(m > 0 for m in moved), moved


def test_a_continued_lora_policy_is_its_own_dpo_reference(store, tiny_model_dir):
    """At a continued run's first step the policy equals its reference: DPO loss log 2, margin 0.
    With the adapter switched off as the reference (the raw base), the trained adapter would show."""
    first = fit_policy(store, PolicyConfig(lr=5e-2, lora_rank=4, device="cpu", epochs=2), "rft",
                       base_model=str(tiny_model_dir))
    # One optimiser step over all pairs: the epoch's stats are those before the update.
    again = fit_policy(store, PolicyConfig(lr=1e-3, lora_rank=4, device="cpu", batch_size=16), "mtdpo",
                       base_model=f"ckpt:{first.checkpoint_id}")
    with store.read() as session:
        assert session.get(TrainingRun, again.run_id).parent_checkpoint_id == first.checkpoint_id
    assert again.metrics["steps"] == 1
    assert again.metrics["train_reward_margin"] == pytest.approx(0.0, abs=1e-5)
    assert again.metrics["train_dpo_loss"] == pytest.approx(0.693147, abs=1e-5)


def test_rejection_fine_tuning_uses_the_papers_batch_and_official_sweet_selection(store, tiny_model_dir):
    result = fit_policy(store, PolicyConfig(lora_rank=4, device="cpu", epochs=1), "rft", base_model=str(tiny_model_dir))
    with store.read() as session:
        assert session.get(TrainingRun, result.run_id).config["batch_size"] == 32
    from colbench.model_refs import load_tokenizer
    from colbench.training import sweet

    tokenizer = load_tokenizer(str(tiny_model_dir))
    jobs, _, read = sweet.select_turns(store, PolicyConfig(fraction=0.25), None, tokenizer)
    with store.read() as session:
        graded = sorted(queries.graded_since(session, None, family="backend"), key=lambda t: t.id)
        first = [t.id for t in graded[::2][:4]]  # each task's first sample (its success), of the first 4 tasks
        turns = session.exec(select(Turn).where(Turn.role == "assistant", Turn.trajectory_id.in_(first))).all()
    # A quarter of the 16 trajectories, one sample per task first, every agent turn of each, as the official actor
    # takes them.
    assert read == 16 and sorted(j.turn_id for j in jobs) == sorted(t.id for t in turns)
    hashed, _, _ = sweet.select_turns(store, PolicyConfig(fraction=0.25, selection="turns"), None, tokenizer)
    assert {j.trajectory_id for j in hashed} - set(first)  # turns from anywhere in the data


@pytest.fixture(scope="module")
def blank_critic(store, tiny_model_dir):
    """A critic without training-time information that has not moved from its base (lr 0)."""
    config = CriticConfig(epochs=1, batch_size=16, lr=0.0, lora_rank=4, heldout_fraction=0.0, device="cpu",
                          training_info=False)
    return fit_critic(store, config, base_model=str(tiny_model_dir)).checkpoint_id


def test_the_actor_score_is_zero_when_the_critic_knows_nothing_more_than_the_sampler(store, tiny_model_dir,
                                                                                     blank_critic):
    """Critic = the sampler's own model, without c: its log-prob of every candidate equals the
    sampler's on the same dialogue, so every score is 0. Dropping the sampler term, or reading
    the two terms on different prompts, spreads the scores."""
    config = PolicyConfig(fraction=0.25, candidates=4, pairs_per_turn=1, max_new_tokens=8, sample_batch_size=8,
                          lora_rank=4, device="cpu", lr=1e-3)
    try:
        fit_policy(store, config, "sweet", base_model=str(tiny_model_dir), critic_checkpoint=blank_critic)
    except NothingToTrain:
        pass  # identical scores may leave every turn without a pair; the candidates are stored first
    with store.read() as session:
        candidates = session.exec(
            select(SweetCandidate).where(SweetCandidate.critic_checkpoint_id == blank_critic)
        ).all()
    assert len(candidates) == 8 * 4  # 4 trajectories x 2 turns, 4 candidates each
    assert max(abs(c.score) for c in candidates) < 2e-3
    assert max(abs(c.sampler_logp) for c in candidates) > 1.0  # the terms themselves are far from 0


@pytest.fixture(scope="module")
def ranking_critic(store, tiny_model_dir):
    """A critic trained on the GOOD/BAD pairs, with c: it ranks SWEET's candidates."""
    config = CriticConfig(epochs=3, batch_size=4, lr=3e-3, lora_rank=4, heldout_fraction=0.0, device="cpu")
    return fit_critic(store, config, base_model=str(tiny_model_dir))


def test_sweet_puts_the_candidate_the_critic_prefers_on_the_chosen_side(store, tiny_model_dir, ranking_critic,
                                                                        tokenizer, capsys, monkeypatch):
    """Through `policy fit --algo sweet`: for every stored pair, the critic's mean log-prob of the
    chosen candidate given c, minus the policy's own without c, both recomputed here from the
    checkpoints by a plain forward pass, is above the rejected one's. Ranking by the negated
    score (sampler minus critic) puts every pair the other way round."""
    from colbench.training import data as D
    from colbench.training.sweet import select_turns
    from conftest import command_line

    run = command_line(store.url, capsys, monkeypatch)
    code, out, err = run(
        "policy", "fit", "--algo", "sweet", "--critic", f"ckpt:{ranking_critic.checkpoint_id}", "--model",
        str(tiny_model_dir), "--fraction", "0.5", "--candidates", "6", "--pairs-per-turn", "3", "--max-new-tokens", "8",
        "--sampler", "hf", "--lora-rank", "4", "--lr", "1e-3", "--device", "cpu", "--seed", "7", "--json"
    )
    assert code == 0, err
    with store.read() as session:
        pairs = session.exec(select(SweetPair).where(SweetPair.run_id == out["run_id"])).all()
        rows = {
            c.id: c
            for c in session.exec(
                select(SweetCandidate).where(
                    SweetCandidate.id.in_([i for p in pairs for i in (p.chosen_id, p.rejected_id)])
                )
            )
        }
    jobs = {j.turn_id: j for j in select_turns(store, PolicyConfig(fraction=0.5), None, tokenizer)[0]}
    critic, policy = load(tiny_model_dir, ranking_critic.path), load(tiny_model_dir)

    def mean_logp(model, context: list[int], candidate: list[int]) -> float:
        ids = torch.tensor([context + candidate])
        with torch.no_grad():
            logps = torch.log_softmax(model(ids).logits[0, :-1].float(), -1).gather(-1, ids[0, 1:, None])[:, 0]
        return float(logps[len(context) - 1 :].mean())

    def preference(candidate_id: int, job) -> float:
        prompt = S.encode_text(tokenizer, job.prompt)
        tokens = list(rows[candidate_id].token_ids)
        return mean_logp(critic, D.training_info_ids(tokenizer, job.reference) + prompt, tokens) - mean_logp(policy,
                                                                                                             prompt,
                                                                                                             tokens)

    gaps = [preference(p.chosen_id, jobs[p.turn_id]) - preference(p.rejected_id, jobs[p.turn_id]) for p in pairs]
    assert len(pairs) >= 12 and all(gap > -1e-4 for gap in gaps) and sum(gaps) / len(gaps) > 1e-3, gaps


def test_sweet_training_raises_the_higher_scored_candidates(store, tiny_model_dir, ranking_critic):
    """SWEET's pairs put the higher-scored candidate on the chosen side, and training raises it
    against the rejected one. A critic trained on the GOOD/BAD pairs ranks the candidates."""
    from colbench.model_refs import load_tokenizer

    critic = ranking_critic
    config = PolicyConfig(fraction=0.5, candidates=4, pairs_per_turn=2, max_new_tokens=8, sample_batch_size=8,
                          lora_rank=4, device="cpu", lr=5e-3, epochs=3, seed=1)
    result = fit_policy(store, config, "sweet", base_model=str(tiny_model_dir), critic_checkpoint=critic.checkpoint_id)
    tokenizer = load_tokenizer(str(tiny_model_dir))
    with store.read() as session:
        pairs = session.exec(select(SweetPair).where(SweetPair.run_id == result.run_id)).all()
        wanted = [i for p in pairs for i in (p.chosen_id, p.rejected_id)]
        rows = {c.id: c for c in session.exec(select(SweetCandidate).where(SweetCandidate.id.in_(wanted)))}
        turns = queries.turns_for(session, sorted({session.get(Turn, p.turn_id).trajectory_id for p in pairs}))
    prompts = {t.id: t.prompt for ts in turns.values() for t in ts}
    assert pairs and all(rows[p.chosen_id].score > rows[p.rejected_id].score for p in pairs)
    before, after = load(tiny_model_dir), load(tiny_model_dir, result.path)

    def row(p, candidate):
        return [S.turn_row([], S.encode_text(tokenizer, prompts[p.turn_id]), rows[candidate].token_ids, None)]

    moved = [
        (logp(after, tokenizer, row(p, p.chosen_id)) - logp(before, tokenizer, row(p, p.chosen_id)))
        - (logp(after, tokenizer, row(p, p.rejected_id)) - logp(before, tokenizer, row(p, p.rejected_id)))
        for p in pairs
    ]
    assert sum(moved) / len(moved) > 0 and sum(m > 0 for m in moved) >= 0.75 * len(moved), moved


def test_a_run_whose_chosen_side_collapses_stops_early_and_says_why(store, tiny_model_dir, capsys, monkeypatch):
    """Likelihood displacement as a warm start meets it: a policy fine-tuned on the successful
    trajectories already finds them likely, and DPO at a large step pushes the rejected side down
    so hard that the chosen side falls with it. --stop-on-displacement stops the run after its
    first window of steps, stores the reason, and still saves the policy as it stood."""
    warm = fit_policy(store, PolicyConfig(full=True, lr=3e-3, device="cpu", epochs=30, batch_size=8, seed=3), "rft",
                      base_model=str(tiny_model_dir))
    config = PolicyConfig(full=True, lr=0.05, device="cpu", epochs=3, batch_size=2, seed=3, stop_on_displacement=1.0)
    result = fit_policy(store, config, "mtdpo", base_model=f"ckpt:{warm.checkpoint_id}")
    assert result.metrics["stopped_early"].startswith("likelihood displacement"), result.metrics
    assert (
        result.metrics["steps"] == 5
        and result.metrics["last_chosen_reward"] < -1.0
        and result.checkpoint_id is not None
    )
    with store.read() as session:
        run = session.get(TrainingRun, result.run_id)
    assert run.status == "done" and run.metrics["stopped_early"] == result.metrics["stopped_early"]
    assert run.config["stop_on_displacement"] == 1.0
    from conftest import command_line

    code, out, err = command_line(store.url, capsys, monkeypatch)("runs", "show", f"train:{result.run_id}")
    out = " ".join(out.split())
    assert code == 0 and "diagnostics:" in out and "less likely than under the starting policy" in out
    assert (
        f"chosen reward {result.metrics['last_chosen_reward']:+.3f}" in out
        and "stopped early: likelihood displacement" in out
    )


def test_a_critic_ensemble_ranks_by_the_mean_of_its_critics_scores(store, tiny_model_dir, ranking_critic, blank_critic):
    """--critic ckpt:A,ckpt:B: the same candidates (same sampler, same seed) get the mean of the two
    critics' scores, each computed as that critic alone computes it."""
    config = PolicyConfig(fraction=0.25, candidates=4, pairs_per_turn=1, max_new_tokens=6, sample_batch_size=8,
                          lora_rank=4,
                          device="cpu", lr=1e-4, sampler="hf", seed=5)
    scores = {}
    for critics in (
        f"ckpt:{ranking_critic.checkpoint_id}",
        f"ckpt:{blank_critic}",
        f"ckpt:{ranking_critic.checkpoint_id},ckpt:{blank_critic}"
    ):
        result = fit_policy(store, config, "sweet", base_model=str(tiny_model_dir), critic_checkpoint=critics)
        with store.read() as session:
            rows = session.exec(select(SweetCandidate).where(SweetCandidate.run_id == result.run_id)).all()
        scores[critics] = {(r.turn_id, r.index): (tuple(r.token_ids), r.score, r.critic_logp) for r in rows}
    one, other, both = scores.values()
    assert len(both) == 8 * 4 and one.keys() == other.keys() == both.keys()
    assert all(one[k][0] == other[k][0] == both[k][0] for k in both)  # the very same candidates
    assert all(
        abs(both[k][1] - (one[k][1] + other[k][1]) / 2) < 1e-5
        and abs(both[k][2] - (one[k][2] + other[k][2]) / 2) < 1e-5
        for k in both
    )
    assert max(abs(one[k][1] - other[k][1]) for k in both) > 1e-2  # the two critics do disagree
    with store.read() as session:
        run = session.get(TrainingRun, result.run_id)
    assert run.config["critic_checkpoint_id"] == [ranking_critic.checkpoint_id, blank_critic]
