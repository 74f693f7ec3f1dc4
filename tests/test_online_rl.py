"""Online multi-turn RL (colbench/online_rl.py: grpo, rloo): the advantages and the clipped loss worked out by hand,
the sign of an update on a real tiny model, the task draw and the turn credit, then whole runs on the tiny model
through the normal rollout (backend-lite in the sandbox; the plugin's learnable brevity family): dialogues stored per
step with the sampler's log-probs, a resumed run that repeats no rollout, the critic's credit moving an update that
group advantages alone would not, and a policy whose reward rises."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from sqlmodel import col, select

from colbench.online_rl import (
    _per_position,
    Dialogue,
    aggregation_factors,
    collapse_line,
    dialogue_credit,
    mask_turns,
    oracle_values,
    penalise_turns,
    read_dialogues,
    turn_token_counts,
    policy_backward,
    run_policies,
    set_advantages,
    state_file,
    step_policy,
    step_tasks,
)
from colbench.store import queries
from colbench.store.db import Database
from colbench.store.models import Lineage, RolloutRun, TrainingRun, Trajectory, Turn
from colbench.training import sequences as S
from colbench.model_refs import get_checkpoint
from colbench.training.config import PolicyConfig
from colbench.training.losses import clipped_policy_loss, group_advantages
from colbench.training.policy import fit_policy

HERE = Path(__file__).parent


def plugin_path() -> str:
    """PYTHONPATH with the test plugin package (tests/plugin_package: the learnable brevity family) in front."""
    return os.pathsep.join([str(HERE / "plugin_package"), os.environ.get("PYTHONPATH", "")])


def plugin_env(**variables) -> dict:
    """This process's environment for a colbench subprocess that sees the plugin package, with ``variables``."""
    return dict(os.environ, PYTHONPATH=plugin_path(), **variables)


# ---------------------------------------------------------------- by hand


def test_group_advantages_by_hand():
    rewards = torch.tensor([1.0, 0.0, 0.5, 0.5, 1.0, 1.0])
    groups = torch.tensor([0, 0, 0, 0, 1, 1])
    std = math.sqrt((0.25 + 0.25) / 3)  # the first group's, unbiased
    grpo = group_advantages(rewards, groups, "grpo")
    assert grpo.tolist() == pytest.approx([0.5 / std, -0.5 / std, 0, 0, 0, 0], rel=1e-5)
    dr_grpo = group_advantages(rewards, groups, "grpo", scale=False)
    assert dr_grpo.tolist() == pytest.approx([0.5, -0.5, 0, 0, 0, 0])
    rloo = group_advantages(rewards, groups, "rloo")
    # Leave-one-out: 1 − mean(0, .5, .5) = 2/3; 0 − mean(1, .5, .5) = −2/3; .5 − mean(1, 0, .5) = 0.
    assert rloo.tolist() == pytest.approx([2 / 3, -2 / 3, 0, 0, 0, 0])
    with pytest.raises(ValueError, match="grpo, rloo"):
        group_advantages(rewards, groups, "ppo")


def test_clipped_loss_by_hand_ratios_clipping_and_masks():
    # Three agent tokens and one masked one: ratios e^.5 (A +1, clipped to 1.2), e^-.5 (A +1, not clipped: the
    # minimum is the unclipped .607), e^.5 (A −1: the minimum is the unclipped −1.649).
    logps = torch.tensor([[-1.0, -2.0, -1.0, -3.0]], requires_grad=True)
    old = torch.tensor([[-1.5, -1.5, -1.5, -9.0]])
    advantages = torch.tensor([[1.0, 1.0, -1.0, 5.0]])
    mask = torch.tensor([[True, True, True, False]])
    loss, stats = clipped_policy_loss(logps, old, advantages, mask, clip=0.2)
    e = math.exp(0.5)
    assert float(loss.detach()) == pytest.approx(-(1.2 + 1 / e - e) / 3, rel=1e-6)
    # Every ratio is beyond [0.8, 1.2], but clipping binds (cuts the gradient) on the first token only.
    assert stats["clip_fraction"] == pytest.approx(1 / 3)
    loss.backward()
    # The clipped token gets no gradient, the masked one none either; the others ∓ratio·A/3.
    assert logps.grad.tolist()[0] == pytest.approx([0.0, -(1 / e) / 3, e / 3, 0.0], rel=1e-6)
    # The KL term: k3 = e^(ref − logp) − (ref − logp) − 1 per agent token, averaged, times β.
    ref = torch.tensor([[-1.0, -1.0, -2.0, 0.0]])
    with_kl, stats = clipped_policy_loss(logps.detach(), old, advantages, mask, clip=0.2, ref_logps=ref, kl_beta=0.5)
    k3 = [0.0, math.exp(1) - 1 - 1, math.exp(-1) + 1 - 1]
    assert stats["kl"] == pytest.approx(sum(k3) / 3, rel=1e-6)
    k2 = [0.0, 0.5, 0.5]  # the loss: ½(logp − ref)²
    assert float(with_kl) == pytest.approx(float(loss.detach()) + 0.5 * sum(k2) / 3, rel=1e-6)


def test_clip_high_lets_a_rewarded_token_grow_further_and_weights_scale_each_tokens_gradient():
    logps = torch.tensor([[-1.0, -1.0, -2.0]], requires_grad=True)
    old = torch.tensor([[-1.5, -1.5, -1.5]])  # ratios e^.5 = 1.65, 1.65, e^-.5
    advantages = torch.tensor([[1.0, 1.0, 1.0]])
    mask = torch.ones(1, 3, dtype=torch.bool)
    e = math.exp(0.5)
    loss, stats = clipped_policy_loss(logps, old, advantages, mask, clip=0.2)
    loss.backward()
    assert logps.grad.tolist()[0] == pytest.approx([0.0, 0.0, -(1 / e) / 3])
    assert stats["clip_fraction"] == pytest.approx(2 / 3)
    logps.grad = None
    loss, stats = clipped_policy_loss(logps, old, advantages, mask, clip=0.2, clip_high=0.7,
                                      sampler_weights=torch.tensor([[2.0, 0.5, 1.0]]))
    loss.backward()
    # Within [0.8, 1.7] nothing binds; each token's gradient is its weight times −ratio·A/3.
    assert logps.grad.tolist()[0] == pytest.approx([-2 * e / 3, -0.5 * e / 3, -(1 / e) / 3], rel=1e-6)
    assert stats["clip_fraction"] == 0.0


def test_the_kl_terms_gradient_is_that_of_kl_from_the_policy_to_the_reference():
    """Over a whole vocabulary, the KL term's gradient averaged over tokens drawn from π equals the exact gradient of
    KL(π‖π_ref) (k3 used as a loss would give KL(π_ref‖π)'s instead)."""
    torch.manual_seed(0)
    theta = torch.randn(6, requires_grad=True)
    ref = torch.log_softmax(torch.randn(6), 0)
    policy = torch.log_softmax(theta, 0)
    exact = torch.autograd.grad((policy.exp() * (policy - ref)).sum(), theta, retain_graph=True)[0]
    probs = policy.detach().exp()
    expected = torch.zeros(6)
    for v in range(6):
        logp = torch.log_softmax(theta, 0)[v].reshape(1, 1)
        loss, _ = clipped_policy_loss(logp, logp.detach(), torch.zeros(1, 1), torch.ones(1, 1, dtype=torch.bool),
                                      ref_logps=ref[v].reshape(1, 1), kl_beta=1.0)
        expected += probs[v] * torch.autograd.grad(loss, theta)[0]
    assert torch.allclose(expected, exact, atol=1e-6)
    reverse = torch.autograd.grad((ref.exp() * (ref - policy)).sum(), theta)[0]
    assert not torch.allclose(expected, reverse, atol=1e-3)


def test_pi_old_replaces_the_samplers_logprobs_and_the_importance_weight_is_capped(tiny_model_dir, tokenizer):
    """The trainer's own log-probs become π_old; the sampler's stored ones, here the trainer's shifted by known
    amounts, give the mismatch figures and the truncated weights, per token and per turn."""
    from transformers import AutoModelForCausalLM

    from colbench.online_rl import Dialogue, old_policy_logps
    from colbench.training.modeling import TokenLogProbs

    ids = tokenizer("Should it accept floats? Yes, floats too, and ints.")["input_ids"]
    turn_ids = [-1] * 3 + [0] * 3 + [-1] + [1] * (len(ids) - 7)
    row = S.Seq(input_ids=ids, turn_ids=turn_ids)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
    scorer = TokenLogProbs(model)
    with torch.no_grad():
        exact = scorer(torch.tensor([ids]), torch.ones(1, len(ids)), torch.tensor([turn_ids]) >= 0)[0].tolist()
    # The sampler is 0.1 nats more confident on turn 0's tokens and 2 nats less on turn 1's first token.
    shift = [0.0 if t < 0 else (0.1 if t == 0 else 0.0) for t in turn_ids]
    shift[7] = -2.0
    sampled = [e + d if t >= 0 else 0.0 for e, d, t in zip(exact, shift, turn_ids)]
    agent = [p for p, t in enumerate(turn_ids) if t >= 0]
    results = {}
    for level in ("token", "sequence"):
        dialogue = Dialogue(1, 1, 1.0, [row], [list(sampled)], [[0.0] * len(ids)], 2, len(agent))
        figures = old_policy_logps(scorer, [dialogue], 1, pad_id=tokenizer.pad_token_id, device="cpu", pass_rows=2,
                                   cap=2.0, level=level, spare=dialogue)
        assert dialogue.sampled == [sampled]
        assert [dialogue.old[0][p] for p in agent] == pytest.approx([exact[p] for p in agent], abs=1e-5)
        results[level] = dialogue.weight[0], figures
    weights, figures = results["token"]
    # Per token: e^(−0.1) on turn 0, min(e^2, 2) = 2 on the shifted token, 1 elsewhere.
    assert [weights[p] for p in agent] == pytest.approx(
        [math.exp(-0.1)] * 3 + [2.0] + [1.0] * (len(agent) - 4), rel=1e-4)
    assert figures["mismatch_max"] == pytest.approx(2.0, rel=1e-4)
    assert figures["mismatch_mean"] == pytest.approx((0.3 + 2.0) / len(agent), rel=1e-3)
    assert figures["tis_capped"] == pytest.approx(1 / len(agent))
    assert figures["mismatch_kl"] == pytest.approx(
        (3 * (math.exp(-0.1) + 0.1 - 1) + math.exp(2) - 2 - 1) / len(agent), rel=1e-3)
    weights, _ = results["sequence"]
    # Per turn: turn 0's product e^(−0.3); turn 1's e^2, capped at 2.
    assert [weights[p] for p in agent] == pytest.approx([math.exp(-0.3)] * 3 + [2.0] * (len(agent) - 3), rel=1e-4)


def test_turns_whose_context_max_len_cut_are_left_out_and_counted():
    from colbench.online_rl import mask_cut_context

    prompt = list(range(10, 40))
    turns = [S.AgentTurn(None, prompt[:8], [1, 2]),
             S.AgentTurn(None, prompt[:8] + [1, 2] + prompt[8:30], [3, 4, 5])]
    rows = S.pack(turns, (), max_len=20)
    assert [row.truncated for row in rows] == [False, True]  # the second turn's 32-token prompt was cut
    assert mask_cut_context(rows) == 1
    assert rows[0].turn_ids.count(0) == 2 and all(t < 0 for t in rows[1].turn_ids)


def test_online_rl_refuses_a_temperature_its_ratio_would_ignore(tmp_path):
    from colbench.training.config import DataError

    db = Database(f"sqlite:///{tmp_path / 'online.db'}")
    with pytest.raises(DataError, match="temperature 1 .* got --temperature 0.7"):
        fit_policy(db, PolicyConfig(**SMALL | {"temperature": 0.7}), algo="grpo", base_model="smollm2")
    db.close()


def test_a_constant_schedule_keeps_its_rate_after_the_warm_up():
    rates = {}
    for schedule in ("cosine", "constant"):
        config = PolicyConfig(lr_schedule=schedule, warmup_ratio=0.2, lr=1e-3)
        optimizer, scheduler = config.optimizer([torch.nn.Parameter(torch.zeros(1))], 10)
        seen = []
        for _ in range(10):
            seen.append(scheduler.get_last_lr()[0])
            optimizer.step()
            scheduler.step()
        rates[schedule] = seen
    assert rates["constant"][0] == 0.0 and rates["constant"][2:] == [pytest.approx(1e-3)] * 8
    assert rates["cosine"][-1] < 1e-4


def test_each_token_gets_its_dialogues_advantage_plus_its_turns_credit():
    row = S.Seq(input_ids=[1, 2, 3, 4, 5, 6, 7], turn_ids=[-1, -1, 0, 0, -1, 1, 1])
    other = S.Seq(input_ids=[1, 2, 3], turn_ids=[-1, 0, 0])
    from colbench.online_rl import Dialogue

    dialogues = [Dialogue(1, 1, 1.0, [row], [[0.0] * 7], [[0.0] * 7], 2, 4),
                 Dialogue(2, 1, 0.0, [other], [[0.0] * 3], [[0.0] * 3], 1, 2)]
    set_advantages(dialogues, [0.5, -0.5], [[1.0, -2.0], [3.0]])
    assert dialogues[0].advantage == [[0.0, 0.0, 1.5, 1.5, 0.0, -1.5, -1.5]]
    assert dialogues[1].advantage == [[0.0, 2.5, 2.5]]
    set_advantages(dialogues, [0.5, -0.5], None)
    assert dialogues[0].advantage == [[0.0, 0.0, 0.5, 0.5, 0.0, 0.5, 0.5]]
    # The sampler's log-probs land on their own turn's tokens, in order.
    assert _per_position(row, [[-0.1, -0.2], [-0.3, -0.4]]) == [0.0, 0.0, -0.1, -0.2, 0.0, -0.3, -0.4]


def test_turn_credit_only_moves_a_dialogues_advantage_between_its_turns():
    values = [[1.0, 0.0, None], [0.0, 3.0], [5.0]]
    tokens = [[1, 3, 2], [2, 2], [4]]
    advantages = [1.0, -1.0, 0.0]
    credit = dialogue_credit(values, tokens, advantages, weight=2.0)
    # Centred on each dialogue's token-weighted mean: 1/4 in the first, 1.5 in the second; a lone turn has none.
    centred = [0.75, -0.25, -1.5, 1.5, 0.0]
    std = math.sqrt(sum(c * c for c in centred) / 5)
    scale = 2.0 * math.sqrt((1 + 1 + 0) / 3) / std
    assert credit == [[pytest.approx(0.75 * scale), pytest.approx(-0.25 * scale), 0.0],
                      [pytest.approx(-1.5 * scale), pytest.approx(1.5 * scale)], [0.0]]
    # The dialogue's mean advantage over its trained tokens is its group advantage, whatever the values' offset.
    for turns, counts, a in zip(credit, tokens, advantages):
        valued = [(c, n) for c, n in zip(turns, counts)]
        assert sum((a + c) * n for c, n in valued) / sum(counts) == pytest.approx(a)
    shifted = dialogue_credit([[v + 7 if v is not None else None for v in turns] for turns in values], tokens,
                              advantages, weight=2.0)
    assert shifted == [[pytest.approx(c) for c in turns] for turns in credit]
    # A step without spread learns nothing, credit included; a turn with no trained tokens gets none.
    assert dialogue_credit(values, tokens, [0.0, 0.0, 0.0], 1.0) == [[0.0] * 3, [0.0] * 2, [0.0]]
    masked = dialogue_credit([[1.0, 0.0]], [[2, 0]], [1.0], 1.0)
    assert masked == [[0.0, 0.0]]
    row = S.Seq(input_ids=[1] * 6, turn_ids=[-1, 0, 0, -1, 1, -1])
    assert turn_token_counts(Dialogue(1, 1, 0.0, [row], [[0.0] * 6], [[0.0] * 6], 3, 3)) == [2, 1, 0]


def test_a_turn_the_critic_credits_more_gains_log_prob_against_its_dialogues_other_turns(tiny_model_dir, tokenizer):
    """Direction and placement: the same dialogue (one ask, one answer) and the same outcome, the critic's values
    on its two turns in either order: the turn valued higher gains log-prob relative to the other, and swapping
    (negating) the values reverses it."""
    from transformers import AutoModelForCausalLM

    from colbench.training.modeling import TokenLogProbs, attach_lora

    ask = tokenizer("Should it accept floats?")["input_ids"]
    answer = tokenizer("def f(x): return round(x, 2)")["input_ids"]
    prompt = tokenizer("Write f.")["input_ids"]
    ids = prompt + ask + prompt[:2] + answer
    turns = [-1] * len(prompt) + [0] * len(ask) + [-1, -1] + [1] * len(answer)
    moved = {}
    for name, values in (("ask", [1.0, -1.0]), ("answer", [-1.0, 1.0])):
        torch.manual_seed(0)
        model = attach_lora(AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32), 4, 8)
        scorer = TokenLogProbs(model)
        row = S.Seq(input_ids=ids, turn_ids=list(turns))
        other = S.Seq(input_ids=ids, turn_ids=list(turns))
        tensor = torch.tensor([ids])
        mask, target = torch.ones_like(tensor), torch.tensor([turns]) >= 0
        with torch.no_grad():
            before = scorer(tensor, mask, target)[0]
        dialogues = [Dialogue(1, 1, 1.0, [row], [before.tolist()], [[0.0] * len(ids)], 2, len(ask) + len(answer)),
                     Dialogue(2, 1, 0.0, [other], [before.tolist()], [[0.0] * len(ids)], 2, len(ask) + len(answer))]
        per_dialogue = group_advantages(torch.tensor([1.0, 0.0]), torch.tensor([0, 0])).tolist()
        credit = dialogue_credit([values, [0.0, 0.0]], [turn_token_counts(d) for d in dialogues], per_dialogue, 1.0)
        set_advantages(dialogues[:1], per_dialogue[:1], credit[:1])  # the rewarded dialogue alone
        optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.2)
        for _ in range(3):
            optimizer.zero_grad()
            policy_backward(scorer, dialogues[0].training_rows(), 1, None, lambda loss: loss.backward(),
                            pad_id=tokenizer.pad_token_id, device="cpu", clip=10.0, kl_beta=0.0)
            optimizer.step()
        with torch.no_grad():
            gain = scorer(tensor, mask, target)[0] - before
        per_turn = [float(gain[torch.tensor(turns) == t].mean()) for t in (0, 1)]
        moved[name] = per_turn[0] - per_turn[1]  # the ask's gain over the answer's, per token
    assert moved["ask"] > 0.05 and moved["answer"] < -0.05, moved


def test_loss_aggregations_weigh_tokens_dialogues_or_a_constant(tiny_model_dir, tokenizer):
    """'dialogue-mean' is the mean over dialogues of each one's token mean; 'constant' the tokens' sum over the
    dialogues times their budget; 'token-mean' every token alike (by hand, and through the real loss)."""
    from transformers import AutoModelForCausalLM

    from colbench.training.modeling import TokenLogProbs, attach_lora

    def dialogue(n: int, text: str, advantage: float) -> Dialogue:
        ids = tokenizer(text)["input_ids"]
        row = S.Seq(input_ids=ids, turn_ids=[-1] * (len(ids) - n) + [0] * n)
        return Dialogue(n, 1, 0.0, [row], [[-2.0] * len(ids)], [[0.0] * (len(ids) - n) + [advantage] * n], 1, n)

    short, long = dialogue(2, "Yes, floats.", 1.0), dialogue(6, "Round half up to two places, keep the sign.", -0.5)
    assert aggregation_factors("token-mean", [short, long], 10) == {id(short): 1.0, id(long): 1.0}
    assert aggregation_factors("dialogue-mean", [short, long], 10) == {id(short): 2.0, id(long): pytest.approx(8 / 12)}
    assert aggregation_factors("constant", [short, long], 10) == {id(short): 0.4, id(long): 0.4}
    torch.manual_seed(0)
    scorer = TokenLogProbs(attach_lora(AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32), 4, 8))

    def loss(dialogues, factors=None):
        rows = [r for d in dialogues for r in d.training_rows((factors or {}).get(id(d), 1.0))]
        return policy_backward(scorer, rows, 1, None, lambda _: None, pad_id=tokenizer.pad_token_id, device="cpu",
                               clip=0.2, kl_beta=0.0)["policy_loss"]

    alone = [loss([short]), loss([long])]
    assert loss([short, long], aggregation_factors("dialogue-mean", [short, long], 10)) == pytest.approx(
        sum(alone) / 2, rel=1e-5)
    assert loss([short, long]) == pytest.approx((alone[0] * 2 + alone[1] * 6) / 8, rel=1e-5)
    assert loss([short, long], aggregation_factors("constant", [short, long], 10)) == pytest.approx(
        (alone[0] * 2 + alone[1] * 6) / 20, rel=1e-5)


def test_turns_cut_at_the_token_limit_are_found_masked_or_penalised(tiny_model_dir, tokenizer, tmp_path):
    from colbench.rollout import run as rollout
    from colbench.rollout_config import RolloutConfig

    db = Database(f"sqlite:///{tmp_path / 'cut.db'}")
    found = {}
    for tokens in (4, 400):
        rollout(db, RolloutConfig(engine="scripted:expert", tasks="backend-lite:train", limit=1, max_new_tokens=tokens,
                                  sandbox="bwrap", name=f"cut-{tokens}"))
        with db.read() as session:
            trajectory = session.exec(select(Trajectory).order_by(col(Trajectory.id).desc())).first()
        dialogues, _ = read_dialogues(db, tokenizer, "backend", [trajectory], 2048)
        found[tokens] = dialogues[0]
    db.close()
    cut, whole = found[4], found[400]
    assert whole.cut_turns == [] and cut.cut_turns == list(range(cut.agent_turns)) and cut.agent_turns >= 2
    set_advantages([cut], [0.5], None)
    penalise_turns(cut, [0], 1.0)
    first = [a for a, t in zip(cut.advantage[0], cut.rows[0].turn_ids) if t == 0]
    later = [a for a, t in zip(cut.advantage[0], cut.rows[0].turn_ids) if t == 1]
    assert first and set(first) == {-1.0} and set(later) == {0.5}
    mask_turns(cut, [0])
    assert turn_token_counts(cut)[0] == 0 and turn_token_counts(cut)[1] > 0


def test_the_collapse_guard_names_a_rising_entropy():
    assert collapse_line(3, 2.0, 1.0, 2.0) is None
    assert collapse_line(3, 2.5, 1.0, 0.0) is None  # not watched
    assert collapse_line(3, 2.5, 1.0, 2.0) == ("step 3: entropy 2.5 is 2.5x step 1's 1 (past --collapse-entropy 2):"
                                               " the policy is collapsing")


def test_the_task_draw_covers_the_split_before_repeating_and_is_seeded():
    tasks = list(range(10, 20))
    drawn = [step_tasks(tasks, k, 3, seed=0) for k in range(1, 8)]
    assert all(len(set(d)) == 3 for d in drawn)
    first_pass = [t for d in drawn[:3] for t in d]
    assert len(set(first_pass)) == 9  # nine distinct tasks before any repeats
    assert drawn == [step_tasks(tasks, k, 3, seed=0) for k in range(1, 8)]
    assert drawn != [step_tasks(tasks, k, 3, seed=1) for k in range(1, 8)]
    assert step_policy(4, 2) == "online:4:step-2" and run_policies(4) == "online:4:step-*"


def test_the_update_raises_a_rewarded_turn_and_lowers_a_punished_one(tiny_model_dir, tokenizer):
    """The sign: a positive advantage makes the turn's tokens likelier, a negative one less likely."""
    from transformers import AutoModelForCausalLM

    from colbench.training.modeling import TokenLogProbs, attach_lora

    ids = torch.tensor([tokenizer("Should it accept floats? Yes, floats too.")["input_ids"]])
    mask = torch.ones_like(ids)
    target = torch.ones_like(ids, dtype=torch.bool)
    target[:, :4] = False  # the prompt: not the agent's
    moved = {}
    for sign in (1.0, -1.0):
        torch.manual_seed(0)
        model = attach_lora(AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32), 4, 8)
        scorer = TokenLogProbs(model)
        with torch.no_grad():
            old = scorer(ids, mask, target)
        optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
        for _ in range(3):
            loss, _ = clipped_policy_loss(scorer(ids, mask, target), old, torch.full(ids.shape, sign), target, 0.2)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            moved[sign] = float(((scorer(ids, mask, target) - old) * target).sum())
    assert moved[1.0] > 0.1 and moved[-1.0] < -0.1


def test_passes_add_up_to_one_pass_over_every_row(tiny_model_dir, tokenizer):
    """--pass-rows: a minibatch split into passes gets the gradient and the figures of one pass over all its rows
    (rows of different lengths: each pass's token mean is weighted by its tokens, not averaged as passes)."""
    from transformers import AutoModelForCausalLM

    from colbench.training.modeling import TokenLogProbs, attach_lora

    texts = ["Should it accept floats? Yes.", "Which separator do you use between the fields of each record?",
             "Round half up, to two places, and keep the sign."]
    rows = []
    for n, text in enumerate(texts):
        ids = tokenizer(text)["input_ids"]
        seq = S.Seq(input_ids=ids, turn_ids=[-1] * 3 + [0] * (len(ids) - 3))
        old = [0.0] * 3 + [-2.0 - 0.1 * i for i in range(len(ids) - 3)]
        rows.append((seq, old, [0.0] * 3 + [(-1.0) ** n * (1 + 0.5 * n)] * (len(ids) - 3)))
    torch.manual_seed(0)
    model = attach_lora(AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32), 4, 8)
    scorer = TokenLogProbs(model)
    found = {}
    for passes in (1, 3):
        model.zero_grad()
        figures = policy_backward(scorer, rows, passes, None, lambda loss: loss.backward(),
                                  pad_id=tokenizer.pad_token_id, device="cpu", clip=0.2, kl_beta=0.0)
        found[passes] = figures, [p.grad.clone() for p in model.parameters() if p.requires_grad]
    (one, one_grads), (three, three_grads) = found[1], found[3]
    assert any(g.abs().sum() > 0 for g in one_grads)
    assert all(torch.allclose(a, b, atol=1e-6, rtol=1e-4) for a, b in zip(one_grads, three_grads))
    assert three == pytest.approx(one, rel=1e-5)


# ---------------------------------------------------------------- whole runs on the tiny model

SMALL = dict(tasks="backend-lite:train", steps=2, tasks_per_step=2, group=2, max_new_tokens=6, save_every=1,
             device="cpu", lora_rank=4, lr=1e-3, autocast="off", batch_size=4, sample_batch_size=8)


def step_dialogues(db, run_id: int) -> dict[int, list[int]]:
    """step → the ids of the dialogues stored under it."""
    with db.read() as session:
        rows = session.exec(select(Trajectory).where(col(Trajectory.policy).like(f"online:{run_id}:step-%"))).all()
    found: dict[int, list[int]] = {}
    for t in rows:
        found.setdefault(int(t.policy.rsplit("-", 1)[1]), []).append(t.id)
    return {k: sorted(v) for k, v in sorted(found.items())}


@pytest.mark.parametrize("algo", ["grpo", "rloo"])
def test_a_run_stores_each_steps_dialogues_and_resumes_without_redoing_one(tiny_model_dir, tmp_path, algo):
    db = Database(f"sqlite:///{tmp_path / 'online.db'}")
    config = PolicyConfig(**SMALL | {"steps": 3, "sandbox": "bwrap"})

    def stop_at_step_3(stage, done, total, figures):
        if stage == "online" and done == 2:  # steps 1 and 2 are finished (and checkpointed)
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        fit_policy(db, config, algo=algo, base_model=str(tiny_model_dir), on_progress=stop_at_step_3)
    with db.read() as session:
        run = session.exec(select(TrainingRun)).one()
        assert run.status == "failed"
        first = step_dialogues(db, run.id)
        turns = session.exec(select(Turn).where(Turn.role == "assistant")).all()
    assert sorted(first) == [1, 2] and all(len(ids) == 4 for ids in first.values())
    # Every agent turn kept its sampled ids and the sampler's log-prob of each.
    assert turns and all(t.token_ids and len(t.token_logprobs) == len(t.token_ids) for t in turns)

    result = fit_policy(db, config, algo=algo, base_model=str(tiny_model_dir))
    assert result.run_id == run.id  # the same command continued the stopped run
    after = step_dialogues(db, run.id)
    assert {k: after[k] for k in (1, 2)} == first  # no rollout of steps 1 and 2 was redone
    assert sorted(after) == [1, 2, 3] and len(after[3]) == 4
    with db.read() as session:
        run = session.get(TrainingRun, run.id)
        steps = queries.training_steps(session, run.id)
        checkpoints = queries.run_checkpoints(session, run.id)
    assert run.status == "done" and [s.step for s in steps] == [1, 2, 3]
    assert [c.step for c in checkpoints] == [1, 2, 3]  # every step saved, the last one as the run's checkpoint
    # The sampler's stored log-probs line up with the tokens: before the first update the ratio is 1.
    assert steps[0].values["sampler_ratio"] == pytest.approx(1.0, abs=1e-3)
    for key in ("reward", "success", "groups_with_spread", "kl", "clip_fraction", "entropy", "tokens_per_turn",
                "mismatch_mean", "mismatch_max", "mismatch_kl", "tis_capped", "turns_cut_context",
                "rollout_s", "grading_s", "train_s", "sync_s"):
        assert key in steps[-1].values, key
    db.close()


def test_a_finished_run_given_more_steps_continues_where_it_ended(tiny_model_dir, tmp_path):
    """`--steps 1 --name g`, then the same with `--steps 2`: the same run goes on from step 1's end (its dialogues
    reused, its final checkpoint kept as step 1's), and under a constant rate its weights are those of a straight
    2-step run. Any other changed setting, or no more steps, is refused in one line."""
    extended_db, straight_db = (f"sqlite:///{tmp_path / name}" for name in ("extended.db", "straight.db"))

    def colbench(*args, db=extended_db, fails=False):
        done = subprocess.run([sys.executable, "-m", "colbench.cli.app", *args], capture_output=True, text=True,
                              env=plugin_env(COLBENCH_DB=db), cwd=tmp_path, timeout=600)
        assert (done.returncode != 0) == fails, done.stderr[-2000:]
        return done.stderr

    command = ["policy", "fit", "--algo", "grpo", "--tasks", "brevity:train", "--model", str(tiny_model_dir),
               "--tasks-per-step", "1", "--group", "8", "--max-new-tokens", "4", "--batch-size", "4", "--lora-rank",
               "4", "--lr", "1e-2", "--lr-schedule", "constant", "--warmup-ratio", "0", "--device", "cpu",
               "--autocast", "off", "--name", "g"]
    colbench(*command, "--steps", "1")
    db = Database(extended_db)
    run_id = db_run_id(db, "g")
    step_1 = step_dialogues(db, run_id)
    with db.read() as session:
        [short] = queries.run_checkpoints(session, run_id)
    colbench(*command, "--steps", "2")
    dialogues = step_dialogues(db, run_id)
    assert sorted(dialogues) == [1, 2] and dialogues[1] == step_1[1]  # step 1 was not rolled out again
    with db.read() as session:
        run = session.get(TrainingRun, run_id)
        checkpoints = queries.run_checkpoints(session, run_id)
        lineage = session.exec(select(Lineage.trajectory_id).where(Lineage.run_id == run_id)).all()
    assert db_run_id(db, "g") == run_id and run.status == "done" and run.config["steps"] == 2
    assert [c.step for c in checkpoints] == [1, 2] and checkpoints[0].id == short.id
    assert checkpoints[0].path == short.path + "-step-1"  # moved beside the final folder, and still loadable
    get_checkpoint(db, f"ckpt:{short.id}")
    assert sorted(lineage) == dialogues[1] + dialogues[2]  # recorded once, whole

    said = colbench(*command[:-4], "--lr", "2e-2", *command[-4:], "--steps", "3", fails=True).strip()
    assert said == (f"error: train:{run_id} ('g') was made with other settings (--lr 0.01 there, 0.02 here): only"
                    " --steps can change to extend a run"), said
    said = colbench(*command, "--steps", "2", fails=True).strip()
    assert said == f"error: train:{run_id} has 2 steps already: give --steps above 2 to extend it", said
    with db.read() as session:
        assert session.get(TrainingRun, run_id).status == "done"  # a refusal leaves the run as it was

    colbench(*command, "--steps", "2", db=straight_db)
    straight = Database(straight_db)
    with straight.read() as session:
        [*_, straight_final] = queries.run_checkpoints(session, db_run_id(straight, "g"))
    extended_weights, straight_weights = (load_file(Path(folder) / "adapter_model.safetensors")
                                          for folder in (checkpoints[-1].path, straight_final.path))
    assert any(float(w.abs().max()) > 0 for k, w in straight_weights.items() if "lora_B" in k)
    for name, weight in straight_weights.items():
        assert torch.allclose(weight, extended_weights[name], atol=1e-6, rtol=1e-5), name

    # Unnamed, a longer run extends the newest unnamed one (never a named one).
    colbench(*command[:-2], "--steps", "1", db=straight_db)
    colbench(*command[:-2], "--steps", "2", db=straight_db)
    with straight.read() as session:
        runs = session.exec(select(TrainingRun).order_by(TrainingRun.id)).all()
    assert [(r.name, r.config["steps"], r.status) for r in runs] == [("g", 2, "done"), (None, 2, "done")]
    db.close()
    straight.close()


def test_gradient_accumulation_ends_with_each_steps_pass_as_the_schedule_counts(tiny_model_dir, tmp_path):
    """4 minibatches a step under --grad-accum 3: groups of 3 and 1, so 2 optimiser steps a step (the schedule's
    count), none of them spilling over into the next step's update."""
    db = Database(f"sqlite:///{tmp_path / 'accumulate.db'}")
    fit_policy(db, PolicyConfig(**SMALL | {"batch_size": 1, "grad_accum": 3, "sandbox": "bwrap"}), algo="grpo",
               base_model=str(tiny_model_dir))
    with db.read() as session:
        run = session.exec(select(TrainingRun)).one()
        step_1 = queries.run_checkpoints(session, run.id)[0]
    db.close()
    state = torch.load(state_file(step_1.path, 0), weights_only=False)
    assert step_1.step == 1 and state["scheduler"]["last_epoch"] == 2
    assert state["scheduler"]["_step_count"] == 3  # the scheduler's own count: once at its start, then each step


def test_dynamic_sampling_refills_groups_without_spread_up_to_its_cap(tiny_model_dir, tmp_path):
    """The tiny model fails every backend-lite task, so no group has spread: dynamic sampling draws its 3
    replacement tasks (group 2 each, stored under the step), drops every group, and trains on none; reward and
    success describe the first draw."""
    db = Database(f"sqlite:///{tmp_path / 'dynamic.db'}")
    result = fit_policy(db, PolicyConfig(**SMALL | {"steps": 1, "dynamic_sampling": 3, "sandbox": "bwrap"}),
                        algo="grpo", base_model=str(tiny_model_dir))
    with db.read() as session:
        step = queries.training_steps(session, result.run_id)[0].values
    stored = step_dialogues(db, result.run_id)
    db.close()
    assert step["refill_tasks"] == 3 and step["groups_dropped"] == 1.0 and step["dialogues"] == 4
    assert len(stored[1]) == (2 + 3) * 2 and "clip_fraction" not in step  # no update ran


def test_critic_credit_redistributes_the_outcome_and_so_moves_nothing_when_rewards_are_equal(tiny_model_dir,
                                                                                              tmp_path):
    """The tiny model solves no backend-lite task: every group's rewards are equal, so its group advantages are all 0
    and plain grpo leaves the policy as it was. The critic's credit only moves a dialogue's advantage between its
    turns, so it leaves the policy as it was too (a critic whose values added to the outcome would train here)."""
    from safetensors.torch import load_file

    from colbench.rollout import run as rollout
    from colbench.rollout_config import RolloutConfig
    from colbench.training.config import CriticConfig
    from colbench.training.critic import fit_critic

    db = Database(f"sqlite:///{tmp_path / 'credit.db'}")
    for engine in ("scripted:expert", "scripted:early@0"):  # a solved and a failed dialogue of each task: pairs
        rollout(db, RolloutConfig(engine=engine, tasks="backend-lite:train", limit=2, sandbox="bwrap"))
    critic = fit_critic(db, CriticConfig(split="lite-train", epochs=1, lora_rank=4, lr=1e-3, device="cpu",
                                         max_len=512, heldout_fraction=0.0), base_model=str(tiny_model_dir))
    weights = {}
    for credit in ("none", "critic"):
        config = PolicyConfig(**SMALL | {"steps": 1, "turn_credit": credit, "seed": 1, "critic_refit_every": 1,
                                         "name": f"credit-{credit}"})
        result = fit_policy(db, config, algo="grpo", base_model=str(tiny_model_dir),
                            critic_checkpoint=critic.checkpoint_id if credit == "critic" else None)
        weights[credit] = load_file(str(Path(result.path) / "adapter_model.safetensors"))
        with db.read() as session:
            rewards = [s.values["reward"] for s in queries.training_steps(session, result.run_id)]
            refits = [s.values.get("critic_pairs") for s in queries.training_steps(session, result.run_id)]
        assert rewards == [0.0]
    for credit in ("none", "critic"):
        assert all(float(w.abs().max()) == 0 for k, w in weights[credit].items() if "lora_B" in k), credit
    # The critic's continuation reads only the run's own groups: they hold no correct dialogue, so no pair, although
    # the store holds the scripted dialogues' pairs.
    assert refits == [0]
    db.close()


# The policy's updates, recorded in the process that runs them: the gradient accumulation each trains under.
RECORD_ACCUMULATION = """
import json, sys
from colbench import online_rl
from colbench.cli.app import main

seen = []
update = online_rl.OnlineRecipe.update


def recorded(self, dialogues):
    seen.append(self.trainer.accelerator.gradient_accumulation_steps)
    return update(self, dialogues)


online_rl.OnlineRecipe.update = recorded
try:
    main()
finally:
    print(json.dumps(seen), file=sys.stderr)
"""


def test_a_critic_refit_leaves_the_policy_its_own_gradient_accumulation(tiny_model_dir, tmp_path):
    """accelerate keeps one gradient state per process: a critic refit inside the run (its own trainer, here with
    --grad-accum 2) must not leave the policy's updates accumulating as the critic does. On the plugin's brevity
    family, whose groups differ in reward, so the refit has pairs and trains."""
    env = plugin_env(COLBENCH_DB=f"sqlite:///{tmp_path / 'refit.db'}")

    def colbench(*args, script=None, fails=False):
        command = [sys.executable, "-c", script, *args] if script else [sys.executable, "-m", "colbench.cli.app", *args]
        done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
        assert (done.returncode != 0) == fails, done.stderr[-2000:]
        return done

    tiny = str(tiny_model_dir)
    colbench("rollout", "--tasks", "brevity:train", "--model", tiny, "--max-new-tokens", "4", "-k", "4", "--limit", "2")
    critic = json.loads(colbench("critic", "fit", "--family", "brevity", "--split", "train", "--pairs", "margin",
                                 "--grad-accum", "2", "--batch-size", "2", "--lora-rank", "4", "--epochs", "1",
                                 "--model", tiny, "--device", "cpu", "--heldout-fraction", "0", "--json").stdout)
    done = colbench("policy", "fit", "--algo", "grpo", "--tasks", "brevity:train", "--model", tiny,
                    "--turn-credit", "critic", "--critic", critic["checkpoint"], "--critic-refit-every", "1",
                    "--steps", "2", "--tasks-per-step", "1", "--group", "8", "--max-new-tokens", "4", "--batch-size",
                    "8", "--lora-rank", "4", "--lr", "1e-2", "--device", "cpu", "--autocast", "off", "--json",
                    script=RECORD_ACCUMULATION)
    run_id = json.loads(done.stdout)["run_id"]
    db = Database(env["COLBENCH_DB"])
    with db.read() as session:
        refits = [s.values.get("critic_pairs") for s in queries.training_steps(session, run_id)]
    db.close()
    assert refits[0] > 0  # step 1's refit trained a critic (with accumulation 2) before step 2's update
    assert json.loads(done.stderr.strip().splitlines()[-1]) == [1, 1]
    # A checkpoint that is not a critic is refused in one line before any rollout.
    policy = json.loads(done.stdout)["checkpoint"]
    refused = colbench("policy", "fit", "--algo", "grpo", "--tasks", "brevity:train", "--model", tiny, "--turn-credit",
                       "critic", "--critic", policy, "--steps", "1", "--device", "cpu", "--name", "refused", fails=True)
    assert refused.stderr.strip().splitlines() == [
        f"error: --critic {policy} is a policy:grpo checkpoint, not a critic"]


# Records, in the process that trains, the trainable weights after each update and each refit's pairs; with
# INTERRUPT set, a Ctrl-C as the second update starts (its step's dialogues stored, no checkpoint yet).
RECORD_REPLAY = """
import json, os, sys, torch
from colbench import online_rl
from colbench.cli.app import main

out, updates, pairs = os.environ["RECORD"], [], []
update, refit = online_rl.OnlineRecipe.update, online_rl.OnlineRecipe.refit_critic


def recorded_update(self, dialogues):
    if os.environ.get("INTERRUPT") and updates:
        raise KeyboardInterrupt
    figures = update(self, dialogues)
    updates.append({k: v.detach().clone() for k, v in self.trainer.model.named_parameters() if v.requires_grad})
    torch.save(updates, out + ".pt")
    return figures


def recorded_refit(self, k):
    pairs.append(refit(self, k))
    with open(out + ".json", "w") as f:
        json.dump(pairs, f)
    return pairs[-1]


online_rl.OnlineRecipe.update, online_rl.OnlineRecipe.refit_critic = recorded_update, recorded_refit
main()
"""


def test_a_continued_run_replays_an_update_to_the_same_weights_and_refits_on_what_the_step_read(tiny_model_dir,
                                                                                                 tmp_path):
    """Stopped as step 2's update starts (no checkpoint: --save-every 5), the same command replays step 1 on its
    stored dialogues: its update gives the weights the first attempt's gave, and its critic refit reads step 1's
    groups only, though step 2's are in the store by then (its pairs are the first attempt's)."""
    env = plugin_env(COLBENCH_DB=f"sqlite:///{tmp_path / 'replay.db'}")

    def colbench(*args, script=None, fails=False, **variables):
        command = [sys.executable, "-c", script, *args] if script else [sys.executable, "-m", "colbench.cli.app", *args]
        done = subprocess.run(command, capture_output=True, text=True, env=env | variables, cwd=tmp_path, timeout=600)
        assert (done.returncode != 0) == fails, done.stderr[-2000:]
        return done

    tiny = str(tiny_model_dir)
    colbench("rollout", "--tasks", "brevity:train", "--model", tiny, "--max-new-tokens", "4", "-k", "4", "--limit", "2")
    critic = json.loads(colbench("critic", "fit", "--family", "brevity", "--split", "train", "--pairs", "margin",
                                 "--batch-size", "2", "--lora-rank", "4", "--epochs", "1", "--model", tiny,
                                 "--device", "cpu", "--heldout-fraction", "0", "--json").stdout)["checkpoint"]
    command = ["policy", "fit", "--algo", "grpo", "--tasks", "brevity:train", "--model", tiny, "--turn-credit",
               "critic", "--critic", critic, "--critic-refit-every", "1", "--steps", "2", "--save-every", "5",
               "--tasks-per-step", "1", "--group", "8", "--max-new-tokens", "4", "--batch-size", "4", "--lora-rank",
               "4", "--lr", "1e-2", "--device", "cpu", "--autocast", "off", "--name", "replayed"]
    first, again = str(tmp_path / "first"), str(tmp_path / "again")
    colbench(*command, script=RECORD_REPLAY, fails=True, RECORD=first, INTERRUPT="1")
    db = Database(env["COLBENCH_DB"])
    stored = step_dialogues(db, db_run_id(db, "replayed"))
    colbench(*command, script=RECORD_REPLAY, RECORD=again)
    assert step_dialogues(db, db_run_id(db, "replayed")) == stored and sorted(stored) == [1, 2]  # none redone
    db.close()
    before, after = torch.load(first + ".pt"), torch.load(again + ".pt")
    assert len(before) == 1 and len(after) == 2
    assert any(float(w.abs().max()) > 0 for k, w in before[0].items() if "lora_B" in k)  # step 1 trained
    for name, weight in before[0].items():
        assert torch.allclose(weight, after[0][name], atol=1e-6, rtol=1e-5), name
    pairs_first, pairs_again = (json.loads(Path(f + ".json").read_text()) for f in (first, again))
    assert pairs_first[0] > 0 and pairs_again[0] == pairs_first[0]


def db_run_id(db, name: str) -> int:
    with db.read() as session:
        return session.exec(select(TrainingRun).where(TrainingRun.name == name)).one().id


def test_two_processes_refit_the_critic_together(tiny_model_dir, tmp_path, monkeypatch):
    """--critic-refit-every under `colbench launch -n 2`: both processes train each refit together (one critic run
    recorded, not one per process), and both carry its id on: their step checkpoints name it, and the run ends on
    it."""
    from test_multiprocess import launch, run

    monkeypatch.setenv("PYTHONPATH", plugin_path())
    url = f"sqlite:///{tmp_path / 'refit-two.db'}"
    tiny = str(tiny_model_dir)
    one = [sys.executable, "-m", "colbench.cli.app"]
    assert run(one, url, "rollout", "--tasks", "brevity:train", "--model", tiny, "--max-new-tokens", "4", "-k", "4",
               "--limit", "2").returncode == 0
    fitted = run(one, url, "critic", "fit", "--family", "brevity", "--split", "train", "--pairs", "margin",
                 "--batch-size", "2", "--lora-rank", "4", "--epochs", "1", "--model", tiny, "--device", "cpu",
                 "--heldout-fraction", "0", "--json")
    assert fitted.returncode == 0, fitted.stderr[-2000:]
    done = run(launch(), url, "policy", "fit", "--algo", "grpo", "--tasks", "brevity:train", "--model", tiny,
               "--turn-credit", "critic", "--critic", json.loads(fitted.stdout)["checkpoint"],
               "--critic-refit-every", "1", "--steps", "2", "--save-every", "1", "--tasks-per-step", "1", "--group",
               "8", "--max-new-tokens", "4", "--batch-size", "4", "--lora-rank", "4", "--lr", "1e-2", "--device",
               "cpu", "--autocast", "off", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    db = Database(url)
    with db.read() as session:
        refits = [s.values.get("critic_pairs") for s in queries.training_steps(session, summary["run_id"])]
        critics = session.exec(select(TrainingRun).where(TrainingRun.kind == "critic").order_by(TrainingRun.id)).all()
        newest = queries.run_checkpoints(session, critics[-1].id)[-1]
        after_step_1 = queries.run_checkpoints(session, critics[1].id)[-1]
        step_1 = queries.run_checkpoints(session, summary["run_id"])[0]
    db.close()
    assert refits[0] > 0 and len(critics) == 1 + sum(1 for pairs in refits if pairs)
    assert all(c.status == "done" for c in critics) and summary["metrics"]["critic_checkpoint_id"] == newest.id
    saved = [torch.load(state_file(step_1.path, rank), weights_only=False)["critic_id"] for rank in (0, 1)]
    assert saved == [after_step_1.id, after_step_1.id]


def test_oracle_credit_reads_each_stored_turn_in_its_place(tiny_model_dir, tmp_path):
    """--turn-credit oracle (backend-lite's ground truth for single turns): on a scripted dialogue that asks each fact
    twice, then answers with the reference, each ask is worth 1, each repeat 0 and the answer 1 (every test passed),
    in that order; then it runs on a step's own turns."""
    from colbench.rollout import run as rollout
    from colbench.rollout_config import RolloutConfig

    db = Database(f"sqlite:///{tmp_path / 'oracle.db'}")
    rollout(db, RolloutConfig(engine="scripted:repeat@1", tasks="backend-lite:train", limit=1, sandbox="bwrap"))
    with db.read() as session:
        trajectory = session.exec(select(Trajectory)).one()
        agent = [t for t in queries.turns_for(session, [trajectory.id])[trajectory.id] if t.role == "assistant"]
    values = oracle_values(db, "backend", "bwrap", [trajectory.id], {trajectory.id: agent})[0]
    facts = (len(agent) - 1) // 2
    assert facts >= 1 and values == [1.0, 0.0] * facts + [1.0]
    result = fit_policy(db, PolicyConfig(**SMALL | {"steps": 1, "turn_credit": "oracle", "sandbox": "bwrap"}),
                        algo="rloo", base_model=str(tiny_model_dir))
    with db.read() as session:
        step = queries.training_steps(session, result.run_id)[0].values
    db.close()
    assert step["dialogues"] == 4 and step["credit_s"] > 0


def test_validation_inside_the_run_and_a_collapse_guard_that_stops_it(tiny_model_dir, tmp_path):
    """--eval-every 1: step 1's weights checkpointed, rolled out on 2 validation tasks and evaluated (an Evaluation of
    ckpt:<id>, and the step's val_reward and val_success). A collapse bound below 1 trips at once: with
    --on-collapse stop the run ends failed at step 1 with one line."""
    url = f"sqlite:///{tmp_path / 'validate.db'}"
    done = subprocess.run(
        [sys.executable, "-m", "colbench.cli.app", "policy", "fit", "--algo", "grpo", "--tasks", "backend-lite:train",
         "--model", str(tiny_model_dir), "--steps", "2", "--tasks-per-step", "1", "--group", "2", "--max-new-tokens",
         "6", "--eval-every", "1", "--eval-limit", "2", "--collapse-entropy", "0.5", "--on-collapse", "stop",
         "--device", "cpu", "--lora-rank", "4", "--autocast", "off", "--sandbox", "bwrap"],
        capture_output=True, text=True, env=dict(os.environ, COLBENCH_DB=url), cwd=tmp_path, timeout=600)
    assert done.returncode != 0
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith("error: step 1: entropy ") and line.endswith(
        "(past --collapse-entropy 0.5): the policy is collapsing; the run stops (--on-collapse stop)"), done.stderr
    db = Database(url)
    with db.read() as session:
        run = session.exec(select(TrainingRun)).one()
        steps = queries.training_steps(session, run.id)
        checkpoint = queries.run_checkpoints(session, run.id)[0]
        evaluations = queries.evaluations(session)
        validated = session.exec(select(Trajectory).where(Trajectory.policy == f"ckpt:{checkpoint.id}")).all()
    db.close()
    assert run.status == "failed" and [s.step for s in steps] == [1] and checkpoint.step == 1
    assert len(validated) == 2 and {e.policy for e in evaluations} == {f"ckpt:{checkpoint.id}"}
    assert evaluations[0].split == "lite-val" and evaluations[0].n_tasks == 2
    assert steps[0].values["val_success"] == 0.0 and steps[0].values["val_reward"] == pytest.approx(
        sum(t.reward for t in validated) / 2)


def test_the_reward_rises_over_steps_on_a_task_the_tiny_model_can_learn(tiny_model_dir, tmp_path):
    """The plugin's brevity family (tests/plugin_package): one message, the shorter the better."""
    env = plugin_env(COLBENCH_DB=f"sqlite:///{tmp_path / 'brevity.db'}")
    done = subprocess.run(
        [sys.executable, "-m", "colbench.cli.app", "policy", "fit", "--algo", "grpo", "--tasks", "brevity:train",
         "--model", str(tiny_model_dir), *LEARNING], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    db = Database(env["COLBENCH_DB"])
    with db.read() as session:
        run = session.exec(select(TrainingRun)).one()
        rewards = [s.values["reward"] for s in queries.training_steps(session, run.id)]
    db.close()
    # Measured here: 0.40 over the first two steps, 0.52 over the last three (a group's 16 dialogues of 4 tokens
    # vary by ~0.15, so a mean over 48 of them moves by ~0.02 by chance).
    first, last = sum(rewards[:2]) / 2, sum(rewards[-3:]) / 3
    assert last > first + 0.08, rewards


@pytest.mark.parametrize("parent", ["lora", "full"])
def test_the_kl_reference_is_the_policy_the_run_started_from(tiny_model_dir, tmp_path, parent):
    """A run continued from a checkpoint has that checkpoint as its KL reference: before the first update the KL is
    0, for a LoRA parent (whose adapter is the one trained on, so switching it off would give the bare base) and a
    full-weight one (under a fresh adapter)."""
    env = plugin_env(COLBENCH_DB=f"sqlite:///{tmp_path / 'kl.db'}")
    common = ["--tasks", "brevity:train", "--steps", "1", "--tasks-per-step", "1", "--group", "8", "--max-new-tokens",
              "4", "--device", "cpu", "--autocast", "off", "--batch-size", "8", "--warmup-ratio", "0"]
    first = ["--lr", "5e-2"] + (["--lora-rank", "8"] if parent == "lora" else ["--full", "--lr", "1e-3"])
    for args in (["--model", str(tiny_model_dir), *first, "--name", "parent"],
                 ["--model", "ckpt:parent", "--kl-beta", "0.5", "--lr", "1e-3", "--name", "child"]):
        done = subprocess.run([sys.executable, "-m", "colbench.cli.app", "policy", "fit", "--algo", "grpo", *common,
                               *args], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900)
        assert done.returncode == 0, done.stderr[-2000:]
    db = Database(env["COLBENCH_DB"])
    with db.read() as session:
        runs = {r.name: r for r in session.exec(select(TrainingRun)).all()}
        moved = queries.training_steps(session, runs["parent"].id)[0].values
        child = queries.training_steps(session, runs["child"].id)[0].values
    db.close()
    assert moved["grad_norm"] > 0  # the parent moved away from the base
    assert child["kl"] == pytest.approx(0.0, abs=1e-6), child


# One task a step (the tasks share their prompt: what a random model learns on one prompt shows on the next step's),
# 16 dialogues of one message each.
LEARNING = ["--steps", "10", "--tasks-per-step", "1", "--group", "16", "--max-new-tokens", "4", "--lr", "4e-3",
            "--lora-rank", "8", "--device", "cpu", "--autocast", "off", "--epochs", "2", "--batch-size", "16",
            "--warmup-ratio", "0"]


@pytest.mark.parametrize("shard", ["none", "full"])
def test_two_processes_roll_out_once_and_train_together(tiny_model_dir, tmp_path, shard, monkeypatch):
    """Under `colbench launch`, the main process rolls each step out once (under --shard full from an unsharded copy
    refreshed from the shards) and both processes train on their shares, on the plugin's brevity family (rewards
    that differ, so step 1 moves the weights step 2 samples from)."""
    from test_multiprocess import launch, run

    monkeypatch.setenv("PYTHONPATH", plugin_path())
    url = f"sqlite:///{tmp_path / 'two.db'}"
    args = ["policy", "fit", "--algo", "grpo", "--tasks", "brevity:train", "--model", str(tiny_model_dir),
            "--steps", "2", "--tasks-per-step", "1", "--group", "4", "--max-new-tokens", "4", "--save-every", "1",
            "--batch-size", "2", "--lora-rank", "4", "--lr", "1e-2", "--device", "cpu", "--autocast", "off",
            "--shard", shard, "--json"]
    done = run(launch(), url, *args)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)  # one document: the other process prints nothing
    db = Database(url)
    per_step = step_dialogues(db, summary["run_id"])
    with db.read() as session:
        steps = queries.training_steps(session, summary["run_id"])
        checkpoints = queries.run_checkpoints(session, summary["run_id"])
    assert {k: len(v) for k, v in per_step.items()} == {1: 4, 2: 4}  # rolled out once, not once per process
    assert [s.step for s in steps] == [1, 2] and [c.step for c in checkpoints] == [1, 2]
    assert steps[0].values["sampler_ratio"] == pytest.approx(1.0, abs=1e-3)  # both processes read the same tokens
    assert all(state_file(checkpoints[0].path, rank).exists() for rank in (0, 1))
    # The schedule counts the run's 4 minibatches (2 a step), each shared by both processes: cosine from 1e-2 over 4
    # optimiser steps, each step's lr the mean of its two minibatches'.
    rates = [1e-2 * 0.5 * (1 + math.cos(math.pi * i / 4)) for i in range(4)]
    assert [s.values["lr"] for s in steps] == pytest.approx([sum(rates[:2]) / 2, sum(rates[2:]) / 2], rel=1e-4)
    # Step 2 was sampled from the weights step 1 trained (the refreshed copy, under --shard full), not the start's.
    sampled, after_step_1, at_start = step_2_logps(db, per_step[2][0], tiny_model_dir, checkpoints[0].path)
    db.close()
    assert max(abs(a - b) for a, b in zip(sampled, after_step_1)) < 1e-3
    assert max(abs(a - b) for a, b in zip(sampled, at_start)) > 1e-2


@pytest.mark.parametrize("weights", ["lora", "full"])
def test_ct2_rolls_each_step_out_from_the_weights_the_last_step_trained(tiny_model_dir, tmp_path, weights):
    """--engine ct2: each step's weights are written and converted, so the stored log-probs are the policy's own
    (ratio 1 before the first update) and step 2's are those of the step-1 checkpoint, not the start's; the
    converted copies do not outlive the run."""
    env = plugin_env(COLBENCH_DB=f"sqlite:///{tmp_path / 'ct2.db'}")
    lora = ["--lora-rank", "4", "--lr", "1e-2"] if weights == "lora" else ["--full", "--lr", "1e-3"]
    done = subprocess.run(
        [sys.executable, "-m", "colbench.cli.app", "policy", "fit", "--algo", "grpo", "--tasks", "brevity:train",
         "--model", str(tiny_model_dir), "--engine", "ct2", "--steps", "2", "--tasks-per-step", "1", "--group", "4",
         "--max-new-tokens", "4", "--save-every", "1", "--batch-size", "2", "--device", "cpu", "--autocast", "off",
         "--json", *lora], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    run_id = json.loads(done.stdout)["run_id"]
    db = Database(env["COLBENCH_DB"])
    per_step = step_dialogues(db, run_id)
    with db.read() as session:
        steps = queries.training_steps(session, run_id)
        checkpoints = queries.run_checkpoints(session, run_id)
        engines = {r.config.get("engine") for r in session.exec(select(RolloutRun)).all()}
    assert {k: len(v) for k, v in per_step.items()} == {1: 4, 2: 4} and engines == {"ct2"}
    assert steps[0].values["sampler_ratio"] == pytest.approx(1.0, abs=1e-3)
    sampled, after_step_1, at_start = step_2_logps(db, per_step[2][0], tiny_model_dir, checkpoints[0].path,
                                                   adapter=weights == "lora")
    db.close()
    assert max(abs(a - b) for a, b in zip(sampled, after_step_1)) < 1e-3
    assert max(abs(a - b) for a, b in zip(sampled, at_start)) > 1e-2
    assert not (tmp_path / "online-ct2" / f"run-{run_id}").exists()
    assert "converted" not in done.stderr  # each step's conversion is the step's sync time, not a line of its own


def test_openai_rolls_each_step_out_from_the_adapter_the_last_step_wrote(openai_server, tiny_model_dir, tmp_path):
    """--engine openai: each step writes its adapter and loads it into the server under the step's name (vLLM's
    /v1/load_lora_adapter), and asks for that name. The loopback server samples from the adapter folder each name was
    loaded from, so the stored log-probs are the policy's own (ratio 1 before the first update) only when the folder
    held the step's weights, and step 2's are those of the step-1 checkpoint, not the start's."""
    from colbench.engines.hf import HFEngine
    from colbench.model_refs import ModelSource
    from test_sampler_openai import serve_policy

    engines: dict[str, HFEngine] = {}

    def engine_for(name: str) -> HFEngine:  # called under serve_policy's lock
        if name not in engines:  # a name the server never loaded is the base model: step names must be loaded
            adapter = openai_server.adapters.get(name)
            engines[name] = HFEngine(ModelSource(base=str(tiny_model_dir), adapter=adapter), device="cpu")
        return engines[name]

    openai_server.allow_runtime_lora()
    serve_policy(openai_server, engine_for)
    env = plugin_env(COLBENCH_DB=f"sqlite:///{tmp_path / 'served.db'}")
    done = subprocess.run(
        [sys.executable, "-m", "colbench.cli.app", "policy", "fit", "--algo", "grpo", "--tasks", "brevity:train",
         "--model", str(tiny_model_dir), "--engine", "openai", "--base-url", openai_server.base_url, "--steps", "2",
         "--tasks-per-step", "1", "--group", "4", "--max-new-tokens", "4", "--save-every", "1", "--batch-size", "2",
         "--lora-rank", "4", "--lr", "1e-2", "--device", "cpu", "--autocast", "off", "--json"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    for engine in engines.values():
        engine.close()
    assert done.returncode == 0, done.stderr[-2000:]
    run_id = json.loads(done.stdout)["run_id"]
    names = [f"colbench-online-{run_id}-step-{k}" for k in (1, 2)]
    asked = [r["model"] for r in openai_server.requests if "prompt" in r]
    assert asked and set(asked) == set(names)
    first_of_step_2 = asked.index(names[1])
    assert set(asked[:first_of_step_2]) == {names[0]}  # every step-1 request came before step 2 was loaded
    # Each step's adapter is loaded, then the step before's unloaded; the last one when the run ends.
    adapter_calls = [("load" if "lora_path" in r else "unload", r["lora_name"]) for r in openai_server.requests
                     if "lora_name" in r]
    assert adapter_calls == [("load", names[0]), ("load", names[1]), ("unload", names[0]), ("unload", names[1])]
    assert openai_server.adapters == {} and not any((tmp_path / "online-adapters").iterdir())
    db = Database(env["COLBENCH_DB"])
    per_step = step_dialogues(db, run_id)
    with db.read() as session:
        steps = queries.training_steps(session, run_id)
        checkpoints = queries.run_checkpoints(session, run_id)
        rollouts = session.exec(select(RolloutRun)).all()
    assert {k: len(v) for k, v in per_step.items()} == {1: 4, 2: 4}
    served = {(r.config.get("engine"), r.config.get("base_url")) for r in rollouts}
    assert served == {("openai", openai_server.base_url)}
    assert steps[0].values["sampler_ratio"] == pytest.approx(1.0, abs=1e-3)
    sampled, after_step_1, at_start = step_2_logps(db, per_step[2][0], tiny_model_dir, checkpoints[0].path)
    db.close()
    assert max(abs(a - b) for a, b in zip(sampled, after_step_1)) < 1e-3
    assert max(abs(a - b) for a, b in zip(sampled, at_start)) > 1e-2


def step_2_logps(db, trajectory_id: int, base: Path, trained: str, adapter: bool = True):
    """A stored dialogue's first agent turn: the sampler's log-probs, and the same tokens' under the step-1
    checkpoint and under the base model."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from colbench.training import data as D
    from colbench.training.modeling import TokenLogProbs, adapter_disabled, load_adapter

    tokenizer = AutoTokenizer.from_pretrained(base)
    with db.read() as session:
        turns = queries.turns_for(session, [trajectory_id])[trajectory_id]
    first = next(t for t in turns if t.role == "assistant")
    row = S.pack(S.agent_turns(tokenizer, "backend", turns)[:1])[0]  # the stored prompt: the family is not read
    ids, mask, turn_ids = D.collate([row], tokenizer.pad_token_id)

    def logps(folder):
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
        with torch.no_grad():
            return TokenLogProbs(model)(ids, mask, turn_ids >= 0)[turn_ids >= 0].tolist()

    if not adapter:
        return list(first.token_logprobs), logps(trained), logps(base)
    model = load_adapter(AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32), trained, trainable=False)
    with torch.no_grad():
        after = TokenLogProbs(model)(ids, mask, turn_ids >= 0)[turn_ids >= 0].tolist()
        with adapter_disabled(model):
            start = TokenLogProbs(model)(ids, mask, turn_ids >= 0)[turn_ids >= 0].tolist()
    return list(first.token_logprobs), after, start


def test_the_study_plans_online_arms_with_their_credit_and_a_critic_for_the_critics(sqlite_url, capsys, monkeypatch):
    from conftest import command_line

    run = command_line(sqlite_url, capsys, monkeypatch)
    code, out, err = run("experiment", "backend", "--tasks", "backend-lite", "--arm", "grpo-oracle", "--dry-run",
                         "--policy-steps", "7", "--policy-group", "3")
    assert code == 0, err
    assert "critics: none (no arm needs one)" in out
    assert "online GRPO + ground truth's turn credit (control): 7 online steps of 8 tasks x 3 dialogues" in out
    code, out, err = run("experiment", "backend", "--tasks", "backend-lite", "--arm", "grpo-critic", "--dry-run")
    assert code == 0, err
    assert "Bradley-Terry" in out and "+ the critic with c's turn credit x1" in out


def test_each_step_counts_the_dialogues_whose_human_handed_over_the_reference(tiny_model_dir, tmp_path,
                                                                              openai_server):
    # A human model that pastes the hidden function in every reply: every dialogue leaks, and under redact the
    # guard kept every one of those leaks from the agent; under flag none.
    from test_sim_guard import complying

    openai_server.set_responder(complying)
    figures = {}
    for guard in ("redact", "flag"):
        db = Database(f"sqlite:///{tmp_path / f'{guard}.db'}")
        config = PolicyConfig(**SMALL | {"steps": 1, "tasks": "backend:train", "sandbox": "bwrap", "sim_guard": guard,
                                         "simulator": f"endpoint:{openai_server.base_url}#human"})
        result = fit_policy(db, config, algo="grpo", base_model=str(tiny_model_dir))
        with db.read() as session:
            (step,) = queries.training_steps(session, result.run_id)
        figures[guard] = (step.values["sim_leak"], step.values["sim_redacted"])
        db.close()
    assert figures == {"redact": (1.0, 1.0), "flag": (1.0, 0.0)}
