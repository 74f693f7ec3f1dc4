"""What every query module uses: statement-sized chunks, inserts that skip stored rows, the policy filter."""
from __future__ import annotations

from typing import Sequence

from sqlalchemy import or_, true
from sqlmodel import col, Session

from colbench.store.models import Trajectory


# SQLite allows 32,766 bound parameters per statement; stay well under it.
ROWS_PER_STATEMENT = 500


def insert_new(session: Session, table, rows: Sequence[dict]) -> None:
    """Insert rows, skipping any that a unique constraint says are stored already.

    Several workers may insert the same rows at once (the built-in tasks on a fresh
    store, a rollout's pending slots): checking first and inserting after races on
    PostgreSQL, whose transactions do not queue like SQLite's BEGIN IMMEDIATE ones.
    """
    if not rows:
        return
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as dialect_insert
    elif dialect == "sqlite":
        from sqlalchemy.dialects.sqlite import insert as dialect_insert
    else:
        raise NotImplementedError(f"colbench stores run on SQLite or PostgreSQL, not {dialect}")
    statement = dialect_insert(table).on_conflict_do_nothing()
    for start in range(0, len(rows), ROWS_PER_STATEMENT):
        session.connection().execute(statement, list(rows[start : start + ROWS_PER_STATEMENT]))


def of_policies(policies: Sequence[str] | None):
    """A condition on Trajectory.policy: any of ``policies``, where a trailing * matches a
    prefix ("scripted:*"); None or empty: every policy."""
    if not policies:
        return true()
    exact = [p for p in policies if not p.endswith("*")]
    prefixes = [p[:-1] for p in policies if p.endswith("*")]
    escaped = [p.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") for p in prefixes]
    return or_(col(Trajectory.policy).in_(exact), *(col(Trajectory.policy).like(p + "%", escape="\\") for p in escaped))


def chunks(items: list, size: int = ROWS_PER_STATEMENT):
    for start in range(0, len(items), size):
        yield items[start : start + size]
