"""Losses and the SWEET-RL advantage, as pure functions of log-prob tensors.

Nothing here touches a model: every function takes per-sequence or per-token
log-probs (float32 is expected; callers compute them so) and returns tensors that
autograd can differentiate. The tests check each one against numbers worked out by
hand.

Token-level inputs share one layout: ``[batch, positions]`` tensors aligned with each
other, where ``turn_ids[b, i]`` is the agent turn (0, 1, ...) that the token at
position ``i`` belongs to, or -1 for every token outside agent turns (training-time
information, human turns, template tokens, padding).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

NORMALIZATIONS = ("turn", "trajectory", "none")


def bradley_terry_loss(chosen_scores: torch.Tensor, rejected_scores: torch.Tensor) -> torch.Tensor:
    """Mean of ``-log σ(chosen − rejected)`` over pairs: the critic's loss on its scores."""
    return -F.logsigmoid(chosen_scores - rejected_scores).mean()


def dpo_loss(
    policy_chosen_logps: torch.Tensor,
    policy_rejected_logps: torch.Tensor,
    ref_chosen_logps: torch.Tensor,
    ref_rejected_logps: torch.Tensor,
    beta: float = 0.1,
) -> torch.Tensor:
    """Mean DPO loss ``-log σ(β·[(πc − rc) − (πr − rr)])`` over pairs of sequence log-probs."""
    margin = (policy_chosen_logps - ref_chosen_logps) - (policy_rejected_logps - ref_rejected_logps)
    return -F.logsigmoid(beta * margin).mean()


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


def turn_advantages(
    policy_logps: torch.Tensor,
    ref_logps: torch.Tensor,
    turn_ids: torch.Tensor,
    normalize: str = "turn",
    num_turns: int | None = None,
) -> torch.Tensor:
    """The advantage ``A(o_t, a_t, c)`` of every agent turn: ``[batch, num_turns]``.

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
) -> torch.Tensor:
    """A trajectory's critic score ``Σ_t β·A(o_t, a_t, c)``: ``[batch]``; Bradley-Terry compares these."""
    return beta * turn_advantages(policy_logps, ref_logps, turn_ids, normalize).sum(-1)


def token_logps_from_logits(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """``log softmax(logits)[target]`` in float32, whatever the logits' dtype.

    ``logits`` is ``[..., vocab]`` and ``targets`` the matching ``[...]`` token ids.
    """
    logits = logits.float()
    picked = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return picked - torch.logsumexp(logits, dim=-1)
