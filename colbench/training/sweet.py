"""The SWEET-RL actor's data: candidates for stored agent turns, their critic scores, and pairs.

For each selected agent turn of a stored, graded trajectory (``PolicyConfig.selection``:
the official first fraction of trajectories, one sample per task first, with all their
turns; or a hashed fraction of turns):

1. **Sample** N candidates for that turn from the current policy (the model being
   trained, before its first step), on exactly the prompt the policy was given at that
   turn (``Turn.prompt``), at temperature 1.0, batched through
   :class:`colbench.engines.hf.HFEngine` on the loaded model or, on a CPU, the ct2
   engine on the same weights (``PolicyConfig.sampler``). The sampler's own log-prob of
   each sampled token (raw distribution) comes with it.
2. **Score** each with the critic on the same dialogue: c + that very prompt
   (:meth:`CriticModel.context`), then the candidate's sampled ids, EOS included only if
   it stopped. By default the critic's mean log-prob given c minus the sampler's mean
   log-prob (``PolicyConfig.score``), both over the same tokens. When the critic's
   ``max_len`` cut the prompt's start, the sampler's log-probs are recomputed by the
   policy on the same cut prompt, so the two terms still read one dialogue.
3. **Pair**: ``pairs_per_turn`` distinct (chosen, rejected) pairs, each a random
   candidate of the top half by score against a random one of the bottom half (the
   middle one of an odd N is in neither). Pairs of identical candidates are skipped.

Candidates (with their scores) go to ``sweet_candidate`` as soon as a generate call
returns, under a ``sampling_key`` that names everything deciding them; a later run
with the same key (a rerun after a crash, or the same command again) reuses them
and samples only the turns still missing. Pairs go to ``sweet_pair`` per run.
"""
from __future__ import annotations

import hashlib
import json
import random
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Sequence

from colbench import protocol
from colbench.families import family as family_named
from colbench.store import queries
from colbench.training import trainer as P
from colbench.training import sequences as S
from colbench.training.samplers import AUTO as SAMPLER_AUTO, SAMPLERS, is_served, served_name

_ROWS = 500


@dataclass
class TurnJob:
    """A stored agent turn to sample candidates for."""

    turn_id: int
    trajectory_id: int
    task_id: int
    reference: str  # the task's reference solution: the critic's c
    prompt: str  # exactly what the policy was given before this turn


@dataclass(frozen=True)
class PairSource:
    trajectory_id: int
    turn_id: int
    chosen_id: int
    rejected_id: int


def selected(turn_id: int, fraction: float, seed: int) -> bool:
    """Whether a turn is in the sampled fraction: a seeded hash of its id, stable across runs."""
    if fraction >= 1:
        return True
    digest = hashlib.sha256(f"sweet:{seed}:{turn_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < fraction


def first_fraction(task_of: dict[int, int], fraction: float) -> list[int]:
    """The official selection in effect: the first ``fraction`` of the trajectories (at least one)
    in sample-round order, so it covers as many distinct tasks as the fraction allows.

    The official 15k file lists one sample of every task, then the next sample of every task,
    so its first 10% is one trajectory each of 1,500 distinct tasks. A store numbers
    trajectories task by task instead; taken by id, the same 10% of 100 tasks x 4 samples
    would be all 4 samples of only 10 tasks. So trajectories are ordered by their sample
    round (a task's first trajectory by id is round 0), then by task (in order of its first
    trajectory), then by id.
    """
    round_of: dict[int, int] = {}
    seen: dict[int, int] = {}  # task → trajectories of it met so far; keys in order of each task's first trajectory
    for trajectory_id in sorted(task_of):
        task = task_of[trajectory_id]
        round_of[trajectory_id] = seen[task] = seen.get(task, -1) + 1
    task_order = {task: index for index, task in enumerate(seen)}
    ordered = sorted(task_of, key=lambda i: (round_of[i], task_order[task_of[i]], i))
    return ordered[: max(1, int(len(ordered) * fraction))] if ordered else []


def answers(content: str | None, number: int) -> bool:
    """Whether the agent's ``number``-th turn (1-based) is its final answer (the protocol's last turn always is)."""
    return protocol.extract_answer(content or "", last_turn=number >= protocol.MAX_AGENT_TURNS) is not None


def select_turns(db, config: P.PolicyConfig, watermark: int | None, tokenizer) -> tuple[list[TurnJob], int | None, int]:
    """(jobs, new watermark, trajectories read): selected agent turns of graded trajectories above the watermark."""
    fresh, top = P.trained_data(db, config, watermark)
    task_of = {t.id: t.task_id for t in fresh}
    ids = sorted(first_fraction(task_of, config.fraction) if config.selection == "trajectories" else task_of)
    jobs: list[TurnJob] = []
    with db.read() as session:
        references = {
            i: truth for i, (_, truth) in queries.task_references(session, sorted({task_of[i] for i in ids})).items()
        }
        for start in range(0, len(ids), _ROWS):
            turns = queries.turns_for(session, ids[start : start + _ROWS])
            for trajectory_id, rows in turns.items():
                task_id = task_of[trajectory_id]
                for number, (turn, prompt) in enumerate(S.agent_prompts(tokenizer, config.family, rows), start=1):
                    if config.turns == "questions" and answers(turn.content, number):
                        continue
                    if config.selection == "trajectories" or selected(turn.id, config.fraction, config.seed):
                        jobs.append(TurnJob(turn.id, trajectory_id, task_id, references[task_id], prompt))
    jobs.sort(key=lambda j: j.turn_id)
    return jobs, top, len(fresh)


def sampler_kind(db, config: P.PolicyConfig, start: str, device, processes: int = 1) -> str:
    """hf, ct2, vllm or openai: the engine that samples candidates from the policy ``start`` (a model ref)."""
    if config.sampler != SAMPLER_AUTO:
        if SAMPLERS.get(config.sampler).one_process and processes > 1:
            raise ValueError(f"--sampler {config.sampler} runs in one process; under `colbench launch` serve the policy"
                             " with `vllm serve` and sample with --sampler openai --base-url URL (docs/scale.md)")
        return config.sampler
    from colbench.engines import default_engine
    from colbench.model_refs import checkpoint_lookup

    kind = getattr(device, "type", str(device).split(":")[0])  # cpu, not cpu:0 (as accelerate names it)
    return default_engine(start, kind, checkpoint_lookup=checkpoint_lookup(db))


def sampling_key(config: P.PolicyConfig, base_model: str, parent_id: int | None, critic_id: int | list[int] | None,
                 sampler: str = "hf",
                 served_model: str | None = None) -> str:
    """Names what decides a turn's candidates and scores: same key, same candidates. How the
    training runs (batch size, processes, sharding) is not part of it."""
    spec = {
        "base": base_model, "parent": parent_id, "critic": critic_id, "n": config.candidates,
        "temperature": config.temperature, "max_new_tokens": config.max_new_tokens, "seed": config.seed,
        "score": config.score, "full": config.full, "prompt": "stored",
    }
    if config.ranker != "critic":  # keys of critic-ranked stores stay as they were
        spec["ranker"] = config.ranker
    if sampler != "hf":  # the same distribution, other draws (keys of hf-sampled stores stay as they were)
        spec["sampler"] = sampler
    if served_model is not None:  # what the server was asked for
        spec["served_model"] = served_model
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:32]


def stored_candidates(db, key: str, turn_ids: Sequence[int]) -> dict:
    """turn id → its scored candidates under ``key``, by index (turns with a missing score are left out)."""
    with db.read() as session:
        found = queries.sweet_candidates(session, key, turn_ids)
    return {t: rows for t, rows in found.items() if rows and all(r.score is not None for r in rows)}


def pick_pairs(scores: Sequence[float], tokens: Sequence[Sequence[int]], k: int,
               rng: random.Random) -> list[tuple[int, int]]:
    """Up to k distinct (chosen, rejected) index pairs: top half by score vs bottom half.

    Ties in score keep the sampling order; the middle candidate of an odd count is in
    neither half; pairs of equal scores or identical token sequences are skipped.
    """
    order = sorted(range(len(scores)), key=lambda i: -scores[i])
    half = len(order) // 2
    top, bottom = order[:half], order[len(order) - half :]
    # A tie says nothing about which is better (the oracle's values tie often): no pair.
    options = [(c, r) for c in top for r in bottom if scores[c] > scores[r] and list(tokens[c]) != list(tokens[r])]
    return rng.sample(options, min(k, len(options)))


def ranking_score(score, sampler_logps: Sequence[float], mode: str) -> tuple[float, float]:
    """(the sampler's mean log-prob, the value that ranks a candidate) from its critic score
    and the sampler's per-token log-probs of the same tokens.

    'sampler' (the paper's): the critic's mean log-prob given c minus the sampler's, so the
    sampler plays the reference of A. 'critic': the critic's own advantage.
    """
    sampler = sum(sampler_logps) / max(len(sampler_logps), 1)
    return sampler, (score.critic_logp - sampler if mode == "sampler" else score.advantage)


def critic_list(critic_id: int | list[int]) -> list[int]:
    """A SWEET run's critic checkpoint ids: one critic, or an ensemble's."""
    return list(critic_id) if isinstance(critic_id, (list, tuple)) else [critic_id]


class CriticRanking:
    """The paper's ranking (``score`` 'sampler') or the critic's own advantage ('critic'): the
    critic reads c + the turn's prompt and scores each candidate on its sampled ids. An
    ensemble's every field is the mean of its critics' (each read with its own context cap);
    the row names the first critic."""

    def __init__(self, db, recipe, critic_id: int | list[int]):
        from colbench.training.scoring import CriticModel

        cfg = recipe.config
        self.recipe = recipe
        self.critics = [CriticModel.from_checkpoint(db, i, device=str(recipe.device), dtype=cfg.dtype,
                                                    batch_size=cfg.sample_batch_size)
                        for i in critic_list(critic_id)]

    def score(self, jobs: Sequence[TurnJob], generations) -> list[list[dict]]:
        """Per job, per candidate: the score's fields of its sweet_candidate row."""
        by_critic = [self._score_with(critic, jobs, generations) for critic in self.critics]
        fields = ("sampler_logp", "critic_logp", "reference_logp", "advantage", "score")
        return [
            [
                {k: sum(rows[c][k] for rows in per_job) / len(per_job) for k in fields}
                | {"critic_checkpoint_id": self.critics[0].checkpoint_id}
                for c in range(len(per_job[0]))
            ]
            for per_job in zip(*by_critic)
        ]

    def _score_with(self, critic, jobs: Sequence[TurnJob], generations) -> list[list[dict]]:
        from colbench.training.scoring import shared_prefix_logps

        recipe, cfg = self.recipe, self.recipe.config
        found = []
        for job, generation in zip(jobs, generations):
            token_lists = [s.token_ids for s in generation.samples]
            context = critic.context(job.prompt, job.reference)
            scored = critic.score_candidates(context.ids, token_lists, batch_size=cfg.sample_batch_size)
            sampler_logps = [s.token_logprobs for s in generation.samples]
            if context.truncated:  # the critic read a cut prompt: the sampler term reads the same one
                sampler_logps = [t.tolist() for t in shared_prefix_logps(
                    recipe.starting_policy(), nullcontext(), context.prompt_ids, token_lists, cfg.sample_batch_size,
                    recipe.tokenizer.pad_token_id
                )]
            rows = []
            for score, logps in zip(scored, sampler_logps):
                sampler, value = ranking_score(score, logps, cfg.score)
                rows.append({"sampler_logp": sampler, "critic_logp": score.critic_logp,
                             "reference_logp": score.reference_logp,
                             "advantage": score.advantage, "score": value})
            found.append(rows)
        return found

    def close(self) -> None:
        pass


class CreditRanking:
    """``ranker`` any registered turn credit but the critic (colbench/training/credit): each candidate's credit in the
    stored turn's place, read on the dialogue the candidate makes (the prefix, it, the built-in human's reply unless it
    answers)."""

    def __init__(self, db, recipe, jobs: Sequence[TurnJob], start: str):
        from colbench.training.credit import CreditConfig, make_credit, stored_dialogues

        cfg = recipe.config
        self.credit = make_credit(cfg.ranker, db, CreditConfig(model=start, seed=cfg.seed, device=str(recipe.device),
                                                               batch_size=cfg.sample_batch_size))
        self.dialogues = {d.trajectory_id: d for d in stored_dialogues(db, sorted({j.trajectory_id for j in jobs}))}

    def score(self, jobs: Sequence[TurnJob], generations) -> list[list[dict]]:
        from colbench.training.credit import State, candidate_values

        states = []
        for job, generation in zip(jobs, generations):
            dialogue = self.dialogues[job.trajectory_id]
            position = next(i for i, turn in enumerate(dialogue.agent_turns) if turn.id == job.turn_id)
            states.append(State(dialogue, position, [s.text for s in generation.samples]))
        # A candidate the credit gives no value (a turn it cannot read) ranks last.
        return [
            [{"sampler_logp": sum(s.token_logprobs) / max(len(s.token_logprobs), 1),
              "score": value if value is not None else -1e30}
             for s, value in zip(generation.samples, row)]
            for generation, row in zip(generations, candidate_values(self.credit, states))
        ]

    def close(self) -> None:
        self.credit.close()


class OracleRanking:
    """``score`` 'oracle', a control: candidates ranked by the family's ground truth for single turns (backend-lite's:
    a question that obtains a new fact 1, else 0; an answer its share of tests passed), no critic. Equal values make
    no pair (pick_pairs)."""

    def __init__(self, db, jobs: Sequence[TurnJob], family: str, sandbox: str = "auto"):
        self.truth = family_named(family).turn_oracle(db, {j.trajectory_id for j in jobs}, sandbox)

    def score(self, jobs: Sequence[TurnJob], generations) -> list[list[dict]]:
        values = self.truth.values([(job.trajectory_id, job.turn_id, [s.text for s in generation.samples])
                                    for job, generation in zip(jobs, generations)])
        return [
            [{"sampler_logp": sum(s.token_logprobs) / max(len(s.token_logprobs), 1), "score": value}
             for s, value in zip(generation.samples, row)]
            for generation, row in zip(generations, values)
        ]

    def close(self) -> None:
        self.truth.close()


def sample_and_score(db, recipe, jobs: Sequence[TurnJob], run_id: int, ranking, key: str, engine, have: dict,
                     on_progress=None) -> dict:
    """Sample (with ``engine``) and score (with ``ranking``) candidates for the jobs without stored
    ones (``have``); store them.

    Every process must be given the same ``have``: each takes every n-th job of the same to-do
    list, so a process that read the store after another had written would skip some jobs
    and sample others twice."""
    cfg = recipe.config
    todo = [j for j in jobs if j.turn_id not in have]
    acc = recipe.accelerator
    mine = todo[acc.process_index :: acc.num_processes]
    stats = {"turns_reused": len(jobs) - len(todo), "turns_sampled": len(todo),
             "candidates_sampled": len(todo) * cfg.candidates}
    sample_into_store(db, mine, run_id, ranking, key, engine, n=cfg.candidates, temperature=cfg.temperature,
                      max_new_tokens=cfg.max_new_tokens, seed=cfg.seed, batch_size=cfg.sample_batch_size,
                      on_progress=on_progress if acc.is_main_process else None)
    return stats


def sample_into_store(db, jobs: Sequence[TurnJob], run_id: int, ranking, key: str, engine, *, n: int,
                      temperature: float, max_new_tokens: int, seed: int, batch_size: int, on_progress=None) -> None:
    """``n`` candidates per job at its stored prompt, scored by ``ranking``, stored under ``key`` a generate call at
    a time (one transaction each, so a stopped run keeps what it sampled). A call's seed derives from its first
    turn's id: the same jobs draw the same candidates however the work was split."""
    import torch

    from colbench.engines.base import SamplingParams

    per_call = max(1, batch_size // n)
    done = 0
    with torch.no_grad():
        for start in range(0, len(jobs), per_call):
            chunk = jobs[start : start + per_call]
            params = SamplingParams(temperature=temperature, max_new_tokens=max_new_tokens, n=n,
                                    seed=seed * 1_000_003 + chunk[0].turn_id)
            generations = engine.generate_from_prompts([j.prompt for j in chunk], params)
            rows = []
            for job, generation, scores in zip(chunk, generations, ranking.score(chunk, generations)):
                for index, (sample, fields) in enumerate(zip(generation.samples, scores)):
                    rows.append({
                        "run_id": run_id, "sampling_key": key, "turn_id": job.turn_id, "index": index,
                        "content": sample.text, "token_ids": list(sample.token_ids),
                        "finish_reason": sample.finish_reason,
                    } | fields)
            with db.write() as session:
                queries.replace_sweet_candidates(session, key, [j.turn_id for j in chunk], rows)
            done += len(chunk)
            if on_progress:
                on_progress("sample", done, len(jobs), {})


def build_items(db, recipe, jobs: Sequence[TurnJob], run_id: int, critic_id: int | list[int] | None, base_model: str,
                parent_id: int | None, on_progress=None):
    """Candidates (sampled or reused), pairs (stored for this run), and the DPO items to train on.
    ``critic_id`` ranks them: a critic, an ensemble's list, or None (--score oracle)."""
    cfg = recipe.config
    start = f"ckpt:{parent_id}" if parent_id is not None else base_model  # the policy as training starts
    sampler = sampler_kind(db, cfg, start, recipe.device, recipe.accelerator.num_processes)
    served = served_name(cfg) if is_served(sampler) else None
    key = sampling_key(cfg, base_model, parent_id, critic_id, sampler, served)
    have = stored_candidates(db, key, [j.turn_id for j in jobs])
    recipe.accelerator.wait_for_everyone()  # every process has read the same store before any of them writes to it
    stats = {"turns_reused": len(jobs), "turns_sampled": 0, "candidates_sampled": 0}
    if len(have) < len(jobs):
        ranking = (CreditRanking(db, recipe, jobs, start) if cfg.ranker != "critic"
                   else OracleRanking(db, jobs, cfg.family) if cfg.score == "oracle"
                   else CriticRanking(db, recipe, critic_id))
        engine = SAMPLERS.get(sampler).factory(db, recipe, start)
        try:
            stats = sample_and_score(db, recipe, jobs, run_id, ranking, key, engine, have, on_progress)
        finally:
            ranking.close()
            if not SAMPLERS.get(sampler).trained_model:  # the model being trained stays
                engine.close()
            recipe.release_starting_policy()  # a sharded run's unsharded copy, if one was loaded
        del ranking, engine
    stats["sampler"] = sampler
    recipe.accelerator.wait_for_everyone()
    have = stored_candidates(db, key, [j.turn_id for j in jobs])

    items: list[P.PairItem] = []
    pair_rows = []
    for job in jobs:
        cands = have.get(job.turn_id)
        if not cands:
            continue
        rng = random.Random(f"{cfg.seed}:{job.turn_id}")
        chosen_rejected = pick_pairs([c.score for c in cands], [c.token_ids for c in cands], cfg.pairs_per_turn, rng)
        if not chosen_rejected:
            continue
        prompt = S.encode_text(recipe.tokenizer, job.prompt)
        for c, r in chosen_rejected:
            chosen, rejected = cands[c], cands[r]
            source = PairSource(job.trajectory_id, job.turn_id, chosen.id, rejected.id)
            items.append(P.PairItem(
                [S.turn_row([], prompt, chosen.token_ids, cfg.max_len)],
                [S.turn_row([], prompt, rejected.token_ids, cfg.max_len)],
                source=source,
            ))
            pair_rows.append({"run_id": run_id, "turn_id": job.turn_id, "chosen_id": chosen.id,
                              "rejected_id": rejected.id})
    if pair_rows and recipe.accelerator.is_main_process:
        with db.write() as session:
            queries.add_sweet_pairs(session, pair_rows)
    gaps = [
        max(c.score for c in have[j.turn_id]) - min(c.score for c in have[j.turn_id]) for j in jobs if j.turn_id in have
    ]
    stats |= {
        "sampling_key": key,
        "turns_with_pairs": len({it.source.turn_id for it in items}),
        "score_spread": sum(gaps) / len(gaps) if gaps else None,
    }
    if recipe.accelerator.is_main_process:  # the pairs are in the store
        stats |= family_named(recipe.config.family).pair_preferences(db, run_id)
    return items, stats


# ---------------------------------------------------------------- the recipe


def fit(db, config: P.PolicyConfig | None = None, *, critic_checkpoint=None, **run) -> P.PolicyResult:
    """Train a policy with SWEET-RL's turn-level DPO, its candidates ranked by ``critic_checkpoint``
    ("ckpt:<id>", or several comma-separated: an ensemble whose scores are averaged; see
    trainer.train_policy for ``run``'s options)."""
    from colbench.model_refs import get_checkpoint

    config = config or P.PolicyConfig()
    critic_id = None
    if config.ranker != "critic":
        from colbench.training.credit import check_credit

        check_credit(config.ranker)  # before a model is loaded: an unknown name is one line
        if critic_checkpoint is not None:
            raise ValueError(f"--ranker {config.ranker} ranks candidates without the critic: it takes no --critic")
    elif config.score == "oracle":
        if critic_checkpoint is not None:
            raise ValueError("--score oracle ranks candidates by ground truth: it takes no --critic")
    elif critic_checkpoint is None:
        raise ValueError("sweet needs a critic: pass --critic ckpt:<id> (or --score oracle on backend-lite)")
    else:
        ids = []
        for ref in str(critic_checkpoint).split(","):
            critic_row, critic_run = get_checkpoint(db, ref.strip())
            if critic_run.kind != "critic":
                raise ValueError(f"ckpt:{critic_row.id} is a {critic_run.kind} checkpoint, not a critic")
            ids.append(critic_row.id)
        critic_id = ids[0] if len(ids) == 1 else ids

    def gather(db, config, watermark, tokenizer) -> P.Gathered:
        jobs, top, read = select_turns(db, config, watermark, tokenizer)
        if not jobs:
            raise P.nothing_to_train(config, watermark, f"no agent turns selected among {read} trajectories")
        return P.Gathered(jobs, {"new_trajectories": read, "selected_turns": len(jobs)}, top)

    def build(db, trainer, gathered, run_id):
        parent_id = trainer.parent[0].id if trainer.parent else None
        items, info = build_items(
            db, trainer, gathered.data, run_id, critic_id, trainer.base_model, parent_id, trainer.on_progress
        )
        if not items:
            raise P.NothingToTrain("sweet: no pairs (every turn's candidates were identical or too few)")
        return items, info, sorted({(it.source.trajectory_id, it.source.turn_id) for it in items})

    return P.train_policy(db, config, "sweet", gather=gather, build=build, critic=critic_id, **run)
