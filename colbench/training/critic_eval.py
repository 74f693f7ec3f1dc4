"""How good a trained critic is, on trajectories it was not trained on.

- **Pair accuracy**: on graded trajectories of held-out tasks, the pairs a critic would be
  trained on (the family's rule unless told), and how often the chosen side's trajectory
  score Σ_t A_t (what Bradley-Terry compares, up to β) is the higher. Σ_t A_t grows or
  shrinks with the number of turns, which training pairs of like length never pin down, so
  it is also given over the pairs whose two dialogues have as many agent turns.
- **Turn credit**: on backend-lite trajectories, each agent turn's ground-truth label: did the
  simulated human's reply to it state a hidden fact not stated before (the lite human states a
  fact only when asked for it, colbench/simulators/rulebased/lite.py)? A critic that assigns
  credit well gives those turns the higher advantages. Two figures: Spearman's rank
  correlation between A_t and the label over all turns, and the within-trajectory AUC (the
  chance that a fact-obtaining turn outranks a turn of the same dialogue that obtained
  nothing; ties count half), which no difference in scale between dialogues can inflate.
  The final answer counts among the turns that obtained nothing, though a right answer
  deserves credit too; the question AUC compares only questions (a new fact against a
  re-ask or a question nothing answers), and so measures credit among questions alone.

Every advantage computed lands in ``critic_score`` (scoring.stored_advantages).

SWEET-RL's claim is that a critic given the training-time information c (the reference)
ranks turns better than one without; `colbench critic eval` on both critics measures it.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from colbench.progress import Progress
from colbench.store import queries
from colbench.training import data as D
from colbench.training.config import pair_rule


@dataclass
class CriticEvaluation:
    checkpoint: str
    training_info: bool
    tasks: str
    trajectories: int
    pairs: int
    pair_accuracy: float | None
    same_length_pairs: int  # of which the two dialogues have as many agent turns
    same_length_pair_accuracy: float | None
    labelled_turns: int  # agent turns of lite trajectories with an advantage
    fact_turns: int  # of which obtained a new fact
    turn_spearman: float | None
    turn_auc: float | None  # within-trajectory
    auc_trajectories: int  # dialogues with both kinds of turn
    question_auc: float | None  # within-trajectory, question turns only
    question_auc_trajectories: int

    def as_dict(self) -> dict:
        return asdict(self)


def evaluate_critic(
    db, critic_ref: str, *, tasks: str = "backend-lite:test", policies: list[str] | None = None,
    setting: str | None = None,
    rule: str | None = None, limit: int | None = None, device: str = "auto", on_progress: Progress | None = None,
) -> CriticEvaluation:
    """Score the graded trajectories of ``tasks`` (a --tasks selector; of ``policies``, rolled out
    under ``setting`` when given, at most ``limit``, newest first) with the critic, and measure both figures."""
    from colbench.training.scoring import CriticModel, stored_advantages
    from colbench.wiring import parse_task_selector

    family, split = parse_task_selector(tasks)
    critic = CriticModel.from_checkpoint(db, critic_ref, device=device)
    with db.read() as session:
        trajectories, _ = queries.trained_data(session, family=family, split=split, watermark=None, policies=policies)
    if setting is not None:
        trajectories = [t for t in trajectories if (t.setting or "") == setting]
    trajectories = sorted(trajectories, key=lambda t: t.id, reverse=True)[:limit] if limit else trajectories
    if not trajectories:
        raise ValueError(f"no graded trajectories in {tasks}" + (f" of {', '.join(policies)}" if policies else "")
                         + (f" under the setting {setting!r}" if setting is not None else ""))

    advantages: dict[int, list[float | None]] = {}
    ids = sorted(t.id for t in trajectories)
    for chunk, values in stored_advantages(db, critic, ids):
        advantages.update(zip(chunk, values))
        if on_progress:
            on_progress("critic eval", len(advantages), len(ids), {})

    pairs = D.build_pairs([D.Graded(t.id, t.task_id, float(t.reward)) for t in trajectories], pair_rule(family, rule))
    return CriticEvaluation(
        checkpoint=f"ckpt:{critic.checkpoint_id}", training_info=critic.training_info, tasks=tasks,
        trajectories=len(ids), **figures(advantages, pairs, turn_kinds(db, ids)),
    )


def figures(advantages: dict[int, list[float | None]], pairs: list[D.Pair], kinds: dict[int, list[str]]) -> dict:
    """Every figure of a judgement, from each trajectory's per-turn advantages, its pairs, and
    each lite trajectory's turn kinds (``turn_kinds``)."""
    from colbench.families.lite_truth import NEW, QUESTIONS

    total = {i: sum(a for a in values if a is not None) for i, values in advantages.items()}
    same_length = [p for p in pairs if len(advantages[p.chosen]) == len(advantages[p.rejected])]
    scored = [(advantages[i][k], kind, i) for i, turns in kinds.items() for k, kind in enumerate(turns)
              if k < len(advantages[i]) and advantages[i][k] is not None]
    labelled = [(a, int(kind == NEW), i) for a, kind, i in scored]
    auc, auc_trajectories = within_trajectory_auc(labelled)
    question_auc, question_auc_trajectories = within_trajectory_auc(
        [(a, int(kind == NEW), i) for a, kind, i in scored if kind in QUESTIONS])
    return dict(
        pairs=len(pairs), pair_accuracy=pair_accuracy(pairs, total),
        same_length_pairs=len(same_length), same_length_pair_accuracy=pair_accuracy(same_length, total),
        labelled_turns=len(labelled), fact_turns=sum(label for _, label, _ in labelled),
        turn_spearman=spearman([a for a, _, _ in labelled], [float(label) for _, label, _ in labelled]),
        turn_auc=auc, auc_trajectories=auc_trajectories,
        question_auc=question_auc, question_auc_trajectories=question_auc_trajectories,
    )


def describe(judged: dict) -> str:
    """A judgement (``CriticEvaluation.as_dict()``, or one stored in a run's metrics before the
    later figures existed) in one line, as every view shows it."""
    def shown(key: str, spec: str) -> str:
        return "n/a" if judged.get(key) is None else format(judged[key], spec)

    line = f"pair accuracy {shown('pair_accuracy', '.1%')} of {judged.get('pairs')}"
    if "same_length_pairs" in judged:
        line += f" (as long: {shown('same_length_pair_accuracy', '.1%')} of {judged['same_length_pairs']})"
    if judged.get("labelled_turns"):
        line += (f"; turn credit over {judged['labelled_turns']} turns ({judged.get('fact_turns')} obtained a fact):"
                 f" Spearman {shown('turn_spearman', '+.2f')}, within-dialogue AUC {shown('turn_auc', '.2f')}"
                 f" ({judged.get('auc_trajectories')} dialogues)")
        if "question_auc" in judged:
            line += (f", among questions {shown('question_auc', '.2f')}"
                     f" ({judged['question_auc_trajectories']} dialogues)")
    return line


def pair_accuracy(pairs: list[D.Pair], score: dict[int, float]) -> float | None:
    """How often the chosen side scores higher (ties count half); None without pairs."""
    wins = [1.0 if score[p.chosen] > score[p.rejected] else 0.5 if score[p.chosen] == score[p.rejected] else 0.0
            for p in pairs]
    return sum(wins) / len(wins) if wins else None


def turn_kinds(db, trajectory_ids: list[int]) -> dict[int, list[str]]:
    """Per lite trajectory, each agent turn's kind as the built-in human judges it (lite_truth: a
    question that obtained a new fact, a re-ask, one nothing answers, or the answer). Trajectories
    of other tasks are left out."""
    from colbench.families.lite_truth import lite_dialogues

    return {i: dialogue.kinds for i, dialogue in lite_dialogues(db, trajectory_ids).items()}


def ranks(values: list[float]) -> list[float]:
    """1-based ranks, ties sharing their average rank."""
    order = sorted(range(len(values)), key=values.__getitem__)
    result = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for position in range(start, end + 1):
            result[order[position]] = (start + end) / 2 + 1
        start = end + 1
    return result


def spearman(xs: list[float], ys: list[float]) -> float | None:
    """Spearman's rho (Pearson correlation of the ranks); None when either side is constant."""
    if len(xs) < 2:
        return None
    rx, ry = ranks(xs), ranks(ys)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    vx, vy = sum((a - mx) ** 2 for a in rx), sum((b - my) ** 2 for b in ry)
    return None if vx == 0 or vy == 0 else cov / (vx * vy) ** 0.5


def within_trajectory_auc(scored: list[tuple[float, int, int]]) -> tuple[float | None, int]:
    """Mean over dialogues (with both kinds of turn) of P(A of a labelled turn > A of an
    unlabelled one), ties counting half; and how many dialogues that is."""
    by_trajectory: dict[int, tuple[list[float], list[float]]] = {}
    for advantage, label, trajectory_id in scored:
        by_trajectory.setdefault(trajectory_id, ([], []))[0 if label else 1].append(advantage)
    aucs = []
    for positives, negatives in by_trajectory.values():
        if positives and negatives:
            wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p in positives for n in negatives)
            aucs.append(wins / (len(positives) * len(negatives)))
    return (sum(aucs) / len(aucs) if aucs else None), len(aucs)
