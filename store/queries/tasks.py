"""Tasks: add, move and read the benchmark's tasks."""
from __future__ import annotations

from typing import Iterable, Sequence

from sqlalchemy import update
from sqlmodel import col, select, Session

from colbench.store.models import Task
from colbench.store.queries._shared import ROWS_PER_STATEMENT, chunks, insert_new


def existing_task_ids(session: Session, hashes: Iterable[str]) -> dict[str, int]:
    """content_hash → id for those of `hashes` already stored."""
    found: dict[str, int] = {}
    hashes = list(set(hashes))
    for start in range(0, len(hashes), ROWS_PER_STATEMENT):
        chunk = hashes[start : start + ROWS_PER_STATEMENT]
        rows = session.exec(select(Task.content_hash, Task.id).where(col(Task.content_hash).in_(chunk)))
        found.update({h: i for h, i in rows})
    return found


def add_tasks(session: Session, tasks: Sequence[dict]) -> tuple[dict[str, int], int]:
    """Insert task rows (column dicts) not stored yet. Returns (content_hash → id for all, number added)."""
    ids = existing_task_ids(session, (t["content_hash"] for t in tasks))
    new, seen = [], set(ids)
    for task in tasks:
        if task["content_hash"] not in seen:
            seen.add(task["content_hash"])
            new.append(task)
    insert_new(session, Task.__table__, new)
    ids.update(existing_task_ids(session, (t["content_hash"] for t in new)))  # no RETURNING: SQLite runs it row by row
    return ids, len(new)


def move_tasks(session: Session, content_hashes: Sequence[str], split: str) -> int:
    """Put the stored tasks with these content hashes in ``split``; returns how many moved."""
    moved = 0
    for chunk in chunks(list(content_hashes)):
        statement = update(Task).where(col(Task.content_hash).in_(chunk), Task.split != split).values(split=split)
        result = session.connection().execute(statement)
        moved += result.rowcount or 0
    return moved


def tasks_by_id(session: Session, ids: Iterable[int]) -> dict[int, Task]:
    found: dict[int, Task] = {}
    for chunk in chunks(sorted(set(ids))):
        found.update({t.id: t for t in session.exec(select(Task).where(col(Task.id).in_(chunk)))})
    return found


def tasks_in(session: Session, family: str | None = None, split: str | None = None) -> list[Task]:
    query = select(Task).order_by(Task.id)
    if family:
        query = query.where(Task.family == family)
    if split:
        query = query.where(Task.split == split)
    return list(session.exec(query))


def task_references(session: Session, task_ids: Sequence[int]) -> dict[int, tuple[str, str]]:
    """task id → (family, reference solution)."""
    found: dict[int, tuple[str, str]] = {}
    for chunk in chunks(list(task_ids)):
        query = select(Task.id, Task.family, Task.ground_truth).where(col(Task.id).in_(chunk))
        found.update({i: (family, truth) for i, family, truth in session.exec(query)})
    return found
