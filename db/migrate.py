"""Engines and schema migrations of the call log: Alembic run in code, no alembic.ini needed.

Owns :func:`make_engine` (SQLite pragmas, PostgreSQL timeouts), :func:`mask_url` (the one
way a database URL is shown to people), :func:`upgrade` (Alembic
``upgrade head`` with ``script_location`` set to this package's ``migrations`` folder, so it
works from any working directory and from an installed wheel), :func:`current_revision`, and
:func:`close_lost_calls` (calls a crash left open). Imports nothing from :mod:`agent`.
"""

from __future__ import annotations

import sqlite3
import time
from datetime import UTC, datetime
from pathlib import Path

from alembic import command
from alembic.config import Config as AlembicConfig
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine, event, func, insert, select, update
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.sql import ColumnElement

from db.records import LOST, PENDING
from db.schema import Call, Event, ToolCall, Turn

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
SQLITE_BUSY_TIMEOUT_MS = 5000
"""How long a SQLite writer waits for another process's lock before failing."""


def make_engine(url: str, **kwargs) -> Engine:
    """Create an engine for the call log with the per-backend settings it relies on.

    SQLite gets WAL mode (readers such as ``callagent report`` never block the writer) and a busy
    timeout, set on every new connection. PostgreSQL gets a short connect timeout, so a server
    that is down fails fast and the writer spools instead of hanging, and pre-ping, so a restart
    of the server does not hand out dead pooled connections.

    Args:
        url: Any SQLAlchemy URL, e.g. ``sqlite:///callagent.db`` or
            ``postgresql+psycopg://user@host/db``.
        **kwargs: Passed on to :func:`sqlalchemy.create_engine`.

    Returns:
        A new engine; the caller disposes of it.
    """
    backend = make_url(url).get_backend_name()
    if backend == "postgresql":
        kwargs.setdefault("pool_pre_ping", True)
        if make_url(url).get_driver_name() == "psycopg":
            kwargs.setdefault("connect_args", {"connect_timeout": 3})
    engine = create_engine(url, **kwargs)
    if backend == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def mask_url(url: str | URL | Engine) -> str:
    """A database URL fit for logs and messages: its password replaced by ``***``.

    Args:
        url: A URL string, a parsed URL, or an engine (its URL).

    Returns:
        The URL as text without the password; one that SQLAlchemy cannot parse loses
        everything before its ``@`` (where a password would be) instead.
    """
    if isinstance(url, Engine):
        url = url.url
    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):
        text = str(url)
        if "@" in text and "://" in text:
            scheme, rest = text.split("://", 1)
            return f"{scheme}://***@{rest.rsplit('@', 1)[1]}"
        return text


def _sqlite_pragmas(dbapi_connection, _record) -> None:
    cur = dbapi_connection.cursor()
    try:
        cur.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        _wal(cur)
        # WAL + NORMAL is durable across process crashes; only an OS crash can lose the last
        # commits, which the call log tolerates better than an fsync per turn.
        cur.execute("PRAGMA synchronous = NORMAL")
        cur.execute("PRAGMA foreign_keys = ON")
    finally:
        cur.close()


def _wal(cur) -> None:
    """Put the file in WAL mode, waiting out another connection that is doing the same.

    SQLite does not call the busy handler for a journal-mode change: two connections opening a
    new file at once (the writer and the summarizer of one server) make one of them fail with
    "database is locked" at once. WAL is a property of the file, so the loser waits for the
    winner and finds the mode already set.
    """
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            cur.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() >= deadline:
                raise
        time.sleep(0.01)


def alembic_config(url: str | None = None) -> AlembicConfig:
    """Build the Alembic configuration in code.

    Args:
        url: Database URL stored as ``sqlalchemy.url`` (used by the ``alembic`` command line
            when no connection is handed over).

    Returns:
        An Alembic config whose ``script_location`` is ``db/migrations``.
    """
    cfg = AlembicConfig()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url:
        # ConfigParser interpolation treats % specially (percent-encoded passwords).
        cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def upgrade(url: str | Engine, revision: str = "head") -> str | None:
    """Migrate the call-log database to ``revision`` (creating it from empty if need be).

    Args:
        url: Database URL, or an engine to reuse (the writer passes its own).
        revision: Target revision; ``head`` is the newest.

    Returns:
        The revision the database is at afterwards.
    """
    engine = make_engine(url) if isinstance(url, str) else url
    try:
        cfg = alembic_config(engine.url.render_as_string(hide_password=False))
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, revision)
        return current_revision(engine)
    finally:
        if isinstance(url, str):
            engine.dispose()


def head_revision() -> str | None:
    """The newest revision in ``db/migrations/versions``."""
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at, or None if it was never migrated.

    Args:
        engine: Engine of the call-log database.

    Returns:
        The revision id from ``alembic_version``.
    """
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def close_lost_calls(engine: Engine, detail: str = "", *owner: ColumnElement[bool]) -> int:
    """Close calls that have no ``ended_at``: a crash or kill left them open.

    They get ``end_reason = 'lost'`` and, as the end time, the last thing known about them (their
    latest turn or event, else their start), not "now", so call durations stay honest; their
    ``pending`` tool calls get outcome ``lost``. A later ``CallEnded`` or outcome for the same
    call (replayed from the spool, or from another agent process that shares this database)
    overwrites them.

    Args:
        engine: Engine of a migrated call-log database.
        detail: if given, recorded on each closed call as a ``lost`` event (e.g. the signal
            its worker process died of).
        owner: further conditions on the calls to close (one process's calls in a cluster).

    Returns:
        How many calls were closed.
    """
    last_turn = (
        select(func.max(Turn.recorded_at)).where(Turn.call_id == Call.id).scalar_subquery()
    )
    last_event = select(func.max(Event.at)).where(Event.call_id == Call.id).scalar_subquery()
    with engine.begin() as conn:
        rows = conn.execute(
            select(Call.id, Call.started_at, last_turn, last_event)
            .where(Call.ended_at.is_(None), *owner)
        ).all()
        for call_id, started_at, turn_at, event_at in rows:
            stamps = [_aware(s) for s in (started_at, turn_at, event_at) if s is not None]
            ended = max(stamps) if stamps else datetime.now(UTC)
            conn.execute(
                update(Call).where(Call.id == call_id, Call.ended_at.is_(None))
                .values(ended_at=ended, end_reason=LOST)
            )
            # An action it had started (a transfer waiting for its NOTIFY) ends with it.
            conn.execute(update(ToolCall).where(ToolCall.call_id == call_id,
                                                ToolCall.outcome == PENDING)
                         .values(outcome=LOST))
            if detail:
                conn.execute(insert(Event).values(call_id=call_id, at=datetime.now(UTC),
                                                  kind=LOST, detail=detail))
    return len(rows)


def _aware(value: datetime | str) -> datetime:
    # max() over a scalar subquery loses the column type on SQLite: the raw text comes back.
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
