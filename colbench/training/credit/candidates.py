"""Same-state candidates without a SWEET run: the pairs that `credit eval`'s pair accuracy reads.

At every agent turn of the chosen stored backend-lite dialogues, K candidate turns are sampled at exactly the prompt
the policy was given there (``Turn.prompt``), from the policy that made the dialogue, and each is given its ground
truth in the stored turn's place (colbench.families.lite_truth.TurnOracle: a question 1 if the lite human's reply to
it states a new fact, else 0; an answer its share of tests passed). Two candidates of one state whose truth differs
are a pair. This is the set SWEET-RL's actor ranks, made once and kept in the store (``sweet_candidate``, under a
``candidates`` training run that makes no checkpoint) so that every credit is scored on the same pairs.

The run's identity is its config and the dialogues it covers: the same command again is the same run (done: nothing
to sample; stopped: it goes on from the last stored generate call).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass

from colbench.options import option

KIND = "candidates"


@dataclass
class CandidatesConfig:
    """How same-state candidates are sampled (the flags of `colbench credit sample`)."""

    candidates: int = option(4, "Candidate turns sampled per stored agent turn (K).", min=2)
    temperature: float = option(1.0, "Sampling temperature of the candidates.", min=0.0)
    max_new_tokens: int = option(256, "Tokens per candidate turn.", min=1)
    seed: int = option(2, "The sampling seed (a generate call's seed derives from it and its first turn's id).")
    engine: str = option("auto", "The engine that samples from each dialogue's own policy: auto, hf, ct2.")
    batch_size: int = option(16, "Sequences per generate call (candidates of several turns together).", min=1)
    sandbox: str = option("auto", "The sandbox that grades candidate answers (auto, bwrap, docker, none).")


@dataclass
class CandidatesResult:
    run_id: int
    dialogues: int
    states: int
    sampled: int  # states sampled by this call (the rest were stored already)
    pairs: int  # candidate pairs of one state whose truth differs
    question_pairs: int
    answer_pairs: int

    def as_dict(self) -> dict:
        return {"run": f"train:{self.run_id}"} | asdict(self)


def sample_candidates(db, config: CandidatesConfig, *, tasks: str = "backend-lite:val",
                      policies: list[str] | None = None, limit: int | None = None, name: str | None = None,
                      on_progress=None) -> CandidatesResult:
    """Sample (or find stored) the candidates of every agent turn of the graded lite dialogues of ``tasks``."""
    from colbench.store import queries
    from colbench.training.checkpoints import fail_run, heartbeat, reopen_run, start_run
    from colbench.training.credit.evaluate import graded_lite_dialogues
    from colbench.wiring import parse_task_selector

    family, _ = parse_task_selector(tasks)
    ids = sorted(graded_lite_dialogues(db, tasks, policies, limit))
    settings = asdict(config) | {"tasks": tasks, "policies": policies, "limit": limit,
                                 "dialogues": hashlib.sha256(json.dumps(ids).encode()).hexdigest()[:16]}
    with db.read() as session:
        trajectories = queries.trajectories_by_id(session, ids)
        done = queries.unfinished_run(session, KIND, settings, name=name, status="done")
        stopped = None if done else queries.unfinished_run(session, KIND, settings, name=name)
        turns = queries.turns_for(session, ids)
    by_policy: dict[str, list[int]] = {}
    for i in ids:
        by_policy.setdefault(trajectories[i].policy, []).append(i)
    sampled = 0
    if done is not None:
        run_id = done.id
    else:
        run_id = (reopen_run(db, stopped.id, settings) if stopped is not None else
                  start_run(db, kind=KIND, base_model=",".join(sorted(by_policy)), parent_checkpoint_id=None,
                            config=settings, name=name))
        try:
            with heartbeat(db, run_id):
                for policy, members in by_policy.items():
                    sampled += _sample_policy(db, config, run_id, family, policy, [(i, trajectories[i].task_id,
                                                                                    turns[i]) for i in members],
                                              on_progress)
        except BaseException as exc:  # Ctrl-C too: the run says why it stopped; its candidates so far stay
            fail_run(db, run_id, exc)
            raise
    with db.read() as session:
        stored = queries.candidates_of_run(session, run_id)
    numbers = {t.id: n for i in ids for n, t in enumerate((t for t in turns[i] if t.role == "assistant"), start=1)}
    result = counted(run_id, len(ids), stored, numbers, sampled)
    if done is None:
        with db.write() as session:
            queries.end_run(session, run_id, result.as_dict())
    return result


def sampling_key(run_id: int, policy: str) -> str:
    # One run's candidates are its own: another selection never replaces them (sweet_candidate's key is unique per
    # turn and index).
    return f"{KIND}:{run_id}:{hashlib.sha256(policy.encode()).hexdigest()[:16]}"


def _sample_policy(db, config: CandidatesConfig, run_id: int, family: str, policy: str, dialogues, on_progress) -> int:
    """Candidates for the agent turns of ``dialogues`` ((trajectory id, task id, turns)) that ``policy`` made and
    that have none stored yet; returns how many turns were sampled."""
    from colbench.training.sweet import OracleRanking, sample_into_store, stored_candidates

    engine = _policy_engine(db, config.engine, policy)
    try:
        jobs = list(_jobs(engine, family, dialogues))
        key = sampling_key(run_id, policy)
        have = stored_candidates(db, key, [j.turn_id for j in jobs])
        todo = [j for j in jobs if j.turn_id not in have]
        if not todo:
            return 0
        truth = OracleRanking(db, todo, family, config.sandbox)  # each candidate's stored score: its ground truth
        try:
            sample_into_store(db, todo, run_id, truth, key, _Sampler(engine), n=config.candidates,
                              temperature=config.temperature, max_new_tokens=config.max_new_tokens, seed=config.seed,
                              batch_size=config.batch_size, on_progress=on_progress)
        finally:
            truth.close()
    finally:
        engine.close()
    return len(todo)


def _policy_engine(db, kind: str, policy: str):
    """The engine that samples as ``policy`` did: its weights on ``kind``, or the scripted policy it names."""
    from colbench.engines import ENGINES
    from colbench.wiring import build_engine

    name = policy.split(":", 1)[0]
    if name in ENGINES and not ENGINES.get(name).local and not ENGINES.get(name).served:
        return build_engine(db, policy, policy)  # a scripted policy is its own engine
    return build_engine(db, kind, policy)


def _jobs(engine, family: str, dialogues):
    """A TurnJob per stored agent turn: its exact stored prompt for an engine that continues templated text, else
    (a scripted policy) the conversation it was shown, as JSON."""
    from colbench.engines.base import TokenizerEngine
    from colbench.training import sequences as S
    from colbench.training.sweet import TurnJob

    for trajectory_id, task_id, rows in dialogues:
        if isinstance(engine, TokenizerEngine):
            for turn, prompt in S.agent_prompts(engine.tokenizer, family, rows):
                yield TurnJob(turn.id, trajectory_id, task_id, "", prompt)
            continue
        for turn, shown in S.agent_conversations(family, rows):
            yield TurnJob(turn.id, trajectory_id, task_id, "", json.dumps(shown))


class _Sampler:
    """``generate_from_prompts`` over any engine: a templated prompt continued, a JSON conversation generated from."""

    def __init__(self, engine):
        self.engine = engine

    def generate_from_prompts(self, prompts: list[str], params):
        from colbench.engines.base import TokenizerEngine

        if isinstance(self.engine, TokenizerEngine):
            return self.engine.generate_from_prompts(prompts, params)
        return self.engine.generate([json.loads(p) for p in prompts], params)


def counted(run_id: int, dialogues: int, stored: dict, numbers: dict, sampled: int) -> CandidatesResult:
    """The run's figures: its states, and its pairs (all, between two questions, between two answers)."""
    from colbench.training.credit.base import is_answer

    pairs = questions = answers = 0
    for turn_id, rows in stored.items():
        for i, a in enumerate(rows):
            for b in rows[i + 1:]:
                if a.score is None or b.score is None or a.score == b.score:
                    continue
                pairs += 1
                kinds = {is_answer(c.content, numbers[turn_id]) for c in (a, b)}
                questions += kinds == {False}
                answers += kinds == {True}
    return CandidatesResult(run_id, dialogues, len(stored), sampled, pairs, questions, answers)
