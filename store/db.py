"""The database: where it is, how it is opened, and how writes are made safe.

One URL names it: `--db`, else `$COLBENCH_DB`, else a SQLite file in the working
directory. The same SQLModel code runs on SQLite and PostgreSQL.

SQLite is tuned for several processes sharing one file: WAL (readers never block the
writer), a long busy timeout, foreign keys on, and every write transaction opened
with BEGIN IMMEDIATE so that two writers queue at the start instead of deadlocking
half-way (a deferred transaction that later wants to write gets "database is
locked" without waiting).
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from sqlalchemy import event, text
from sqlalchemy.engine import Engine, make_url
from sqlmodel import Session, create_engine

from colbench.store.errors import StoreError, one_line

__all__ = ["Database", "StoreError", "database_url"]

DEFAULT_URL = "sqlite:///colbench.db"
SQLITE_BUSY_TIMEOUT_MS = 60_000


def database_url(explicit: str | None = None) -> str:
    return explicit or os.environ.get("COLBENCH_DB") or DEFAULT_URL


def _tune_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def on_connect(dbapi_connection, _record):
        # Hand transaction control to us (the "begin" hook below); pysqlite's own
        # implicit BEGIN is always deferred.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def on_begin(connection):
        write = connection.get_execution_options().get("colbench_write", False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


class Database:
    """An opened store. Use `write()` for transactions that change data, `read()` otherwise."""

    def __init__(self, url: str | None = None, *, migrate: bool = True):
        self.url = database_url(url)
        parsed = make_url(self.url)
        self.is_sqlite = parsed.get_backend_name() == "sqlite"
        if self.is_sqlite and parsed.database and parsed.database != ":memory:":
            folder = Path(parsed.database).expanduser().resolve().parent
            if not folder.is_dir():
                raise StoreError(f"database folder {folder} does not exist")
        connect_args = {"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000} if self.is_sqlite else {}
        try:
            self.engine = create_engine(self.url, connect_args=connect_args, pool_pre_ping=not self.is_sqlite)
        except Exception as exc:  # bad URL, missing driver
            raise StoreError(f"cannot open database {self.safe_url}: {one_line(exc)}") from exc
        if self.is_sqlite:
            _tune_sqlite(self.engine)
        self._write_engine = self.engine.execution_options(colbench_write=True)
        if migrate:
            from colbench.store.migrate import ensure_current

            ensure_current(self)

    @property
    def safe_url(self) -> str:
        return make_url(self.url).render_as_string(hide_password=True)

    @property
    def folder(self) -> Path:
        """Where files that belong to this database live (screenshots, checkpoints)."""
        parsed = make_url(self.url)
        if self.is_sqlite and parsed.database and parsed.database != ":memory:":
            return Path(parsed.database).expanduser().resolve().parent
        return Path.cwd()

    @contextmanager
    def write(self) -> Iterator[Session]:
        """A write transaction: committed on success, rolled back on any error."""
        with Session(self._write_engine, expire_on_commit=False) as session:
            with session.begin():
                yield session

    @contextmanager
    def read(self) -> Iterator[Session]:
        with Session(self.engine, expire_on_commit=False) as session:
            yield session

    def lock_for_sequence(self, session: Session) -> None:
        """Make concurrent writers that assign graded_seq take turns (PostgreSQL).

        SQLite's BEGIN IMMEDIATE already serialises every writer. On PostgreSQL two
        transactions could otherwise both read the same max and commit out of order,
        and a reader's watermark would step over the one that committed last.
        """
        if not self.is_sqlite:
            session.exec(text("SELECT pg_advisory_xact_lock(7337001)"))

    def close(self) -> None:
        self.engine.dispose()

