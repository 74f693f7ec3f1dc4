"""Alembic environment: the schema is SQLModel.metadata from colbench.store.models.

colbench calls Alembic from code (colbench.store.migrate) and passes its own open
connection; `alembic` on the command line works too, with the URL from alembic.ini
or $COLBENCH_DB.
"""
from alembic import context
from sqlalchemy import engine_from_config, pool
from sqlmodel import SQLModel

import colbench.store.models  # noqa: F401  (registers the tables)
from colbench.store.db import database_url

config = context.config
target_metadata = SQLModel.metadata


def run_with(connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",  # SQLite cannot ALTER most things
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        run_with(connection)
        return
    url = config.get_main_option("sqlalchemy.url") or database_url()
    engine = engine_from_config({"sqlalchemy.url": url}, prefix="sqlalchemy.", poolclass=pool.NullPool)
    with engine.connect() as connection:
        run_with(connection)


def run_offline() -> None:
    context.configure(
        url=config.get_main_option("sqlalchemy.url") or database_url(),
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
