"""The training losses and the SWEET-RL advantage against numbers worked out by hand,
and the pair rules. No model is loaded here."""
from __future__ import annotations

import math

import pytest
import torch

from colbench.training.data import DataError, Graded, Pair, build_pairs, pair_rule, split_heldout
from colbench.training.losses import (
    bradley_terry_loss,
    critic_scores,
    dpo_loss,
    nll_loss,
    token_logps_from_logits,
    turn_advantages,
)


def softplus(x: float) -> float:  # -log σ(x) = log(1 + e^-x)
    return math.log1p(math.exp(-x))


def test_bradley_terry_by_hand():
    chosen = torch.tensor([1.0, 0.0])
    rejected = torch.tensor([0.0, 2.0])
    # pair 1: -log σ(1) = log(1 + e^-1) = 0.313262; pair 2: -log σ(-2) = log(1 + e^2) = 2.126928
    expected = (0.313262 + 2.126928) / 2
    assert bradley_terry_loss(chosen, rejected).item() == pytest.approx(expected, abs=1e-5)
    assert bradley_terry_loss(torch.tensor([3.0]), torch.tensor([3.0])).item() == pytest.approx(math.log(2), abs=1e-6)


def test_dpo_by_hand():
    policy_chosen = torch.tensor([-10.0, -5.0])
    policy_rejected = torch.tensor([-12.0, -5.0])
    ref_chosen = torch.tensor([-11.0, -4.0])
    ref_rejected = torch.tensor([-11.0, -6.0])
    # pair 1: (−10+11) − (−12+11) = 2 → β·2 = 0.2 → log(1+e^-0.2) = 0.598139
    # pair 2: (−5+4) − (−5+6) = −2 → β·(−2) = −0.2 → log(1+e^0.2) = 0.798139
    loss = dpo_loss(policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta=0.1)
    assert loss.item() == pytest.approx((0.598139 + 0.798139) / 2, abs=1e-5)
    assert softplus(0.2) == pytest.approx(0.598139, abs=1e-6)
    assert softplus(-0.2) == pytest.approx(0.798139, abs=1e-6)


def test_conservative_dpo_and_ipo_by_hand():
    args = (
        torch.tensor([-10.0, -5.0]),
        torch.tensor([-12.0, -5.0]),
        torch.tensor([-11.0, -4.0]),
        torch.tensor([-11.0, -6.0])
    )
    # margins 2 and −2 (test_dpo_by_hand); ε = 0.25: 0.75·softplus(β·m) + 0.25·softplus(−β·m) per pair
    smoothed = dpo_loss(*args, beta=0.1, label_smoothing=0.25)
    expected = (0.75 * softplus(0.2) + 0.25 * softplus(-0.2) + 0.75 * softplus(-0.2) + 0.25 * softplus(0.2)) / 2
    assert smoothed.item() == pytest.approx(expected, abs=1e-6)
    # ε = 0.5 cannot tell the sides apart: the loss is the same whatever the margin's sign
    assert dpo_loss(*args, beta=0.1, label_smoothing=0.5).item() == pytest.approx((softplus(0.2) + softplus(-0.2)) / 2,
                                                                                  abs=1e-6)
    # IPO: (m − 1/(2β))², target 5 at β = 0.1: (2 − 5)² = 9 and (−2 − 5)² = 49
    assert dpo_loss(*args, beta=0.1, loss_type="ipo").item() == pytest.approx((9 + 49) / 2)
    margin = torch.tensor([5.0], requires_grad=True)  # at the target, IPO stops pushing; DPO never does
    dpo_loss(margin, torch.zeros(1), torch.zeros(1), torch.zeros(1), beta=0.1, loss_type="ipo").backward()
    assert margin.grad.item() == 0.0
    with pytest.raises(ValueError):
        dpo_loss(*args, loss_type="hinge")


def test_displacement_stops_on_the_chosen_reward_averaged_over_the_last_steps():
    from types import SimpleNamespace

    from colbench.training.trainer import DISPLACEMENT_WINDOW, displaced, displacement_figures

    one = SimpleNamespace(num_processes=1)
    falling = [{"chosen_reward": 0.1 - 0.05 * k, "rejected_reward": -0.2 * k, "nll": 0.3 + 0.1 * k} for k in range(10)]
    assert displaced(one, falling[:DISPLACEMENT_WINDOW - 1], 0.0) is None  # too few steps to judge
    assert displaced(one, falling[:5], 0.05) is None  # mean of 0.1 .. -0.1 is 0.0
    why = displaced(one, falling[:6], 0.05)  # mean of 0.05 .. -0.15 is -0.05: not below -0.05
    assert why is None and displaced(one, falling[:7], 0.05).startswith("likelihood displacement")  # mean -0.1
    figures = displacement_figures(one, falling)
    assert figures["last_steps"] == 2 and figures["last_chosen_reward"] == pytest.approx((-0.3 - 0.35) / 2)
    assert figures["last_nll"] == pytest.approx((1.1 + 1.2) / 2) and figures["first_nll"] == pytest.approx(
        (0.3 + 0.4) / 2
    )


def test_nll_averages_over_masked_tokens():
    logps = torch.tensor([[-1.0, -2.0, -3.0], [-4.0, -5.0, -6.0]])
    mask = torch.tensor([[0, 1, 1], [0, 0, 1]])
    assert nll_loss(logps, mask).item() == pytest.approx((2 + 3 + 6) / 3)


# One row: position 0 is c, 1-2 agent turn 0, 3 a human token, 4 agent turn 1, 5 padding.
POLICY = torch.tensor([[0.0, -1.0, -2.0, -3.0, -4.0, 0.0]])
REF = torch.tensor([[0.0, -2.0, -2.0, -1.0, -5.0, -9.0]])
TURNS = torch.tensor([[-1, 0, 0, -1, 1, -1]])
# log-ratios at agent tokens: +1, 0 (turn 0) and +1 (turn 1); the human token (−2) and
# the padding (+9) must not count.


def test_advantage_per_turn_by_hand():
    advantages = turn_advantages(POLICY, REF, TURNS, normalize="turn")
    assert advantages.tolist() == [[0.5, 1.0]]  # (1 + 0) / 2 and 1 / 1
    assert critic_scores(POLICY, REF, TURNS, beta=0.1, normalize="turn").item() == pytest.approx(0.15)


def test_advantage_per_trajectory_by_hand():
    advantages = turn_advantages(POLICY, REF, TURNS, normalize="trajectory")
    assert advantages[0].tolist() == pytest.approx([1 / 3, 1 / 3])  # each turn's sum over all 3 agent tokens
    # Σ_t A = the mean log-ratio over all agent tokens: (1 + 0 + 1) / 3
    assert critic_scores(POLICY, REF, TURNS, beta=0.1, normalize="trajectory").item() == pytest.approx(0.2 / 3)


def test_no_normalisation_and_the_difference_it_makes():
    assert turn_advantages(POLICY, REF, TURNS, normalize="none").tolist() == [[1.0, 1.0]]
    # A long turn with a small per-token gain: per-turn normalisation keeps it small,
    # summing lets length alone dominate.
    policy = torch.zeros(1, 11)
    ref = torch.full((1, 11), -0.1)
    turns = torch.tensor([[-1] + [0] * 10])
    assert turn_advantages(policy, ref, turns, "turn").item() == pytest.approx(0.1)
    assert turn_advantages(policy, ref, turns, "none").item() == pytest.approx(1.0)


def test_batches_and_turns_without_tokens():
    policy = torch.cat([POLICY, torch.tensor([[0.0, 0.0, -1.0, -1.0, 0.0, 0.0]])])
    ref = torch.cat([REF, torch.tensor([[0.0, 0.0, -3.0, -2.0, 0.0, 0.0]])])
    # Row 2 has lost turn 0 to truncation: only turn 1 (+2, +1) remains.
    turns = torch.cat([TURNS, torch.tensor([[-1, -1, 1, 1, -1, -1]])])
    advantages = turn_advantages(policy, ref, turns, "turn")
    assert advantages.tolist() == [[0.5, 1.0], [0.0, 1.5]]
    assert turn_advantages(policy, ref, turns, "trajectory")[1].tolist() == [0.0, 1.5]
    with pytest.raises(ValueError):
        turn_advantages(policy, ref, turns, "tokens")


def test_advantage_gradient_flows_to_policy_only():
    policy = POLICY.clone().requires_grad_(True)
    critic_scores(policy, REF, TURNS, beta=0.1, normalize="turn").backward()
    # d/dlogp of 0.1·(mean over turn 0 + mean over turn 1)
    assert policy.grad.tolist() == [pytest.approx([0.0, 0.05, 0.05, 0.0, 0.1, 0.0])]


def test_token_logps_are_float32_log_softmax():
    logits = torch.randn(2, 3, 7).to(torch.bfloat16)
    targets = torch.randint(0, 7, (2, 3))
    out = token_logps_from_logits(logits, targets)
    assert out.dtype == torch.float32
    expected = torch.log_softmax(logits.float(), -1).gather(-1, targets[..., None]).squeeze(-1)
    assert torch.allclose(out, expected, atol=1e-6)


# ---------------------------------------------------------------- pairs


def test_backend_pairs_best_correct_against_each_lower():
    data = [
        Graded(5, 1, 1.0), Graded(3, 1, 1.0), Graded(4, 1, 0.5), Graded(6, 1, 0.0),  # task 1: two correct
        Graded(7, 2, 0.9), Graded(8, 2, 0.1),  # task 2: nothing fully correct → no pairs
        Graded(9, 3, 1.0),  # task 3: nothing lower
    ]
    pairs = build_pairs(data, pair_rule("backend"))
    # The first correct one by id (3) is chosen; the other correct one (5) is not used.
    assert pairs == [Pair(1, 3, 4), Pair(1, 3, 6)]


def test_frontend_pairs_at_least_a_tenth_apart():
    data = [Graded(1, 1, 0.80), Graded(2, 1, 0.75), Graded(3, 1, 0.65), Graded(4, 1, 0.55)]
    pairs = build_pairs(data, pair_rule("frontend"))
    # 0.80−0.75 = 0.05 is too close; 0.75−0.65 and 0.65−0.55 are exactly 0.1 apart and count
    # (0.65 − 0.55 is 0.0999… in floating point).
    assert set(pairs) == {Pair(1, 1, 3), Pair(1, 1, 4), Pair(1, 2, 3), Pair(1, 2, 4), Pair(1, 3, 4)}
    assert all(p.chosen < p.rejected for p in pairs)  # the higher reward is chosen


def test_margin_pairs_on_backend_use_the_share_of_tests_passed():
    data = [Graded(1, 1, 0.3), Graded(2, 1, 0.0), Graded(3, 1, 0.25), Graded(4, 2, 0.0), Graded(5, 2, 0.0)]
    assert build_pairs(data, "correct") == []  # nothing fully correct: the paper's rule has no pairs
    assert build_pairs(data, pair_rule("backend", "margin")) == [Pair(1, 1, 2), Pair(1, 3, 2)]
    with pytest.raises(DataError):
        pair_rule("backend", "best")


def test_incremental_pairs_keep_only_those_touching_new_data():
    data = [Graded(1, 1, 1.0), Graded(2, 1, 0.0), Graded(3, 1, 0.2)]
    assert build_pairs(data, "correct", new_ids={3}) == [Pair(1, 1, 3)]  # the old success pairs with the new failure
    assert build_pairs(data, "correct", new_ids=set()) == []


def test_heldout_split_is_by_task():
    pairs = [Pair(task, task * 10, task * 10 + k) for task in range(10) for k in (1, 2)]
    train, held = split_heldout(pairs, 0.2, seed=0)
    held_tasks = {p.task_id for p in held}
    assert len(held_tasks) == 2 and not held_tasks & {p.task_id for p in train}
    assert len(train) + len(held) == len(pairs)
    assert split_heldout(pairs, 0.2, seed=0) == (train, held)  # deterministic
    assert split_heldout(pairs[:2], 0.5, seed=0)[1] == []  # one task: nothing to hold out
    assert len({p.task_id for p in split_heldout(pairs[:4], 0.01, seed=0)[1]}) == 1  # at least one task
