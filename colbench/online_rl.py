"""Online multi-turn RL: GRPO and RLOO on fresh rollouts of the policy being trained, with the SWEET-RL critic's
per-turn credit inside it (``--turn-credit critic``).

A run is ``steps`` online steps. Step k (1-based):

1. **Sync**: the engine that rolls out follows the policy. ``hf``: the model being trained itself, in this process
   (nothing is copied); ``ct2``: the step's weights written and converted for CTranslate2 (faster on a CPU);
   ``openai``: the step's adapter is written and loaded into a vLLM server.
2. **Rollout** through the normal path (rollout.Rollout: the simulated human, sandboxed grading, the store):
   ``tasks_per_step`` tasks, ``group`` dialogues each, stored under the policy name ``online:<run>:step-<k>`` with
   their prompts, sampled token ids and the sampler's log-probs. A stopped run's step is continued, never redone.
3. **Advantages**: each dialogue's reward against its group (losses.group_advantages); with ``turn_credit``, each
   agent turn's value (the critic's A(o_t, a_t, c) with the reference c, or the oracle's), centred within its
   dialogue and scaled to the step's advantages, moves the dialogue's advantage between its turns
   (dialogue_credit).
4. **Update**: first π_old, the trainer's own log-probs of the sampled tokens on the step's starting weights, and
   the sampler–trainer mismatch against the stored sampler log-probs (figures, and a truncated importance weight
   min(π_old/π_sampler, tis_cap) per token or turn); then ``epochs`` passes over the step's dialogues in minibatches
   of ``batch_size`` dialogues, every agent token trained with PPO's clipped ratio to π_old, weighted
   (losses.clipped_policy_loss); the simulator's and the prompt's tokens are masked.
5. Every ``save_every`` steps a checkpoint (with the optimiser's state: a rerun of the same command continues from
   it, replaying the later steps' updates on their stored dialogues); every ``critic_refit_every`` steps the critic
   is continued on the pairs the run's own groups make.

Each step's figures (reward, success, groups with any spread, KL, clip fraction, entropy, tokens per turn, and the
time split) are the run's steps: `colbench runs show` prints and draws them.

It lives above colbench.training and colbench.rollout, using both (the rollout uses training's critic for
best-of-N, so a recipe inside colbench.training could not import the rollout back); the algorithm registry names it
by module, as it does every recipe.
"""
from __future__ import annotations

import random
import shutil
import sys
import threading
import time
from contextlib import nullcontext
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import torch

from colbench import protocol
from colbench.errors import ColbenchError
from colbench.store import queries
from colbench.training import data as D
from colbench.training import sequences as S
from colbench.training.config import CriticConfig, DataError, PolicyConfig
from colbench.training.lifecycle import training_run
from colbench.training.losses import clipped_policy_loss, group_advantages
from colbench.training.modeling import (
    accumulating,
    adapter_disabled,
    is_peft,
    max_over_processes,
    means_over_processes,
    model_to_train,
    on_main,
    optimizer_step,
    prepare_training,
)
from colbench.training.trainer import PolicyResult, PolicyTrainer, run_settings, starting_point



def state_file(folder: Path, rank: int) -> Path:
    """Beside a step checkpoint's weights, one per process: its optimiser's state (its shard, under --shard full), the
    schedule, the step, the critic it ranks with."""
    return Path(folder) / f"online_state-{rank}.pt"


def step_policy(run_id: int, step: int) -> str:
    """The policy name a step's dialogues are stored under: which run and which step's weights wrote them."""
    return f"online:{run_id}:step-{step}"


def run_policies(run_id: int) -> str:
    """Every step's policy name of a run, as --policies matches them."""
    return f"online:{run_id}:step-*"


def step_tasks(task_ids: list[int], step: int, per_step: int, seed: int) -> list[int]:
    """The tasks of step ``step`` (1-based): the split walked in a seeded shuffle, reshuffled each time it is used up
    (so every task comes up once before any comes up twice), ``per_step`` distinct tasks a step."""
    if per_step > len(task_ids):
        raise DataError(f"--tasks-per-step {per_step} is more than the split's {len(task_ids)} tasks")

    def shuffled(epoch: int) -> list[int]:
        order = sorted(task_ids)
        random.Random(f"online:{seed}:{epoch}").shuffle(order)
        return order

    chosen: list[int] = []
    position = (step - 1) * per_step
    while len(chosen) < per_step:
        epoch, index = divmod(position, len(task_ids))
        task = shuffled(epoch)[index]
        if task not in chosen:
            chosen.append(task)
        position += 1
    return chosen


def dialogue_credit(values: list[list[float | None]], tokens: list[list[int]], advantages: list[float],
                    weight: float) -> list[list[float]]:
    """Per dialogue, per agent turn: the credit added to the turn's tokens on top of the dialogue's group advantage.

    A turn's value (a critic's, an oracle's) is centred on its dialogue's token-weighted mean, so the credit only
    moves the dialogue's advantage between its turns: the mean advantage over a dialogue's trained tokens stays its
    group advantage, whatever the values' offset (Bradley-Terry pins a value only up to one), and the outcome's sign
    over the whole dialogue is never overridden. The centred values are divided by their standard deviation over
    the step's turns and multiplied by ``weight`` times the root mean square of the step's group advantages: in the
    estimator's own units (GRPO's standardised ones, RLOO's and Dr. GRPO's reward units), weight 1 moving turns as
    far as the outcome moves dialogues. A step whose groups have no spread learns nothing, credit included, as under
    plain GRPO. ``tokens``: each turn's trained tokens (0: cut away or masked; such a turn, or one without a value,
    gets 0 and no say in its dialogue's mean)."""
    centred: list[list[float | None]] = []
    for turns, counts in zip(values, tokens):
        known = [(v, n) for v, n in zip(turns, counts) if v is not None and n > 0]
        mass = sum(n for _, n in known)
        mean = sum(v * n for v, n in known) / mass if mass else 0.0
        centred.append([v - mean if v is not None and n > 0 else None for v, n in zip(turns, counts)])
    spread = [c for turns in centred for c in turns if c is not None]
    std = (sum(c * c for c in spread) / len(spread)) ** 0.5 if spread else 0.0
    scale = (sum(a * a for a in advantages) / len(advantages)) ** 0.5 if advantages else 0.0
    if std < 1e-12 or scale == 0.0:
        return [[0.0] * len(turns) for turns in values]
    return [[0.0 if c is None else weight * scale * c / std for c in turns] for turns in centred]


def variance_gated_credit(values: list[list[float | None]], tokens: list[list[int]], advantages: list[float],
                          rewards: list[float], groups: list[int], weight: float, temperature: float
                          ) -> list[list[float]]:
    """InfoPO's fusion (Kong et al. 2026, its info_grpo estimator), per dialogue and agent turn: the credit added to
    the turn's tokens on top of the dialogue's group advantage.

    The turns' non-zero values are normalised within their group (all the group's dialogues: minus their mean,
    over their standard deviation; a lone value is centred and kept at scale 1), zero values stay 0. The result is
    scaled down, never up, so that its spread over the step's trained tokens is at most max(that of the group
    advantages, 1), and gated per dialogue by sigmoid(−std of its group's rewards / ``temperature``): where the
    outcome already tells a group's dialogues apart the gate closes (0), where it does not (a group all right or
    all wrong) it stays half open, so the credit then moves the policy when the outcome cannot. ``weight`` is
    InfoPO's β. Unlike the centred combination the credit is not mean zero over a dialogue: it adds to it."""
    import math

    def sample_std(xs: list[float]) -> float:
        if len(xs) < 2:
            return 0.0
        mean = sum(xs) / len(xs)
        return (sum((x - mean) ** 2 for x in xs) / (len(xs) - 1)) ** 0.5

    def weighted_std(pairs: list[tuple[float, int]]) -> float:
        mass = sum(n for _, n in pairs)
        if mass < 2:
            return 0.0
        mean = sum(x * n for x, n in pairs) / mass
        return (sum(n * (x - mean) ** 2 for x, n in pairs) / (mass - 1)) ** 0.5

    given: dict[int, list[float]] = {}
    for turns, counts, group in zip(values, tokens, groups):
        given.setdefault(group, []).extend(v for v, n in zip(turns, counts) if v and n > 0)
    stats = {g: (vs[0], 1.0) if len(vs) == 1 else (sum(vs) / len(vs), sample_std(vs)) for g, vs in given.items() if vs}
    normalised = [[(v - stats[g][0]) / (stats[g][1] + 1e-6) if v and n > 0 else 0.0 for v, n in zip(turns, counts)]
                  for turns, counts, g in zip(values, tokens, groups)]
    outcome_std = weighted_std([(a, n) for a, counts in zip(advantages, tokens) for n in counts if n > 0]) + 1e-6
    credit_std = weighted_std([(x, n) for row, counts in zip(normalised, tokens) for x, n in zip(row, counts)
                               if n > 0]) + 1e-6
    ratio = min(1.0, max(outcome_std, 1.0) / credit_std)
    by_group: dict[int, list[float]] = {}
    for reward, group in zip(rewards, groups):
        by_group.setdefault(group, []).append(reward)
    gate = [1.0 / (1.0 + math.exp(sample_std(by_group[g]) / temperature)) for g in groups]
    return [[weight * gate[i] * ratio * x for x in row] for i, row in enumerate(normalised)]


def turn_token_counts(dialogue: "Dialogue") -> list[int]:
    """Per agent turn of ``dialogue``, how many of its tokens are trained (0 for a turn cut away or masked)."""
    counts = [0] * dialogue.agent_turns
    for row in dialogue.rows:
        for turn in row.turn_ids:
            if turn >= 0:
                counts[turn] += 1
    return counts


@dataclass
class Dialogue:
    """One stored dialogue as the update reads it: its rows, and per row each position's sampler log-prob and
    advantage (0 outside agent turns)."""

    trajectory_id: int
    task_id: int
    reward: float
    rows: list[S.Seq]
    old: list[list[float]]
    advantage: list[list[float]]
    agent_turns: int
    tokens: int
    # Set by the update before its first step (old_policy_logps): the sampler's stored log-probs (``old`` then holds
    # the trainer's, π_old) and per position the truncated importance weight min(π_old/π_sampler, C).
    sampled: list[list[float]] | None = None
    weight: list[list[float]] | None = None
    masked_turns: int = 0  # agent turns left out because --max-len cut their context (mask_cut_context)
    cut_turns: list[int] = field(default_factory=list)  # agent turns cut at --max-new-tokens (no end-of-turn token)

    @property
    def trained_tokens(self) -> int:
        return sum(row.agent_tokens for row in self.rows)

    def training_rows(self, factor: float = 1.0) -> list[tuple]:
        """(row, π_old, advantages, weights) per row, as policy_backward reads them: each token's weight is its
        truncated importance weight (1 before old_policy_logps) times ``factor`` (the loss aggregation's)."""
        weight = self.weight or [[1.0] * len(row.turn_ids) for row in self.rows]
        return list(zip(self.rows, self.old, self.advantage, [[w * factor for w in row] for row in weight]))


def read_dialogues(db, tokenizer, family: str, trajectories, max_len: int) -> tuple[list[Dialogue], dict[int, list]]:
    """The step's graded dialogues as rows with their stored sampler log-probs (advantages still 0), and each one's
    agent turns (Turn rows). Refuses a dialogue whose turns lack log-probs: online RL's ratio needs them."""
    from colbench.engines.base import end_of_turn_ids

    ids = [t.id for t in trajectories]
    with db.read() as session:
        turns = queries.turns_for(session, ids)
    closing = end_of_turn_ids(tokenizer)
    found, agent_rows = [], {}
    for t in trajectories:
        rows = [turn for turn in turns[t.id] if turn.role == "assistant"]
        missing = next((turn for turn in rows if not turn.token_ids or not turn.token_logprobs
                        or len(turn.token_ids) != len(turn.token_logprobs)), None)
        if missing is not None:
            raise DataError(f"dialogue {t.id}'s agent turn {missing.id} has no sampled log-probs: online RL rolls out"
                            " with an engine that returns them (hf, ct2, or a vLLM server)")
        agent = S.agent_turns(tokenizer, family, turns[t.id])
        packed = S.pack(agent, (), max_len)
        logps = [list(turn.token_logprobs) for turn in rows]
        old = [_per_position(row, logps) for row in packed]
        masked = mask_cut_context(packed)
        cut = [i for i, a in enumerate(agent) if closing and a.completion_ids[-len(closing):] != closing]
        found.append(Dialogue(t.id, t.task_id, float(t.reward), packed, old, [[0.0] * len(r.input_ids) for r in packed],
                              len(agent), sum(len(a.completion_ids) for a in agent), masked_turns=masked,
                              cut_turns=cut))
        agent_rows[t.id] = rows
    return found, agent_rows


def mask_cut_context(rows: list[S.Seq]) -> int:
    """Leave out of training the agent turns whose context --max-len cut (their row keeps the prompt's last tokens,
    without the system prompt): they were sampled from the whole context, so neither their ratio nor their gradient
    would be the policy's. Returns how many turns it left out."""
    masked = 0
    for row in rows:
        if row.truncated:
            masked += len({turn for turn in row.turn_ids if turn >= 0})
            row.turn_ids = [-1] * len(row.turn_ids)
    return masked


def mask_turns(dialogue: "Dialogue", turns: list[int]) -> None:
    """Leave ``turns`` (agent turn indices) of ``dialogue`` out of the update."""
    for row in dialogue.rows:
        row.turn_ids = [-1 if turn in turns else turn for turn in row.turn_ids]


def penalise_turns(dialogue: "Dialogue", turns: list[int], penalty: float) -> None:
    """The tokens of ``turns`` get advantage min(A, 0) − ``penalty`` (set after set_advantages)."""
    for r, row in enumerate(dialogue.rows):
        dialogue.advantage[r] = [min(a, 0.0) - penalty if turn in turns else a
                                 for a, turn in zip(dialogue.advantage[r], row.turn_ids)]


def _per_position(row: S.Seq, per_turn: list[list[float]]) -> list[float]:
    """A row's positions filled from per-turn token lists: turn k's tokens are the row's positions of turn id k, in
    order (a turn's completion is never cut, and lies within one row)."""
    seen: dict[int, int] = {}
    out = []
    for turn in row.turn_ids:
        if turn < 0:
            out.append(0.0)
            continue
        index = seen.get(turn, 0)
        seen[turn] = index + 1
        out.append(float(per_turn[turn][index]))
    return out


def set_advantages(dialogues: list[Dialogue], per_dialogue: list[float], credit: list[list[float]] | None) -> None:
    """Every agent token of dialogue i gets ``per_dialogue[i]`` (+ its turn's credit)."""
    for i, dialogue in enumerate(dialogues):
        for r, row in enumerate(dialogue.rows):
            dialogue.advantage[r] = [
                0.0 if turn < 0 else per_dialogue[i] + (credit[i][turn] if credit is not None else 0.0)
                for turn in row.turn_ids
            ]


def _padded(values: list[list[float]], width: int) -> torch.Tensor:
    out = torch.zeros(len(values), width, dtype=torch.float32)
    for r, row in enumerate(values):
        out[r, : len(row)] = torch.tensor(row, dtype=torch.float32)
    return out


def policy_backward(scorer, rows: list[tuple], passes: int, reference, backward, *, pad_id: int, device, clip: float,
                    kl_beta: float, clip_high: float | None = None, denominator: float | None = None) -> dict:
    """The clipped loss's gradient over ``rows`` (each a packed row, π_old's log-probs, its advantages per position
    and, optionally fourth, its importance weights), computed in ``passes`` forward and backward passes of consecutive
    rows: each pass's token mean is weighted by its share of the tokens, so the gradients add up to one pass's over
    every row (memory grows with a pass's rows, ~2 GB per 1,000-token row of a 135M model on a CPU). A pass left
    without rows repeats the first at zero weight (every process runs as many). ``denominator``: the tokens the
    loss's mean divides by (default: these rows'; under several processes the minibatch's over the process count,
    since DDP averages the processes' gradients: every token of the minibatch then weighs the same, on whichever
    process). Returns the loss's figures, token-weighted over the passes."""
    per_pass = -(-len(rows) // passes)
    chunks = [rows[i * per_pass : (i + 1) * per_pass] for i in range(passes)]
    tokens = [sum(row[0].agent_tokens for row in chunk) for chunk in chunks]
    total = max(sum(tokens), 1)
    divide = max(denominator, 1e-9) if denominator is not None else total
    figures: dict[str, float] = {}
    for chunk, count in zip(chunks, tokens):
        columns = list(zip(*(chunk or rows[:1])))
        seqs, olds, advantages = columns[:3]
        ids, mask, turns = (t.to(device) for t in D.collate(seqs, pad_id))
        width = ids.shape[1]
        old = _padded(list(olds), width).to(device)
        advantage = _padded(list(advantages), width).to(device)
        weights = _padded(list(columns[3]), width).to(device) if len(columns) > 3 else None
        target = turns >= 0
        ref_logps = None
        if reference is not None:
            ref_scorer, context = reference
            with torch.no_grad(), context():
                ref_logps = ref_scorer(ids, mask, target)
        loss, stats = clipped_policy_loss(scorer(ids, mask, target), old, advantage, target, clip, ref_logps, kl_beta,
                                          clip_high=clip_high, sampler_weights=weights)
        backward(loss * (count / divide))
        for key, value in stats.items():
            figures[key] = figures.get(key, 0.0) + value * count / total
    return figures


def old_policy_logps(scorer, dialogues: list[Dialogue], calls: int, *, pad_id: int, device, pass_rows: int,
                     cap: float, level: str, spare: Dialogue) -> dict:
    """π_old: the trainer's log-probs of ``dialogues``' sampled tokens on the weights the step starts from, computed
    in ``calls`` forward passes of up to ``pass_rows`` rows (every process makes as many: a sharded model's forward
    is collective). Each dialogue's ``old`` becomes π_old, ``sampled`` keeps the sampler's, and ``weight`` is the
    truncated importance weight min(π_old/π_sampler, cap) per token (``level`` 'token') or per agent turn (the
    product of its tokens' ratios, 'sequence'); cap 0: weight 1. ``spare``: the row a process with nothing of its
    own runs. Returns this process's mismatch figures."""
    rows = [(d, r) for d in dialogues for r in range(len(d.rows))]
    groups = [rows[i : i + pass_rows] for i in range(0, len(rows), pass_rows)]
    sums = {"tokens": 0.0, "gap": 0.0, "kl": 0.0, "ratio": 0.0, "capped": 0.0, "entropy": 0.0}
    gap_max = 0.0
    with torch.no_grad():
        for call in range(calls):
            group = groups[call] if call < len(groups) else [(spare, 0)]
            ids, mask, turns = (t.to(device) for t in D.collate([d.rows[r] for d, r in group], pad_id))
            values = scorer(ids, mask, turns >= 0).float().cpu()
            if call >= len(groups):  # a repeat that keeps the collective in step: its values are not used
                continue
            for g, (dialogue, r) in enumerate(group):
                if dialogue.sampled is None:
                    dialogue.sampled = [list(row) for row in dialogue.old]
                turn_ids = dialogue.rows[r].turn_ids
                agent = [p for p, turn in enumerate(turn_ids) if turn >= 0]
                sampled = torch.tensor([dialogue.sampled[r][p] for p in agent])
                trainer = values[g, agent]
                gap = trainer - sampled  # log π_old − log π_sampler per token
                if level == "sequence":
                    turn_of = torch.tensor([turn_ids[p] for p in agent])
                    log_weight = torch.zeros_like(gap)
                    for turn in turn_of.unique():
                        log_weight[turn_of == turn] = gap[turn_of == turn].sum()
                else:
                    log_weight = gap
                weight = log_weight.exp().clamp(max=cap) if cap > 0 else torch.ones_like(gap)
                old_row, weight_row = [0.0] * len(turn_ids), [0.0] * len(turn_ids)
                for p, value, w in zip(agent, trainer.tolist(), weight.tolist()):
                    old_row[p], weight_row[p] = value, w
                dialogue.old[r] = old_row
                if dialogue.weight is None:
                    dialogue.weight = [[0.0] * len(row.turn_ids) for row in dialogue.rows]
                dialogue.weight[r] = weight_row
                sums["tokens"] += len(agent)
                sums["gap"] += float(gap.abs().sum())
                sums["kl"] += float((gap.exp() - gap - 1).sum())  # k3 of KL(π_sampler ‖ π_old), sampled from π_sampler
                sums["ratio"] += float(gap.exp().sum())
                sums["capped"] += float((log_weight.exp() > cap).sum()) if cap > 0 else 0.0
                sums["entropy"] += float(-trainer.sum())
                gap_max = max(gap_max, float(gap.abs().max()) if len(agent) else 0.0)
    n = max(sums["tokens"], 1.0)
    return {"mismatch_mean": sums["gap"] / n, "mismatch_max": gap_max, "mismatch_kl": sums["kl"] / n,
            "sampler_ratio": sums["ratio"] / n, "tis_capped": sums["capped"] / n,
            # The sampled tokens' mean −log π_old estimates the step's policy's entropy, before any of its updates.
            "entropy": sums["entropy"] / n}


@dataclass
class Minibatch:
    """One minibatch of a step's update: each process's share of its dialogues; whether the optimiser steps after
    it (the last of its --grad-accum group); how many minibatches its group has."""

    shares: list[list[Dialogue]]
    boundary: bool
    group: int


def aggregation_factors(how: str, dialogues: list[Dialogue], budget: int) -> dict[int, float]:
    """Per dialogue (by id()), the factor on its tokens' losses that turns the minibatch's token mean into ``how``:
    'token-mean' (every trained token weighs the same: 1), 'dialogue-mean' (every dialogue weighs the same, the
    mean of its tokens' mean: N / (D·n_d)), 'constant' (Dr. GRPO: the sum of the tokens' losses over D times
    ``budget``, the tokens a dialogue may sample: N / (D·budget)); N the minibatch's trained tokens, D its
    dialogues, n_d the dialogue's."""
    tokens = sum(d.trained_tokens for d in dialogues)
    if how == "token-mean" or tokens == 0:
        return {id(d): 1.0 for d in dialogues}
    if how == "dialogue-mean":
        return {id(d): tokens / (len(dialogues) * d.trained_tokens) if d.trained_tokens else 0.0 for d in dialogues}
    return {id(d): tokens / (len(dialogues) * budget) for d in dialogues}


def rewards_by_task(trajectories, reward_of) -> dict[int, list[float]]:
    """Each task's group of rewards (``reward_of`` each dialogue), in the order the dialogues come."""
    groups: dict[int, list[float]] = {}
    for t in trajectories:
        groups.setdefault(t.task_id, []).append(reward_of(t))
    return groups


def has_spread(rewards: list[float]) -> bool:
    """Whether a group's rewards differ (else its advantages are all 0)."""
    return bool(rewards) and max(rewards) > min(rewards)


def turn_figures(dialogues: list[Dialogue]) -> dict:
    """The trained dialogues' turn figures: agent turns and tokens, and the turns cut (context, token limit)."""
    turns = sum(d.agent_turns for d in dialogues)
    return {
        "agent_turns_per_dialogue": turns / max(len(dialogues), 1),
        "tokens_per_turn": sum(d.tokens for d in dialogues) / max(turns, 1),
        "turns_cut_context": sum(d.masked_turns for d in dialogues),
        "turns_cut_length": sum(len(d.cut_turns) for d in dialogues),
    }


def oracle_values(db, family: str, sandbox: str, ids: list[int], agent_rows: dict[int, list]) -> list[list[float]]:
    """--turn-credit oracle: per dialogue of ``ids``, per agent turn (its stored Turn rows), the family's ground
    truth for the turn in its place (backend-lite: a question that obtains a new fact 1, else 0; an answer its share
    of tests passed)."""
    from colbench.families import family as family_named

    oracle = family_named(family).turn_oracle(db, ids, sandbox)
    try:
        found = oracle.values([(i, turn.id, [turn.raw if turn.raw is not None else turn.content])
                               for i in ids for turn in agent_rows[i]])
    finally:
        oracle.close()
    flat = iter(v[0] for v in found)
    return [[next(flat) for _ in agent_rows[i]] for i in ids]


class TimedEnv:
    """The family's environment, measuring the wall time during which some grade is under way (it overlaps the
    generation of other dialogues)."""

    def __init__(self, env):
        self.env, self.in_flight, self.seconds, self._since = env, 0, 0.0, 0.0
        self._lock = threading.Lock()  # grades end on the grader's threads

    def __getattr__(self, name):
        return getattr(self.env, name)

    def grade_episode(self, episode):
        with self._lock:
            if self.in_flight == 0:
                self._since = time.perf_counter()
            self.in_flight += 1
        future = self.env.grade_episode(episode)
        future.add_done_callback(self._done)
        return future

    def _done(self, _future) -> None:
        with self._lock:
            self.in_flight -= 1
            if self.in_flight == 0:
                self.seconds += time.perf_counter() - self._since


class OnlineRecipe:
    """setup (the trainer, the optimiser over every step, the rollout's parts) → steps → the final checkpoint.

    Under several processes (`colbench launch`) the main process rolls out and scores the turns' credit, the others
    wait; then every process reads the step's dialogues from the store and trains on its share of each minibatch.
    Under --shard full the main process samples from an unsharded copy, refreshed from the shards each step."""

    def __init__(self, db, config: PolicyConfig, estimator: str, trainer: PolicyTrainer, run, critic_id: int | None,
                 start_parent):
        self.db, self.config, self.estimator, self.trainer, self.run = db, config, estimator, trainer, run
        self.critic_id = critic_id
        self.start_parent = start_parent  # what the run started from: the KL's reference
        self.critic = None
        self.credit = None  # --turn-credit's signal, when it is neither the critic nor the oracle
        self.reference_copy = None
        self.sampler_copy = None
        self.engine = None  # a ct2 engine of this step's weights, closed when the next step's replaces it
        self.served: str | None = None  # the adapter a server serves for this step (--engine openai)
        self.tasks: dict[int, Any] = {}

    @property
    def main(self) -> bool:
        return self.trainer.accelerator.is_main_process

    def from_main(self, work):
        """``work()`` run on the main process, its result handed to every process."""
        return on_main(self.trainer.accelerator, work)

    # -------------------------------------------------- setup

    def setup(self, start_step: int, state: dict | None) -> None:
        from colbench.wiring import build_env, build_simulator, select_tasks

        cfg, trainer = self.config, self.trainer
        trainer.setup_model()
        self.dialogues_per_step = cfg.tasks_per_step * cfg.group
        # One optimiser and schedule over the whole run: epochs passes over each step's dialogues, every step.
        trainer.scorer, trainer.optimizer, trainer.loader, trainer.scheduler, trainer.total_steps = prepare_training(
            trainer.accelerator, trainer.model, cfg, self.dialogues_per_step, cfg.epochs * cfg.steps,
            scorer=trainer.sharded_scorer, processes=1)  # every process trains a share of each minibatch
        if state is not None:
            trainer.optimizer.load_state_dict(state["optimizer"])
            trainer.scheduler.load_state_dict(state["scheduler"])
        self.tasks = {t.id: t for t in select_tasks(self.db, f"{cfg.family}:{cfg.split}", None)}
        self.start_step = start_step
        if cfg.eval_every:
            from colbench.wiring import parse_task_selector

            if not cfg.eval_tasks and not cfg.tasks:
                raise DataError("--eval-every needs --eval-tasks (or --tasks, whose family's val split it reads)")
            self.eval_selector = cfg.eval_tasks or f"{cfg.tasks.rsplit(':', 1)[0]}:val"
            self.eval_split = parse_task_selector(self.eval_selector)
            self.eval_tasks = select_tasks(self.db, self.eval_selector, cfg.eval_limit)
        if not self.main:  # the main process rolls out
            return
        env, self.close_env = build_env(self.db, cfg.family, sandbox=cfg.sandbox, workers=2, grading="official")
        self.env = TimedEnv(env)
        self.simulator = build_simulator(self.db, cfg.simulator, "hf", family=cfg.family, guard=cfg.sim_guard)

    def close(self) -> None:
        if self.main and self.config.engine == "ct2":
            self.close_engine()
            shutil.rmtree(self.scratch("online-ct2", f"run-{self.run.id}"), ignore_errors=True)
        if self.main and self.config.engine == "openai":
            try:
                self.unload_served()
            except ColbenchError:  # the server is gone (perhaps why the run stopped): it holds nothing now
                pass
        if self.credit is not None:
            self.credit.close()
        if self.main and hasattr(self, "simulator"):
            self.simulator.close()
            self.close_env()

    # -------------------------------------------------- one step

    def step(self, k: int) -> dict:
        cfg = self.config
        figures: dict[str, float] = {}
        started = time.perf_counter()
        engine = self.engine_for(k)
        figures["sync_s"] = time.perf_counter() - started
        figures |= self.from_main(lambda: self.rollout(k, engine))
        self.trainer.accelerator.wait_for_everyone()
        trajectories = self.step_dialogues(k)
        # The step's first draw is what its reward and success describe; dynamic sampling trains on the groups with
        # spread, the first draw's first, then the replacements' in the order they were drawn.
        first = step_tasks(sorted(self.tasks), k, cfg.tasks_per_step, cfg.seed)
        drawn = [t for t in trajectories if t.task_id in first]
        if cfg.dynamic_sampling:
            groups = rewards_by_task(trajectories, self.reward_of)
            spread = [task for task in first + self.refill_order(k, first) if has_spread(groups.get(task, []))]
            kept = set(spread[: cfg.tasks_per_step])
            tasks = {t.task_id for t in trajectories}
            figures["groups_dropped"] = 1 - len(kept) / max(len(tasks), 1)
            trajectories = [t for t in trajectories if t.task_id in kept]
            if not trajectories:  # no group with spread, even after refilling: nothing to learn from this step
                return figures | self.group_figures(drawn) | {"step_s": time.perf_counter() - started}
        dialogues, agent_rows = read_dialogues(self.db, self.trainer.tokenizer, cfg.family, trajectories, cfg.max_len)
        figures |= self.group_figures(drawn) | turn_figures(dialogues)
        if cfg.cut_turns == "mask":
            for dialogue in dialogues:
                mask_turns(dialogue, dialogue.cut_turns)
        rewards = torch.tensor([self.reward_of(t) for t in trajectories])
        task_index = {task: i for i, task in enumerate(sorted({t.task_id for t in trajectories}))}
        groups = torch.tensor([task_index[t.task_id] for t in trajectories])
        per_dialogue = group_advantages(rewards, groups, self.estimator, scale=not cfg.no_std).tolist()
        credit_started = time.perf_counter()
        values = self.from_main(lambda: self.turn_values(trajectories, agent_rows))
        credit = None
        if values is not None:
            counts = [turn_token_counts(d) for d in dialogues]
            if cfg.turn_credit_combination == "variance-gated":
                credit = variance_gated_credit(values, counts, per_dialogue, rewards.tolist(), groups.tolist(),
                                               cfg.turn_credit_weight, cfg.gate_temperature)
            else:
                credit = dialogue_credit(values, counts, per_dialogue, cfg.turn_credit_weight)
        figures["credit_s"] = time.perf_counter() - credit_started
        set_advantages(dialogues, per_dialogue, credit)
        if cfg.cut_turns == "penalise":
            for dialogue in dialogues:
                penalise_turns(dialogue, dialogue.cut_turns, cfg.cut_penalty)
        train_started = time.perf_counter()
        if any(d.trained_tokens for d in dialogues):
            figures |= self.update(dialogues)
        figures["train_s"] = time.perf_counter() - train_started
        if cfg.turn_credit == "critic" and cfg.critic_refit_every and k % cfg.critic_refit_every == 0:
            figures["critic_pairs"] = self.refit_critic(k)
        figures["step_s"] = time.perf_counter() - started
        return figures

    def refill_order(self, k: int, first: list[int]) -> list[int]:
        """The replacement tasks dynamic sampling may draw at step k, in order: the split's tasks other than the
        step's first draw ``first``, shuffled by the seed and the step."""
        others = sorted(set(self.tasks) - set(first))
        random.Random(f"online:{self.config.seed}:refill:{k}").shuffle(others)
        return others

    def engine_for(self, k: int, model_ref: str | None = None):
        """The engine that rolls step k out, on the policy's current weights (None off the main process, which takes
        part in what is collective: gathering a sharded model's weights, saving an adapter). ``model_ref``: the
        policy name its dialogues are stored under (default: step k's)."""
        cfg, trainer = self.config, self.trainer
        model_ref = model_ref or step_policy(self.run.id, k)
        if cfg.engine == "ct2":
            return self.ct2_engine(model_ref)
        if cfg.engine == "hf":
            from colbench.engines.hf import HFEngine

            model = self.sampling_model()
            if model is None:
                return None
            return HFEngine(model=model, tokenizer=trainer.tokenizer, max_batch_size=cfg.sample_batch_size,
                            model_ref=model_ref)
        from colbench.engines.openai import OpenAIEngine
        from colbench.openai_client import OpenAIClient

        name = f"colbench-online-{self.run.id}-step-{k}" + ("" if model_ref == step_policy(self.run.id, k) else "-eval")
        folder = self.scratch("online-adapters", name)
        if not (folder / "adapter_config.json").exists():
            trainer.save(folder)
        if not self.main:
            return None
        with OpenAIClient(cfg.base_url) as client:
            client.load_lora_adapter(name, str(folder.resolve()))
        self.unload_served()  # the last step's: its dialogues are done, and a server holds adapters in memory
        self.served = name
        return OpenAIEngine(name, cfg.base_url, tokenizer=trainer.tokenizer, model_ref=model_ref)

    def unload_served(self) -> None:
        """The adapter served for the step before, unloaded from the server and removed from disk (--engine openai)."""
        if self.served is None:
            return
        from colbench.openai_client import OpenAIClient

        with OpenAIClient(self.config.base_url) as client:
            client.unload_lora_adapter(self.served)
        shutil.rmtree(self.scratch("online-adapters", self.served), ignore_errors=True)
        self.served = None

    def scratch(self, *parts: str) -> Path:
        """A folder under the artefact root (or --out) for files the run's steps need."""
        return Path(self.db.folder if not self.config.out else self.config.out).joinpath(*parts)

    def ct2_engine(self, model_ref: str):
        """CTranslate2 on step k's weights: written as a checkpoint is (an adapter, or full weights; every process
        takes part when they are sharded), converted in float32 (the same policy: its log-probs within 1e-3 nats of
        the trainer's, which `sampler_ratio` shows), the previous step's copies removed first (~2 x the weights on
        disk at a time). On a CPU it samples ~1.4x the tokens/s of the model being trained (benchmarks/online_step.py).
        """
        from colbench.engines.ct2 import CT2Engine
        from colbench.model_refs import ModelSource

        folder = self.scratch("online-ct2", f"run-{self.run.id}")
        if self.main:
            self.close_engine()
            shutil.rmtree(folder, ignore_errors=True)
        adapter, _ = self.trainer.save(folder / "weights")
        if not self.main:
            return None
        weights = str(folder / "weights")
        source = ModelSource(base=self.trainer.source.base, adapter=weights) if adapter else ModelSource(base=weights)
        device = "cuda" if self.trainer.device.type == "cuda" else "cpu"
        self.engine = CT2Engine(source, device=device, cache_dir=folder / "converted",
                                max_batch_size=self.config.sample_batch_size, model_ref=model_ref)
        return self.engine

    def close_engine(self) -> None:
        if self.engine is not None:
            self.engine.close()
            self.engine = None

    def sampling_model(self):
        """The main process's model to sample from, with the current weights: the model being trained itself, or
        under --shard full an unsharded copy that the shards' gathered weights refresh (every process gathers)."""
        trainer = self.trainer
        if not trainer.sharded:
            return trainer.model if self.main else None
        from colbench.training.modeling import full_state_dict

        state = full_state_dict(trainer.scorer, is_peft(trainer.model))
        if not self.main:
            return None
        if self.sampler_copy is None:
            self.sampler_copy = model_to_train(trainer.source, trainer.parent, self.config, str(trainer.device),
                                               lora_over_full=True).eval()
            self.sampler_copy.requires_grad_(False)
        self.sampler_copy.load_state_dict({k: v.to(trainer.device) for k, v in state.items()}, strict=False)
        return self.sampler_copy

    def rollout(self, k: int, engine) -> dict:
        """Roll step k out (what is stored already is kept); returns its time figures."""
        from colbench.rollout import Rollout
        from colbench.rollout_config import RolloutConfig

        cfg = self.config
        served = {"engine": "openai", "base_url": cfg.base_url} if cfg.engine == "openai" else {"engine": cfg.engine}
        rollout_config = RolloutConfig(
            model=engine.model_ref, tasks=f"{cfg.family}:{cfg.split}", samples_per_task=cfg.group, seed=cfg.seed,
            temperature=cfg.temperature, max_new_tokens=cfg.max_new_tokens, batch_size=cfg.sample_batch_size,
            sandbox=cfg.sandbox, simulator=cfg.simulator, sim_guard=cfg.sim_guard, tags=[f"online:{self.run.id}"],
            **served)
        chosen = step_tasks(sorted(self.tasks), k, cfg.tasks_per_step, cfg.seed)
        model = self.trainer.model
        graded_before, started = self.env.seconds, time.perf_counter()
        refills = iter(self.refill_order(k, chosen))
        drawn = 0
        model.eval()
        try:
            while chosen:
                Rollout(self.db, engine, self.simulator, self.env, rollout_config).run([self.tasks[i] for i in chosen])
                if not cfg.dynamic_sampling:
                    break
                # Dynamic sampling: replacements for the groups without spread, while the cap allows (a continued
                # step finds them stored and draws the same ones).
                groups = rewards_by_task(self.step_dialogues(k), self.reward_of).values()
                room = min(cfg.tasks_per_step - sum(map(has_spread, groups)), cfg.dynamic_sampling - drawn)
                chosen = [task for _, task in zip(range(max(room, 0)), refills)]
                drawn += len(chosen)
        finally:
            model.train()
        return {"rollout_s": time.perf_counter() - started, "grading_s": self.env.seconds - graded_before,
                "refill_tasks": drawn}

    def step_dialogues(self, k: int) -> list:
        """Step k's graded dialogues, as the store has them."""
        cfg = self.config
        with self.db.read() as session:
            found, _ = queries.trained_data(session, family=cfg.family, split=cfg.split, watermark=None,
                                            policies=[step_policy(self.run.id, k)])
        if not found:
            raise DataError(f"step {k}: none of its {self.dialogues_per_step} dialogues could be graded")
        return sorted(found, key=lambda t: t.id)

    def validate(self, k: int, checkpoint_id: int | None) -> dict:
        """--eval-every: step k's weights (checkpoint ``checkpoint_id``) rolled out on the validation tasks, stored
        under ``ckpt:<id>`` and evaluated as `colbench eval` does (the evaluation recorded); returns val_reward and
        val_success. Every process takes part in what is collective (writing the weights); the main one rolls out."""
        from colbench.eval import evaluate
        from colbench.rollout import Rollout
        from colbench.rollout_config import RolloutConfig

        cfg = self.config
        policy = self.from_main(lambda: f"ckpt:{checkpoint_id}")
        engine = self.engine_for(k, model_ref=policy)
        if not self.main:
            return {}
        family, split = self.eval_split
        served = {"engine": "openai", "base_url": cfg.base_url} if cfg.engine == "openai" else {"engine": cfg.engine}
        config = RolloutConfig(model=policy, tasks=self.eval_selector, samples_per_task=cfg.eval_samples,
                               seed=cfg.seed, temperature=cfg.temperature, max_new_tokens=cfg.max_new_tokens,
                               batch_size=cfg.sample_batch_size, sandbox=cfg.sandbox, simulator=cfg.simulator,
                               sim_guard=cfg.sim_guard, tags=[f"online:{self.run.id}", "validation"], **served)
        model = self.trainer.model
        model.eval()
        try:
            Rollout(self.db, engine, self.simulator, self.env, config).run(self.eval_tasks)
        finally:
            model.train()
            if cfg.engine == "openai":
                self.unload_served()
        found = evaluate(self.db, family, split, policies=[policy])
        if not found:
            return {}
        return {"val_reward": found[0].reward.mean,
                "val_success": found[0].success.mean if found[0].success is not None else float("nan")}

    def reward_of(self, trajectory) -> float:
        return float(bool(trajectory.success)) if self.config.reward == "success" else float(trajectory.reward)

    # -------------------------------------------------- turn credit

    def turn_values(self, trajectories, agent_rows) -> list[list[float | None]] | None:
        """Per dialogue, per agent turn: what --turn-credit says the turn is worth (None: no credit)."""
        cfg = self.config
        if cfg.turn_credit == "none":
            return None
        ids = [t.id for t in trajectories]
        if cfg.turn_credit == "critic":
            critic = self.loaded_critic()
            examples = D.load_examples(self.db, critic.tokenizer, ids, training_info=critic.training_info,
                                       max_len=critic.max_len)
            values = critic.turn_advantages([examples[i] for i in ids])
        elif cfg.turn_credit == "oracle":
            values = oracle_values(self.db, cfg.family, cfg.sandbox, ids, agent_rows)
        else:
            from colbench.training.credit import stored_dialogues

            values = self.loaded_credit().values(stored_dialogues(self.db, ids))
        return values

    def loaded_credit(self):
        """Any other registered turn credit, its models the run's starting point (colbench/training/credit)."""
        if self.credit is None:
            from colbench.training.credit import CreditConfig, make_credit

            cfg = self.config
            start = f"ckpt:{self.start_parent[0].id}" if self.start_parent else self.trainer.source.ref
            self.credit = make_credit(cfg.turn_credit, self.db, CreditConfig(
                model=start, seed=cfg.seed, sandbox=cfg.sandbox, device=str(self.trainer.device),
                batch_size=cfg.sample_batch_size))
        return self.credit

    def loaded_critic(self):
        if self.critic is None:
            from colbench.training.scoring import CriticModel

            self.critic = CriticModel.from_checkpoint(self.db, self.critic_id, device=str(self.trainer.device),
                                                      dtype=self.config.dtype,
                                                      batch_size=self.config.sample_batch_size)
        return self.critic

    def refit_critic(self, k: int) -> int:
        """Continue the critic on the pairs of the run's own dialogues of steps 1..k it has not read (its watermark),
        and rank with it from now on: a replayed step (a continued run) reads what the step read the first time, not
        the later steps' dialogues already in the store. Returns the pairs it trained on (0: no group held both a
        correct and a failed dialogue)."""
        from colbench.training import NothingToTrain
        from colbench.training.critic import fit_critic

        with self.db.read() as session:
            _, run = queries.checkpoint_and_run(session, self.critic_id)
        known = {f.name for f in fields(CriticConfig)} - {"name", "tags", "out", "policies", "heldout_fraction",
                                                           "report_to"}
        settings = {k: v for k, v in (run.config or {}).items() if k in known}
        steps = ",".join(step_policy(self.run.id, j) for j in range(1, k + 1))
        config = CriticConfig(**settings | {"policies": steps, "heldout_fraction": 0.0,
                                            "family": self.config.family, "split": self.config.split})
        # accelerate keeps one gradient state per process: the critic's trainer sets its own accumulation there, which
        # the policy's accelerator would then train with (its --grad-accum silently the critic's). Put it back.
        gradient_state = self.trainer.accelerator.gradient_state
        policy_accumulation = dict(gradient_state.plugin_kwargs)
        try:
            result = fit_critic(self.db, config, parent_checkpoint=self.critic_id)
        except NothingToTrain:
            return 0
        finally:
            gradient_state.plugin_kwargs = policy_accumulation
        # Every process trained it together; the main process recorded it and knows its id.
        self.critic_id, self.critic = self.from_main(lambda: result.checkpoint_id), None
        return int(result.metrics.get("pairs", 0))

    # -------------------------------------------------- the update

    def update(self, dialogues: list[Dialogue]) -> dict:
        cfg, trainer = self.config, self.trainer
        acc = trainer.accelerator
        # Every epoch's minibatches and each process's share of them, drawn before any update. Each epoch's
        # minibatches fall into --grad-accum groups, its last group perhaps shorter, as the schedule counts them: the
        # optimiser steps at the end of each group, so no gradient spills over into the next step.
        plan: list[Minibatch] = []
        for _ in range(cfg.epochs):
            order = list(range(len(dialogues)))
            random.Random(f"{cfg.seed}:{len(plan)}:{dialogues[0].trajectory_id}").shuffle(order)
            batches = [[dialogues[i] for i in order[at : at + cfg.batch_size]]
                       for at in range(0, len(order), cfg.batch_size)]
            for j, batch in enumerate(batches):
                first = j - j % cfg.grad_accum
                group = min(cfg.grad_accum, len(batches) - first)
                plan.append(Minibatch([batch[rank :: acc.num_processes] for rank in range(acc.num_processes)],
                                      boundary=j == first + group - 1, group=group))
        # π_old, before the first update, on the dialogues this process will train (as many calls on every process).
        trained = [{id(d): d for mb in plan for d in mb.shares[rank]} for rank in range(acc.num_processes)]
        calls = max(-(-sum(len(d.rows) for d in share.values()) // cfg.pass_rows) for share in trained)
        figures = old_policy_logps(trainer.scorer, list(trained[acc.process_index].values()), calls,
                                   pad_id=trainer.tokenizer.pad_token_id, device=trainer.device,
                                   pass_rows=cfg.pass_rows, cap=cfg.tis_cap, level=cfg.tis_level,
                                   spare=dialogues[0])
        gap_max = max_over_processes(acc, figures.pop("mismatch_max"))
        history: list[dict] = []
        reference = self.reference()
        budget = cfg.max_new_tokens * protocol.MAX_AGENT_TURNS  # Dr. GRPO's constant: a dialogue's token budget
        for mb in plan:
            # Every process takes its share, in as many passes as the busiest one needs (DDP and FSDP2 synchronise
            # each backward); a pass with nothing of its own repeats a row at zero weight.
            passes = max(-(-sum(len(d.rows) for d in share) // cfg.pass_rows) for share in mb.shares)
            everyone = [d for share in mb.shares for d in share]
            tokens = sum(d.trained_tokens for d in everyone)
            factors = aggregation_factors(cfg.loss_aggregation, everyone, budget)
            mine = mb.shares[acc.process_index]
            rows = [row for d in (mine or [mb.shares[0][0]]) for row in d.training_rows(factors[id(d)])]
            # accelerate divides each loss by --grad-accum: a shorter last group is scaled back to its own size.
            scale = (cfg.grad_accum / mb.group) if mine else 0.0
            with accumulating(acc, trainer.scorer, mb.boundary):
                stats = policy_backward(
                    trainer.scorer, rows, max(passes, 1), reference,
                    lambda loss, scale=scale: acc.backward(loss * scale),
                    pad_id=trainer.tokenizer.pad_token_id, device=trainer.device, clip=cfg.clip,
                    kl_beta=cfg.kl_beta, clip_high=cfg.clip_high, denominator=tokens / acc.num_processes)
                stats |= optimizer_step(acc, trainer.scorer, trainer.optimizer, trainer.scheduler, None,
                                        cfg.max_grad_norm)
            history.append(stats)
        means = {k: sum(h[k] for h in history if k in h) / sum(1 for h in history if k in h) for k in history[-1]}
        return means_over_processes(acc, means | figures) | {"mismatch_max": gap_max}

    def reference(self):
        """(scorer, context factory) computing the policy as the run started, or None where that would take a second
        copy of the weights no KL term needs."""
        trainer, cfg = self.trainer, self.config
        parent_adapter = self.start_parent is not None and bool(self.start_parent[0].adapter)
        if is_peft(trainer.model) and not parent_adapter:
            # A fresh adapter over the base (or a full-weight parent): the run started from the weights under it.
            return trainer.scorer, lambda: adapter_disabled(trainer.model)
        if cfg.kl_beta == 0:
            return None
        # A LoRA parent's adapter is the one being trained, so switching it off would give the bare base: the
        # reference is a frozen copy of the parent (the base once more, with the parent's adapter).
        if self.reference_copy is None:
            from colbench.training.modeling import TokenLogProbs

            model = model_to_train(trainer.source, self.start_parent, cfg, str(trainer.device), lora_over_full=True)
            model.requires_grad_(False)
            self.reference_copy = TokenLogProbs(model.eval(), autocast=cfg.autocast_dtype(trainer.device))
        return self.reference_copy, nullcontext

    def group_figures(self, trajectories) -> dict:
        """The reward figures of ``trajectories`` (a step's first draw)."""
        rewards = rewards_by_task(trajectories, self.reward_of)
        with self.db.read() as session:
            leaks = queries.leak_actions(session, [t.id for t in trajectories])
        return {
            # The share of dialogues in which the simulated human handed over the reference (the public ColBench
            # GRPO run's extraction signal), and of those in which the guard kept it from the agent.
            "sim_leak": len(leaks) / max(len(trajectories), 1),
            "sim_redacted": sum(any(a != "flagged" for a in actions) for actions in leaks.values())
            / max(len(trajectories), 1),
            "reward": sum(map(sum, rewards.values())) / max(len(trajectories), 1),
            "success": sum(bool(t.success) for t in trajectories) / max(len(trajectories), 1),
            "groups_with_spread": sum(has_spread(r) for r in rewards.values()) / max(len(rewards), 1),
            "dialogues": len(trajectories),
        }

    # -------------------------------------------------- checkpoints

    def save_step(self, k: int, figures: dict) -> int | None:
        """Step k's checkpoint, with every process's optimiser state beside it. Returns its id (None off the main
        process)."""
        return self.run.checkpoint(self.saver(k), step=k, metrics=figures)[0]

    def saver(self, k: int):
        """What writes step k's checkpoint into a folder: the model, then every process's optimiser state (the run's
        final checkpoint too, so that a rerun with more --steps continues it)."""
        trainer = self.trainer

        def save(folder: Path, card) -> tuple[bool, str | None]:
            acc = trainer.accelerator
            adapter, digest = trainer.save(folder, card)
            acc.wait_for_everyone()  # the main process has written the folder
            torch.save({"step": k, "optimizer": trainer.optimizer.state_dict(),
                        "scheduler": trainer.scheduler.state_dict(), "critic_id": self.critic_id},
                       state_file(folder, acc.process_index))
            acc.wait_for_everyone()  # every process's state is written before the checkpoint is recorded
            return adapter, digest

        return save


class Collapsed(ColbenchError):
    """The collapse guard stopped the run (--on-collapse stop)."""


def collapse_line(k: int, entropy: float | None, first: float | None, bound: float) -> str | None:
    """The collapse guard's line for step k, or None: its entropy above ``bound`` times step 1's."""
    if not bound or entropy is None or not first or entropy <= bound * first:
        return None
    return (f"step {k}: entropy {entropy:.3g} is {entropy / first:.1f}x step 1's {first:.3g} (past --collapse-entropy"
            f" {bound:g}): the policy is collapsing")


def resume_point(db, run_id: int | None, rank: int, steps: int):
    """(the step to start at, the step checkpoint to continue, this process's optimiser state) of a run continued
    (a failed one, or a finished one extended to ``steps``)."""
    if run_id is None:
        return 1, None, None
    with db.read() as session:
        [(run, _)] = queries.training_runs(session, run_id=run_id)
        saved = [c for c in queries.run_checkpoints(session, run_id) if state_file(c.path, 0).exists()]
    if run.status == "done" and (not saved or saved[-1].step != run.config.get("steps")):
        raise DataError(f"train:{run_id} finished without the optimiser state that extending it needs (a run made"
                        " before runs could be extended): start a new run (another --name)")
    if saved and saved[-1].step >= steps:
        raise DataError(f"train:{run_id} has {saved[-1].step} steps already: give --steps above {saved[-1].step} to"
                        " extend it")
    if not saved:
        return 1, None, None
    last = saved[-1]
    mine = state_file(last.path, rank)
    if not mine.exists():
        raise DataError(f"run {run_id} was saved by fewer processes: continue it with as many as it ran with")
    return last.step + 1, last.id, torch.load(mine, map_location="cpu", weights_only=False)


def fit(db, config: PolicyConfig | None = None, *, estimator: str = "grpo", base_model: str | None = None,
        parent_checkpoint=None, from_scratch: bool = False, critic_checkpoint=None, on_progress=None) -> PolicyResult:
    """Train a policy online (GRPO or RLOO, ``estimator``) from ``base_model`` or ``parent_checkpoint``; a rerun of
    the same command continues a stopped run. ``critic_checkpoint``: the critic of ``--turn-credit critic``."""
    from accelerate import PartialState

    from colbench.model_refs import get_checkpoint
    from colbench.training.checkpoints import check_artifact_root, check_name_free, extendable_run, stopped_run

    algo = estimator
    config = (config or PolicyConfig()).for_algo(algo)
    if config.turn_credit not in ("none", "critic", "oracle"):
        from colbench.training.credit import check_credit

        check_credit(config.turn_credit)  # before a model is loaded: an unknown name is one line
    if config.turn_credit == "critic" and critic_checkpoint is None:
        raise DataError("--turn-credit critic needs --critic ckpt:<id>")
    if config.temperature != 1.0:
        # Engines return the log-probs of the untempered distribution, which the trainer scores: at T ≠ 1 the ratio
        # would read 1 while the update is off-policy.
        raise DataError(f"online RL samples at temperature 1 (its ratio is to the untempered policy); got"
                        f" --temperature {config.temperature:g}")
    if config.engine == "openai" and (config.full or not config.base_url):
        raise DataError("--engine openai needs --base-url and a LoRA policy (a running vLLM loads adapters only)")
    if critic_checkpoint is not None and "," in str(critic_checkpoint):
        raise DataError("--turn-credit critic reads one critic, not an ensemble")
    critic_id = None
    if critic_checkpoint is not None:  # before any rollout: a wrong reference costs no step
        critic, critic_run = get_checkpoint(db, critic_checkpoint)
        if critic_run.kind != "critic":
            raise DataError(f"--critic ckpt:{critic.id} is a {critic_run.kind} checkpoint, not a critic")
        critic_id = critic.id
    base_model, parent, _, source = starting_point(db, config, base_model, parent_checkpoint, from_scratch)
    settings = run_settings(config, algo, critic_id if config.turn_credit == "critic" else None)
    check_artifact_root(db, config.out)
    processes = PartialState(cpu=config.on_cpu)

    def stopped() -> int | None:
        # The same command continues its stopped run; with other --steps, it extends its run (finished or not).
        earlier = (stopped_run(db, f"policy:{algo}", settings, config.name)
                   or extendable_run(db, f"policy:{algo}", settings, config.name))
        if earlier is None:
            check_name_free(db, config.name)
        return earlier.id if earlier else None

    earlier = on_main(processes, stopped)
    start, continued_id, state = resume_point(db, earlier, processes.process_index, config.steps)
    with training_run(db, kind=f"policy:{algo}", base_model=base_model,
                      parent_checkpoint_id=parent[0].id if parent else None, settings=settings, name=config.name,
                      tags=config.tags, report_to=config.report_to, out=config.out, on_cpu=config.on_cpu,
                      resume=earlier) as run:
        # A continued run loads its last step checkpoint as a policy run continues its parent's (read once the run
        # is reopened: an extended run's final checkpoint has just moved beside the final folder).
        checkpoint = None
        if continued_id is not None:
            with db.read() as session:
                checkpoint = queries.checkpoint_and_run(session, continued_id)
        trainer = PolicyTrainer(db, config, algo, source, checkpoint or parent, on_progress)
        recipe = OnlineRecipe(db, config, estimator, trainer, run, critic_id, start_parent=parent)
        recipe.setup(start, state)
        if state is not None:
            recipe.critic_id = state.get("critic_id", critic_id)
        first_entropy = None
        if start > 1:
            with db.read() as session:
                first_entropy = next((s.values.get("entropy") for s in queries.training_steps(session, run.id)
                                      if s.step == 1), None)
        try:
            with run.step_log() as steps:
                for k in range(1, config.steps + 1):
                    if on_progress:
                        on_progress("online", k - 1, config.steps, {})
                    if k < start:
                        continue
                    figures = recipe.step(k)
                    first_entropy = figures.get("entropy") if k == 1 else first_entropy
                    saved = False
                    if config.eval_every and k % config.eval_every == 0:
                        checkpoint_id = recipe.save_step(k, figures)
                        saved = True
                        figures |= recipe.validate(k, checkpoint_id)
                    steps.record(k, 1, figures)  # the main process writes
                    if k % config.save_every == 0 and k < config.steps and not saved:
                        recipe.save_step(k, figures)
                    line = collapse_line(k, figures.get("entropy"), first_entropy, config.collapse_entropy)
                    if line and config.on_collapse == "stop":
                        raise Collapsed(line + "; the run stops (--on-collapse stop)")
                    if line and recipe.main:
                        print(f"warning: {line}", file=sys.stderr)
                if on_progress:
                    on_progress("online", config.steps, config.steps, {})
        finally:
            recipe.close()
        with db.read() as session:
            consumed, watermark = queries.trained_data(session, family=config.family, split=config.split,
                                                       watermark=None, policies=[run_policies(run.id)])
            curve = [s.values for s in queries.training_steps(session, run.id)]
        lineage = [(t.id, None) for t in consumed]
        metrics = trainer.metrics | {
            "steps": config.steps, "dialogues": len(lineage),
            "first_reward": curve[0].get("reward") if curve else None,
            "last_reward": curve[-1].get("reward") if curve else None,
            "critic_checkpoint_id": recipe.critic_id,
        }
        # Its watermark: the newest of its own dialogues (what it read; a study sees it is newer than its data).
        checkpoint_id, folder = run.finish(recipe.saver(config.steps), metrics=metrics, watermark=watermark,
                                           lineage=lineage)
        return PolicyResult(run.id, checkpoint_id, str(folder), metrics)

