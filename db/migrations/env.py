"""Alembic environment of the call log, run from code by :func:`db.migrate.upgrade`.

Uses the connection handed over in ``config.attributes["connection"]`` when there is one (so
the caller's engine, pragmas and transaction are used), else ``sqlalchemy.url``.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import text

from db.schema import Base

config = context.config
target_metadata = Base.metadata
# An arbitrary constant: PostgreSQL advisory lock id held while migrating, so agent processes
# that start together do not race to create the same tables.
_PG_LOCK_ID = 0x63616C6C  # "call"


def _run(connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        # SQLite cannot ALTER most things in place; batch mode rebuilds tables instead.
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        if connection.dialect.name == "postgresql":
            connection.execute(text(f"SELECT pg_advisory_xact_lock({_PG_LOCK_ID})"))
        context.run_migrations()


def run_migrations_offline() -> None:
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=target_metadata,
        literal_binds=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    from db.migrate import make_engine

    engine = make_engine(config.get_main_option("sqlalchemy.url"))
    try:
        with engine.begin() as conn:
            _run(conn)
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
