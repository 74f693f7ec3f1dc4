"""Schema versions: Alembic, driven from code so it works from any working directory.

A database is brought to the newest revision on first use. One that was written by a
newer colbench (a revision this install does not know) is refused rather than touched.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import text

from colbench.store.errors import StoreError, one_line

if TYPE_CHECKING:
    from colbench.store.db import Database

# Located, not imported: alembic runs the scripts there, and their env.py imports the store,
# so the store never imports the migrations (no cycle between the two packages).
MIGRATIONS_DIR = Path(importlib.util.find_spec("colbench.migrations").origin).parent
# An arbitrary constant: the PostgreSQL advisory lock that serialises upgrades.
_PG_UPGRADE_LOCK = 7337000


def alembic_config(db: Database) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", db.url.replace("%", "%%"))
    return config


def head_revision() -> str:
    return ScriptDirectory(str(MIGRATIONS_DIR)).get_current_head()


def current_revision(db: Database) -> str | None:
    with db.engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def is_known(revision: str) -> bool:
    try:
        return ScriptDirectory(str(MIGRATIONS_DIR)).get_revision(revision) is not None
    except Exception:
        return False


def upgrade(db: Database, revision: str = "head") -> str | None:
    """Upgrade under a write lock, so processes that open a fresh database at once upgrade it once."""
    config = alembic_config(db)
    try:
        with db._write_engine.connect() as connection:
            if db.is_sqlite:
                # Batch migrations rebuild tables (copy, drop, rename); with foreign keys
                # enforced, dropping a referenced table fails. The pragma only takes effect
                # outside a transaction, hence the driver connection; the check below makes
                # sure no reference was broken before the transaction commits.
                connection.connection.dbapi_connection.execute("PRAGMA foreign_keys = OFF")
            try:
                with connection.begin():
                    if not db.is_sqlite:
                        connection.execute(text(f"SELECT pg_advisory_xact_lock({_PG_UPGRADE_LOCK})"))
                    found = MigrationContext.configure(connection).get_current_revision()
                    _refuse_unknown(found, db)
                    config.attributes["connection"] = connection
                    command.upgrade(config, revision)
                    if db.is_sqlite and connection.exec_driver_sql("PRAGMA foreign_key_check").first():
                        raise StoreError(f"migrating {db.safe_url} would break foreign keys; nothing was changed")
                    return MigrationContext.configure(connection).get_current_revision()
            finally:
                if db.is_sqlite:
                    connection.connection.dbapi_connection.execute("PRAGMA foreign_keys = ON")
    except StoreError:
        raise
    except Exception as exc:
        raise StoreError(f"cannot migrate {db.safe_url}: {one_line(exc)}") from exc


def _refuse_unknown(found: str | None, db: Database) -> None:
    if found is not None and not is_known(found):
        raise StoreError(
            f"database {db.safe_url} is at revision {found}, newer than this colbench "
            f"knows (head {head_revision()}); upgrade colbench to use it"
        )


def ensure_current(db: Database) -> None:
    try:
        found = current_revision(db)
    except Exception as exc:
        raise StoreError(f"cannot open database {db.safe_url}: {one_line(exc)}") from exc
    if found == head_revision():
        return
    _refuse_unknown(found, db)
    if db.read_only:
        raise StoreError(
            f"{db.safe_url} is at revision {found}, older than this colbench's {head_revision()}, and read-only: it"
            " cannot be upgraded"
        )
    upgrade(db)
