"""Losses and the SWEET-RL advantage, as pure functions of log-prob tensors.

Nothing here touches a model: every function takes per-sequence or per-token
log-probs (float32 is expected; callers compute them so) and returns tensors that
autograd can differentiate. The tests check each one against numbers worked out by
hand.

Token-level inputs share one layout: ``[rows, positions]`` tensors aligned with each
other, where ``turn_ids[b, i]`` is the agent turn (0, 1, ...) that the token at
position ``i`` belongs to, or -1 for every token outside agent turns (training-time
information, human turns, template tokens, padding). A trajectory may span several
rows (see sequences.py); ``owner[b]`` then names the trajectory (or pair side) row ``b``
belongs to, and per-trajectory quantities add up its rows.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from colbench.training.config import NORMALIZATIONS


def bradley_terry_loss(chosen_scores: torch.Tensor, rejected_scores: torch.Tensor) -> torch.Tensor:
    """Mean of ``-log σ(chosen − rejected)`` over pairs: the critic's loss on its scores."""
    return -F.logsigmoid(chosen_scores - rejected_scores).mean()


DPO_LOSSES = ("sigmoid", "ipo")


def dpo_loss(
    policy_chosen_logps: torch.Tensor,
    policy_rejected_logps: torch.Tensor,
    ref_chosen_logps: torch.Tensor,
    ref_rejected_logps: torch.Tensor,
    beta: float = 0.1,
    loss_type: str = "sigmoid",
    label_smoothing: float = 0.0,
) -> torch.Tensor:
    """Mean preference loss over pairs of sequence log-probs, with ``m = (πc − rc) − (πr − rr)``:

    - ``sigmoid`` (DPO, the paper's): ``-(1 − ε)·log σ(β·m) − ε·log σ(−β·m)``; ε is the label
      smoothing of conservative DPO (0: plain DPO), the chance that a pair's label is wrong;
    - ``ipo`` (Azar et al. 2023): ``(m − 1/(2β))²``, which stops pushing once the margin
      reaches 1/(2β) instead of driving it, and the chosen side with it, without bound.
    """
    margin = (policy_chosen_logps - ref_chosen_logps) - (policy_rejected_logps - ref_rejected_logps)
    if loss_type == "ipo":
        return ((margin - 1 / (2 * beta)) ** 2).mean()
    if loss_type != "sigmoid":
        raise ValueError(f"loss must be one of {', '.join(DPO_LOSSES)}; got {loss_type!r}")
    return (
        -(1 - label_smoothing) * F.logsigmoid(beta * margin) - label_smoothing * F.logsigmoid(-beta * margin)
    ).mean()


def dpo_rewards(policy_logps: torch.Tensor, ref_logps: torch.Tensor, beta: float = 0.1) -> torch.Tensor:
    """The implicit DPO reward ``β·(π − ref)`` of each sequence (for logging)."""
    return beta * (policy_logps - ref_logps).detach()


def nll_loss(token_logps: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Negative log-likelihood averaged over the tokens where ``mask`` is set (over the whole batch)."""
    mask = mask.to(token_logps.dtype)
    return -(token_logps * mask).sum() / mask.sum().clamp(min=1)


def sequence_logps(token_logps: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Sum of the masked token log-probs of each row: ``[batch, positions] → [batch]``."""
    return (token_logps * mask.to(token_logps.dtype)).sum(-1)


def turn_sums(
    values: torch.Tensor, turn_ids: torch.Tensor, num_turns: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per agent turn, the sum of ``values`` over its tokens and its token count.

    Returns ``(sums, counts)``, both ``[batch, num_turns]`` (num_turns defaults to the
    largest turn id + 1); a turn with no tokens (e.g. truncated away) has count 0.
    """
    if num_turns is None:
        num_turns = int(turn_ids.max().item()) + 1 if turn_ids.numel() else 0
    num_turns = max(int(num_turns), 1)
    inside = turn_ids >= 0
    index = turn_ids.clamp(min=0).long()
    sums = torch.zeros(values.shape[0], num_turns, dtype=values.dtype, device=values.device)
    counts = torch.zeros_like(sums)
    sums = sums.scatter_add(1, index, torch.where(inside, values, torch.zeros_like(values)))
    counts = counts.scatter_add(1, index, inside.to(values.dtype))
    return sums, counts


def by_owner(values: torch.Tensor, owner: torch.Tensor | None, owners: int | None = None) -> torch.Tensor:
    """Rows' values (``[rows, ...]``) added up per owner: ``[owners, ...]``; unchanged without an owner map."""
    if owner is None:
        return values
    owners = int(owner.max()) + 1 if owners is None else owners
    return values.new_zeros((owners,) + tuple(values.shape[1:])).index_add(0, owner.to(values.device), values)


def turn_advantages(
    policy_logps: torch.Tensor,
    ref_logps: torch.Tensor,
    turn_ids: torch.Tensor,
    normalize: str = "turn",
    num_turns: int | None = None,
    owner: torch.Tensor | None = None,
    owners: int | None = None,
) -> torch.Tensor:
    """The advantage ``A(o_t, a_t, c)`` of every agent turn: ``[trajectories, num_turns]``
    (one trajectory per row without ``owner``).

    The token log-ratio ``log πθ − log πref`` is summed over each turn's tokens, then
    divided by

    - ``"turn"``: the turn's own token count (the paper's formula: each turn's mean);
    - ``"trajectory"``: the count of all agent tokens of the row (the official code),
      so that the turns' advantages add up to the row's mean log-ratio;
    - ``"none"``: nothing (the paper's ablation; the actor then collapses to short turns).

    Turns with no tokens get 0.
    """
    if normalize not in NORMALIZATIONS:
        raise ValueError(f"normalize must be one of {', '.join(NORMALIZATIONS)}; got {normalize!r}")
    sums, counts = turn_sums(policy_logps - ref_logps, turn_ids, num_turns)
    sums, counts = by_owner(sums, owner, owners), by_owner(counts, owner, owners)
    if normalize == "turn":
        return torch.where(counts > 0, sums / counts.clamp(min=1), torch.zeros_like(sums))
    if normalize == "trajectory":
        return sums / counts.sum(-1, keepdim=True).clamp(min=1)
    return sums


def critic_scores(
    policy_logps: torch.Tensor,
    ref_logps: torch.Tensor,
    turn_ids: torch.Tensor,
    beta: float = 0.1,
    normalize: str = "turn",
    owner: torch.Tensor | None = None,
    owners: int | None = None,
) -> torch.Tensor:
    """A trajectory's critic score ``Σ_t β·A(o_t, a_t, c)``: ``[trajectories]``; Bradley-Terry compares these."""
    return beta * turn_advantages(policy_logps, ref_logps, turn_ids, normalize, owner=owner, owners=owners).sum(-1)


def token_logps_from_logits(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """``log softmax(logits)[target]`` in float32, whatever the logits' dtype.

    ``logits`` is ``[..., vocab]`` and ``targets`` the matching ``[...]`` token ids.
    """
    logits = logits.float()
    picked = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return picked - torch.logsumexp(logits, dim=-1)


def policy_dpo_loss(
    token_logps: torch.Tensor,
    turn_ids: torch.Tensor,
    owner: torch.Tensor,
    ref_chosen: torch.Tensor,
    ref_rejected: torch.Tensor,
    beta: float = 0.1,
    nll_weight: float = 0.01,
    loss_type: str = "sigmoid",
    label_smoothing: float = 0.0,
) -> tuple[torch.Tensor, dict]:
    """DPO (or IPO, see :func:`dpo_loss`) + ``nll_weight`` · NLL on the rows of B pairs, as the policy trains them.

    ``owner[row]`` is the pair's index for a chosen row and B + the index for a rejected
    one. A side's log-prob is the sum over every agent token of its rows (one turn for
    sweet, every turn for mtdpo); tokens outside agent turns (turn id -1) count for
    nothing. The NLL is the mean over the chosen rows' agent tokens. Returns (loss, float stats).
    """
    pairs = ref_chosen.shape[0]
    mask = turn_ids >= 0
    sides = by_owner(sequence_logps(token_logps, mask), owner, 2 * pairs)
    chosen, rejected = sides[:pairs], sides[pairs:]
    dpo = dpo_loss(chosen, rejected, ref_chosen, ref_rejected, beta, loss_type, label_smoothing)
    chosen_rows = (owner < pairs).to(mask.device)[:, None]
    nll = nll_loss(token_logps, mask & chosen_rows)
    loss = dpo + nll_weight * nll
    chosen_reward = dpo_rewards(chosen, ref_chosen, beta)
    rejected_reward = dpo_rewards(rejected, ref_rejected, beta)
    margin = chosen_reward - rejected_reward
    stats = {
        "loss": float(loss.detach()),
        "dpo_loss": float(dpo.detach()),
        "nll": float(nll.detach()),
        "chosen_reward": float(chosen_reward.mean()),
        "rejected_reward": float(rejected_reward.mean()),
        "reward_margin": float(margin.mean()),
        "reward_accuracy": float((margin > 0).float().mean()),
    }
    return loss, stats


def sft_loss(token_logps: torch.Tensor, turn_ids: torch.Tensor) -> tuple[torch.Tensor, dict]:
    """Mean NLL over agent tokens only."""
    loss = nll_loss(token_logps, turn_ids >= 0)
    return loss, {"loss": float(loss.detach()), "nll": float(loss.detach())}


# ---------------------------------------------------------------- online RL (colbench/online_rl.py)

ADVANTAGES = ("grpo", "rloo")


def group_advantages(rewards: torch.Tensor, groups: torch.Tensor, estimator: str = "grpo",
                     scale: bool = True) -> torch.Tensor:
    """Each dialogue's advantage against the other dialogues of its group (the same task): ``[dialogues]``.

    - ``grpo``: ``r − mean(group)``, divided by the group's standard deviation (unbiased, +1e-6) when ``scale``
      (GRPO, Shao et al. 2024); ``scale=False`` is Dr. GRPO (Liu et al. 2025), whose std division over-weights
      groups that are nearly all right or all wrong;
    - ``rloo``: ``r − mean(the group's others)`` (Ahmadian et al. 2024), an unbiased baseline: ``G/(G−1)`` times
      the group-centred reward.

    A group whose rewards are all equal gets 0: it says nothing about which dialogue was better.
    """
    if estimator not in ADVANTAGES:
        raise ValueError(f"advantage estimator must be one of {', '.join(ADVANTAGES)}; got {estimator!r}")
    rewards = rewards.float()
    count = torch.zeros(int(groups.max()) + 1, device=rewards.device).index_add(0, groups, torch.ones_like(rewards))
    total = torch.zeros_like(count).index_add(0, groups, rewards)
    mean = total / count
    centred = rewards - mean[groups]
    if estimator == "rloo":
        others = (count[groups] - 1).clamp(min=1)
        return centred * count[groups] / others
    if not scale:
        return centred
    squares = torch.zeros_like(count).index_add(0, groups, centred**2)
    std = (squares / (count - 1).clamp(min=1)).sqrt()
    return centred / (std[groups] + 1e-6)


def clipped_policy_loss(
    token_logps: torch.Tensor,
    old_logps: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip: float = 0.2,
    ref_logps: torch.Tensor | None = None,
    kl_beta: float = 0.0,
    *,
    clip_high: float | None = None,
    sampler_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict]:
    """PPO's clipped surrogate on agent tokens, averaged over the masked tokens of the batch (every token weighs the
    same, so a long turn is not diluted), plus ``kl_beta`` times a KL term to the reference policy.

    All inputs are ``[rows, positions]``: the policy's log-probs now, π_old's (the policy as the step started, as the
    trainer computes it; or the sampler's own), each token's advantage, and the tokens to train (agent tokens; the
    prompt's and the simulated human's are not). Per token: ``ratio = exp(logp − old)``, loss
    ``−w · min(ratio·A, clip(ratio, 1−clip, 1+clip_high)·A)``; ``clip_high`` defaults to ``clip`` (DAPO raises it
    to let unlikely tokens grow). ``sampler_weights`` ``w`` (detached; default 1): the truncated importance weight
    min(π_old/π_sampler, C) that corrects for the sampler computing another distribution than the trainer's.

    The KL term's loss is k2 = ½(logp − ref)², whose gradient on tokens sampled from π is that of KL(π‖π_ref) (k3's,
    used as a loss, is KL(π_ref‖π)'s); ``kl`` reports k3 = e^(ref−logp) − (ref−logp) − 1, the unbiased estimate of
    KL(π‖π_ref)'s value. ``clip_fraction`` is the share of tokens where clipping binds (the gradient is cut), not of
    those merely outside the band.
    """
    clip_high = clip if clip_high is None else clip_high
    mask = mask.to(token_logps.dtype)
    tokens = mask.sum().clamp(min=1)
    log_ratio = (token_logps - old_logps) * mask
    ratio = log_ratio.exp()
    unclipped = ratio * advantages
    clipped = ratio.clamp(1 - clip, 1 + clip_high) * advantages
    weights = mask if sampler_weights is None else sampler_weights.detach() * mask
    surrogate = -(torch.minimum(unclipped, clipped) * weights).sum() / tokens
    loss = surrogate
    binds = ((advantages > 0) & (ratio > 1 + clip_high)) | ((advantages < 0) & (ratio < 1 - clip))
    stats = {
        "policy_loss": float(surrogate.detach()),
        "clip_fraction": float((binds.to(mask.dtype) * mask).sum() / tokens),
        "ratio_mean": float((ratio.detach() * mask).sum() / tokens),
    }
    if ref_logps is not None:
        to_ref = (ref_logps - token_logps) * mask
        k2 = (0.5 * to_ref**2 * mask).sum() / tokens
        loss = loss + kl_beta * k2
        stats["kl"] = float((((to_ref.detach().exp() - to_ref.detach() - 1) * mask).sum() / tokens))
    stats["loss"] = float(loss.detach())
    return loss, stats
