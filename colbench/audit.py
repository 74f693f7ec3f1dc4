"""`colbench audit simulator`: how a run's simulated human behaved, from its stored replies.

Every reply is judged again by its family's leak detector (colbench.simulators.leaks, through
``TaskFamily.leak``), on what the simulator wrote (the guard's stored original, else the reply) and on what
the agent was shown: so an imported run, whose replies no guard saw, is audited as a guarded one is, and a
guard that let a leak through shows as a leak that reached the agent.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import asdict, dataclass, field

from colbench import protocol
from colbench.errors import ColbenchError
from colbench.simulators.guard import REFUSAL
from colbench.simulators.offrole import off_role

# A human who declines or does not know: the built-in one says "I don't know."; models hedge in these words.
_REFUSAL = re.compile(r"\b(i don'?t know|i do not know|i can'?t (share|say|tell)|i cannot (share|say|tell)|"
                      r"not sure|no idea)\b", re.I)


class NothingToAudit(ColbenchError, ValueError):
    pass


@dataclass
class SimulatorAudit:
    run: str
    simulator: str
    tasks: str
    dialogues: int = 0
    replies: int = 0  # the simulated human's replies (its opening, the task's description, is not one)
    leaks: int = 0  # replies in which the simulator handed over the reference
    dialogues_leaking: int = 0
    reached_agent: int = 0  # leaking replies the agent was shown as written (a guard off, or flagging only)
    redacted: int = 0
    resampled: int = 0
    refusals: int = 0  # replies that decline or do not know (the guard's refusal included)
    empty: int = 0  # no reply at all: the simulator failed ("No response.") or wrote nothing
    off_role: int = 0  # replies out of the human's role (colbench.simulators.offrole), on what it wrote
    kinds: dict = field(default_factory=dict)  # leak kind -> replies
    off_role_kinds: dict = field(default_factory=dict)  # off-role kind -> replies
    # backend-lite, where every hidden fact is known (colbench.families.lite_truth): of its replies, how many
    # stated a fact the question did not ask for, and how many contradicted one
    lite_replies: int = 0
    over_release: int = 0
    wrong_statements: int = 0
    # --draws K: each stored reply's prefix answered K times more by the run's simulator
    draws: int = 0
    redrawn: int = 0  # prefixes answered again
    disagreeing: int = 0  # prefixes whose K draws and the stored reply are not all the same text
    distinct_replies: float | None = None  # mean distinct texts per prefix, the stored reply among them
    draw_errors: int = 0  # draws that got no reply (left out of the comparison)
    # dialogues with a prefix whose answers differ: the most whose outcome the simulator's draws can move. None of
    # them: the dialogues are a function of the policy's draws alone, and the simulator explains none of the
    # variance of its success.
    dialogues_disagreeing: int = 0
    redrawn_dialogues: int = 0

    def figures(self) -> dict:
        rate = lambda n, d: n / d if d else None  # noqa: E731
        return asdict(self) | {
            "leak_per_reply": rate(self.leaks, self.replies),
            "leak_per_dialogue": rate(self.dialogues_leaking, self.dialogues),
            "reached_agent_per_reply": rate(self.reached_agent, self.replies),
            "refusal_rate": rate(self.refusals, self.replies),
            "empty_rate": rate(self.empty, self.replies),
            "off_role_rate": rate(self.off_role, self.replies),
            "over_release_rate": rate(self.over_release, self.lite_replies),
            "wrong_statement_rate": rate(self.wrong_statements, self.lite_replies),
            "disagreement_rate": rate(self.disagreeing, self.redrawn),
            "dialogues_disagreeing_rate": rate(self.dialogues_disagreeing, self.redrawn_dialogues),
        }


def audit_runs(db, refs: list[str], draws: int = 0, draw_limit: int | None = None) -> list[SimulatorAudit]:
    """One audit per run of ``refs`` (rollout:<id>, a run's name, or train:<id> of online RL: its rollouts); with
    ``draws``, each reply's prefix (the first ``draw_limit`` of a run) answered that many times more."""
    return [audit for ref in refs for audit in _audits_of(db, ref, draws, draw_limit)]


def _audits_of(db, ref: str, draws: int = 0, draw_limit: int | None = None) -> list[SimulatorAudit]:
    from colbench.runs import resolve
    from colbench.store import queries
    from colbench.store.models import RolloutRun

    with db.read() as session:
        found = resolve(session, ref)
        if found.kind == "rollout":
            runs = [session.get(RolloutRun, found.id)]
        elif found.kind == "train":  # online RL's rollouts are tagged with their training run
            tag = f"online:{found.id}"
            runs = [run for run, _ in queries.rollout_runs(session, tag=tag)]
            if not runs:
                raise NothingToAudit(f"{ref}: that training run rolled nothing out (only online RL's runs do)")
        else:
            raise NothingToAudit(f"{ref} is an evaluation: audit the rollout runs it read (colbench runs show {ref})")
    return [_audit(db, run, ref if len(runs) == 1 else f"rollout:{run.id}", draws, draw_limit) for run in runs]


def _audit(db, run, label: str, draws: int = 0, draw_limit: int | None = None) -> SimulatorAudit:
    from colbench.families import family as family_named
    from colbench.families import lite_truth
    from colbench.store import queries
    from colbench.store.queries import TrajectoryFilter
    from colbench.tasks.lite import is_lite

    family = family_named(run.tasks.partition(":")[0])  # stored as FAMILY:SPLIT
    audit = SimulatorAudit(run=label, simulator=run.simulator, tasks=run.tasks)
    with db.read() as session:
        found = queries.find_trajectories(session, TrajectoryFilter(rollout_id=run.id, limit=None))
        turns = queries.turns_for(session, [t.id for t, _, _ in found])
    kinds: Counter = Counter()
    off_kinds: Counter = Counter()
    prefixes = []  # (trajectory id, task, the turns before a reply, what the simulator wrote)
    for trajectory, task, _ in found:
        leaked_here = False
        question = ""
        for turn in turns[trajectory.id]:
            if turn.role == "assistant":
                question = turn.content
                continue
            if turn.index == 0:  # the opening: the task's description, not a reply
                continue
            audit.replies += 1
            written = (turn.leak or {}).get("original") or (turn.raw if turn.raw is not None else turn.content)
            before = [t for t in turns[trajectory.id] if t.index < turn.index and t.role in ("user", "assistant")]
            prefixes.append((trajectory.id, task, before, written))
            if turn.error is not None or not written.strip() or turn.content == protocol.NO_RESPONSE:
                audit.empty += 1
                continue
            if REFUSAL in turn.content or _REFUSAL.search(turn.content):
                audit.refusals += 1
            if (off := off_role(written)) is not None:
                audit.off_role += 1
                off_kinds[off] += 1
            if is_lite(task):  # judged on what the simulator wrote, as leaks are
                audit.lite_replies += 1
                audit.over_release += bool(lite_truth.over_released(task, question, written))
                audit.wrong_statements += bool(lite_truth.contradicted_facts(task, written))
            leak = family.leak(task, question, written)
            if leak is None:
                continue
            audit.leaks += 1
            kinds[leak.kind] += 1
            leaked_here = True
            if family.leak(task, question, turn.content) is not None:
                audit.reached_agent += 1
            action = (turn.leak or {}).get("action")
            audit.redacted += action == "redacted"
            audit.resampled += action == "resampled"
        audit.dialogues += 1
        audit.dialogues_leaking += leaked_here
    if not audit.replies:
        raise NothingToAudit(f"{label} has no simulator replies to audit ({audit.dialogues} dialogues, none with a"
                             " human reply after the opening)")
    audit.kinds = dict(kinds.most_common())
    audit.off_role_kinds = dict(off_kinds.most_common())
    if draws:
        _redraw(db, run, family, audit, prefixes[:draw_limit] if draw_limit else prefixes, draws)
    return audit


def _redraw(db, run, family, audit: SimulatorAudit, prefixes: list, draws: int) -> None:
    """Each prefix answered ``draws`` times more by the run's own simulator (no guard: what it writes), through the
    family's environment as a rollout asks it: how often the answers to one prefix differ."""
    from colbench.tasks.rows import spec_of
    from colbench.wiring import build_env, build_simulator

    simulator = build_simulator(db, run.simulator, family=family.name, guard="off")
    env, close = build_env(db, family.name, workers=1, render_pool=1)
    try:
        distinct, moved = [], set()
        for trajectory_id, task, before, written in prefixes:
            episode = env.episode_class.resume(trajectory_id, spec_of(task), before)
            replies = simulator.reply(env.sim_requests([episode]) * draws)
            audit.draw_errors += sum(r.error is not None for r in replies)
            distinct.append(len({written.strip()} | {r.text.strip() for r in replies if r.error is None}))
            if distinct[-1] > 1:
                moved.add(trajectory_id)
        audit.draws, audit.redrawn = draws, len(distinct)
        audit.disagreeing = sum(n > 1 for n in distinct)
        audit.distinct_replies = sum(distinct) / len(distinct) if distinct else None
        audit.redrawn_dialogues = len({p[0] for p in prefixes})
        audit.dialogues_disagreeing = len(moved)
    finally:
        close()
        simulator.close()
