"""The database: where it is, how it is opened, and how writes are made safe.

One URL names it: `--db`, else `$COLBENCH_DB`, else a SQLite file in the working
directory. The same SQLModel code runs on SQLite and PostgreSQL.

Files that belong to a store (checkpoints, screenshots) live under its artefact root:
`--artifacts`, else `$COLBENCH_ARTIFACTS`, else the SQLite file's folder. A PostgreSQL
store has no folder of its own, so it needs one of the first two before it writes a file.

SQLite is tuned for several processes sharing one file: WAL (readers never block the
writer), a long busy timeout, foreign keys on, and every write transaction opened
with BEGIN IMMEDIATE so that two writers queue at the start instead of deadlocking
half-way (a deferred transaction that later wants to write gets "database is
locked" without waiting).
"""
from __future__ import annotations

import os
import random
import sqlite3
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from sqlalchemy import event, text
from sqlalchemy.engine import Engine, make_url
from sqlmodel import Session, create_engine

from colbench.store.errors import StoreError, one_line

__all__ = ["Database", "StoreError", "database_url"]

DEFAULT_URL = "sqlite:///colbench.db"
ARTIFACTS_ENV = "COLBENCH_ARTIFACTS"
SQLITE_BUSY_TIMEOUT_MS = 60_000


def database_url(explicit: str | None = None) -> str:
    """The store's SQLAlchemy URL; a plain file path (``runs.db``, ``~/x/colbench.db``) is a SQLite file."""
    url = explicit or os.environ.get("COLBENCH_DB") or DEFAULT_URL
    if "://" not in url:
        return f"sqlite:///{Path(url).expanduser().resolve()}"
    return url


def _write_ahead_log(cursor) -> None:
    """Put the file in WAL mode (it stays so). Two processes opening a new file at once both switch it, each holding
    a shared lock and wanting an exclusive one: SQLite answers one "database is locked" at once, without waiting
    (waiting could deadlock), so that one reads the mode again and tries again until the busy timeout."""
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            if cursor.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(random.uniform(0.005, 0.05))


def _tune_sqlite(engine: Engine, read_only: bool = False) -> None:
    @event.listens_for(engine, "connect")
    def on_connect(dbapi_connection, _record):
        # Hand transaction control to us (the "begin" hook below); pysqlite's own
        # implicit BEGIN is always deferred.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        if not read_only:
            _write_ahead_log(cursor)
            cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def on_begin(connection):
        write = connection.get_execution_options().get("colbench_write", False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def _read_only_url(path: Path) -> str | None:
    """A read-only SQLite URL for a store this process cannot write, else None.

    A WAL database is read through its -shm file, which SQLite creates beside it. In a
    folder we cannot write, with no -wal file left over (everything is in the main file),
    the file is opened immutable; with one, read-only through the files that exist.
    """
    if not path.exists() or (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)):
        return None
    wal, shm = Path(f"{path}-wal"), Path(f"{path}-shm")
    immutable = not os.access(path.parent, os.W_OK) and not (wal.exists() and wal.stat().st_size > 0)
    options = "mode=ro&immutable=1" if immutable else "mode=ro"
    if not immutable and not shm.exists():
        return None  # it cannot be read without a -shm file it cannot create: the open will say so
    return f"sqlite:///file:{path}?{options}&uri=true"


class Database:
    """An opened store. Use `write()` for transactions that change data, `read()` otherwise."""

    def __init__(self, url: str | None = None, *, migrate: bool = True, artifacts: str | Path | None = None):
        self.url = database_url(url)
        self._artifacts = artifacts or os.environ.get(ARTIFACTS_ENV) or None
        self._store_id: str | None = None
        parsed = make_url(self.url)
        self.is_sqlite = parsed.get_backend_name() == "sqlite"
        self.read_only = False
        engine_url: str = self.url
        if self.is_sqlite and parsed.database and parsed.database != ":memory:":
            path = Path(parsed.database).expanduser().resolve()
            if not path.parent.is_dir():
                raise StoreError(f"database folder {path.parent} does not exist")
            engine_url = _read_only_url(path) or self.url
            self.read_only = engine_url != self.url
        connect_args = {"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000} if self.is_sqlite else {}
        try:
            self.engine = create_engine(engine_url, connect_args=connect_args, pool_pre_ping=not self.is_sqlite)
        except Exception as exc:  # bad URL, missing driver
            raise StoreError(f"cannot open database {self.safe_url}: {one_line(exc)}") from exc
        if self.is_sqlite:
            _tune_sqlite(self.engine, self.read_only)
        self._write_engine = self.engine.execution_options(colbench_write=True)
        if migrate:
            from colbench.store.migrate import ensure_current

            ensure_current(self)

    @property
    def safe_url(self) -> str:
        return make_url(self.url).render_as_string(hide_password=True)

    @property
    def folder(self) -> Path:
        """The artefact root: where files that belong to this store live (screenshots, checkpoints)."""
        if self._artifacts:
            return Path(self._artifacts).expanduser().resolve()
        parsed = make_url(self.url)
        if self.is_sqlite and parsed.database and parsed.database != ":memory:":
            return Path(parsed.database).expanduser().resolve().parent
        raise StoreError(
            f"{self.safe_url} has no folder for its checkpoints and screenshots: "
            f"give one with --artifacts DIR or ${ARTIFACTS_ENV}"
        )

    @property
    def store_id(self) -> str:
        """The store's identity (its one ``store`` row), made when the store was created."""
        if self._store_id is None:
            from sqlmodel import select

            from colbench.store.models import Store

            with self.read() as session:
                found = session.exec(select(Store.id)).first()
            if found is None:
                raise StoreError(f"{self.safe_url} has no identity row; run `colbench db upgrade`")
            self._store_id = found
        return self._store_id

    @contextmanager
    def write(self) -> Iterator[Session]:
        """A write transaction: committed on success, rolled back on any error."""
        if self.read_only:
            raise StoreError(
                f"{self.safe_url} is read-only (its file or folder cannot be written): this command writes to it"
            )
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
