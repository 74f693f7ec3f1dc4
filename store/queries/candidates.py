"""Critic scores, turn credits' values, and SWEET candidates and pairs."""
from __future__ import annotations

from typing import Sequence

from sqlalchemy import delete, insert
from sqlmodel import col, select, Session

from colbench.store.models import CreditValue, CriticScore, SweetCandidate, SweetPair, Turn
from colbench.store.queries._shared import chunks


def critic_scores_of(session: Session, trajectory_id: int) -> dict[int, list[tuple[int, float]]]:
    """turn_id → [(checkpoint_id, score)] for every scored turn of the trajectory."""
    rows = session.exec(
        select(CriticScore.turn_id, CriticScore.checkpoint_id, CriticScore.score)
        .join(Turn, Turn.id == CriticScore.turn_id)
        .where(Turn.trajectory_id == trajectory_id)
        .order_by(CriticScore.checkpoint_id)
    )
    scores: dict[int, list[tuple[int, float]]] = {}
    for turn_id, checkpoint_id, score in rows:
        scores.setdefault(turn_id, []).append((checkpoint_id, score))
    return scores


def replace_critic_scores(session: Session, checkpoint_id: int, rows: list[dict]) -> None:
    """Scores of turns by one critic checkpoint, replacing the ones those turns had from it."""
    turn_ids = [r["turn_id"] for r in rows]
    for chunk in chunks(turn_ids):
        session.connection().execute(delete(CriticScore).where(CriticScore.checkpoint_id == checkpoint_id,
                                                               col(CriticScore.turn_id).in_(chunk)))
    for chunk in chunks(rows):
        session.connection().execute(insert(CriticScore.__table__), chunk)


def credit_values(session: Session, key: str, turn_ids: Sequence[int]) -> dict[tuple[int, int], CreditValue]:
    """(turn id, candidate) → the value stored under a credit key, of those turns (candidate -1: the turn itself)."""
    found = {}
    for chunk in chunks(list(turn_ids)):
        query = select(CreditValue).where(CreditValue.credit_key == key, col(CreditValue.turn_id).in_(chunk))
        found |= {(row.turn_id, row.candidate): row for row in session.exec(query)}
    return found


def replace_credit_values(session: Session, key: str, turn_ids: Sequence[int], rows: list[dict]) -> None:
    """The values of these turns (and of candidates in their place) under a credit key: rows of credit_key, credit,
    turn_id, candidate, value, seconds, in place of any those turns had under that key."""
    for chunk in chunks(list(turn_ids)):
        session.connection().execute(delete(CreditValue).where(CreditValue.credit_key == key,
                                                               col(CreditValue.turn_id).in_(chunk)))
    for chunk in chunks(rows):
        session.connection().execute(insert(CreditValue.__table__), chunk)


def sweet_candidates(session: Session, key: str, turn_ids: Sequence[int]) -> dict[int, list[SweetCandidate]]:
    """turn id → its stored candidates under a sampling key, by index."""
    found: dict[int, list[SweetCandidate]] = {}
    for chunk in chunks(list(turn_ids)):
        query = (
            select(SweetCandidate)
            .where(SweetCandidate.sampling_key == key, col(SweetCandidate.turn_id).in_(chunk))
            .order_by(SweetCandidate.turn_id, SweetCandidate.index)
        )
        for row in session.exec(query):
            found.setdefault(row.turn_id, []).append(row)
    return found


def replace_sweet_candidates(session: Session, key: str, turn_ids: Sequence[int], rows: list[dict]) -> None:
    """The candidates of these turns under a key (a crashed run may have left some half-scored)."""
    for chunk in chunks(list(turn_ids)):
        session.connection().execute(delete(SweetCandidate).where(SweetCandidate.sampling_key == key,
                                                                  col(SweetCandidate.turn_id).in_(chunk)))
    for chunk in chunks(rows):
        session.connection().execute(insert(SweetCandidate.__table__), chunk)


def add_sweet_pairs(session: Session, rows: list[dict]) -> None:
    """A SWEET run's pairs; a continued run (snapshots.py) builds them again, and they replace its earlier ones."""
    runs = sorted({row["run_id"] for row in rows})
    session.connection().execute(delete(SweetPair.__table__).where(SweetPair.__table__.c.run_id.in_(runs)))
    for chunk in chunks(rows):
        session.connection().execute(insert(SweetPair.__table__), chunk)


def sweet_pairs_of(session: Session, run_id: int) -> list[tuple[SweetCandidate, SweetCandidate, Turn]]:
    """(chosen, rejected, the stored agent turn both continue the history of) of each pair a SWEET run trained on."""
    pairs = list(session.exec(select(SweetPair).where(SweetPair.run_id == run_id).order_by(SweetPair.id)))
    candidates: dict[int, SweetCandidate] = {}
    turns: dict[int, Turn] = {}
    for chunk in chunks([i for p in pairs for i in (p.chosen_id, p.rejected_id)]):
        candidates.update(
            (c.id, c) for c in session.exec(select(SweetCandidate).where(col(SweetCandidate.id).in_(chunk)))
        )
    for chunk in chunks(sorted({p.turn_id for p in pairs})):
        turns.update((t.id, t) for t in session.exec(select(Turn).where(col(Turn.id).in_(chunk))))
    return [(candidates[p.chosen_id], candidates[p.rejected_id], turns[p.turn_id]) for p in pairs]


def candidates_of_run(session: Session, run_id: int) -> dict[int, list[SweetCandidate]]:
    """turn id → the candidates a SWEET run sampled for that stored agent turn, by index."""
    found: dict[int, list[SweetCandidate]] = {}
    query = select(SweetCandidate).where(SweetCandidate.run_id == run_id).order_by(SweetCandidate.turn_id,
                                                                                    SweetCandidate.index)
    for row in session.exec(query):
        found.setdefault(row.turn_id, []).append(row)
    return found
