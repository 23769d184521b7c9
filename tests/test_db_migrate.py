"""Migrations from empty and of existing rows (ms -> s, unanswered), and closing lost calls."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from db_fixtures import (
    MS_COLUMNS,
    MS_ROW,
    T0,
    call_started,
    check_turn_answered,
    check_turn_in_seconds,
    insert_ms_turn,
    insert_s_turn,
    sqlite_url_fixture,  # noqa: F401 (fixtures)
)
from sqlalchemy import inspect, select, text

from db.migrate import (
    alembic_config,
    close_lost_calls,
    current_revision,
    head_revision,
    make_engine,
    mask_url,
    upgrade,
)
from db.records import EventRecord
from db.schema import Base, Call
from dialplan.options import DBOptions
from tests.waiting import wait_until

pytestmark = pytest.mark.unit


def test_upgrade_empty_sqlite_to_head(sqlite_url, tmp_path, monkeypatch):
    # No alembic.ini anywhere near: the config is built in code.
    monkeypatch.chdir(tmp_path)
    assert upgrade(sqlite_url) == head_revision() == "0010"
    engine = make_engine(sqlite_url)
    try:
        assert {"calls", "turns", "events", "alembic_version"} <= set(
            inspect(engine).get_table_names())
        assert current_revision(engine) == "0010"
        with engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 5000
            # The migrated tables match the models: no pending autogenerate diff.
            ctx = MigrationContext.configure(conn, opts={"compare_type": True})
            assert compare_metadata(ctx, Base.metadata) == []
        indexes = {i["name"] for i in inspect(engine).get_indexes("turns")}
        assert "ix_turns_call_id" in indexes
        assert "ix_calls_started_at" in {i["name"] for i in inspect(engine).get_indexes("calls")}
    finally:
        engine.dispose()
    # A second upgrade is a no-op.
    assert upgrade(sqlite_url) == "0010"


def test_db_upgrade_command(sqlite_url):
    from agent.cli import db as cmd_db

    parser = _parser(cmd_db)
    args = parser.parse_args(["db", "upgrade", "--db", sqlite_url])
    assert args.func(args) == 0
    engine = make_engine(sqlite_url)
    assert current_revision(engine) == head_revision()
    engine.dispose()


def test_writer_start_closes_lost_calls(sqlite_url, tmp_path):
    from db.writer import CallLogWriter

    upgrade(sqlite_url)
    engine = make_engine(sqlite_url)
    # A call with a late event and no end: what a killed agent leaves behind.
    from sqlalchemy.orm import Session

    from db.rows import apply

    with Session(engine) as s, s.begin():
        apply(s, call_started("c-lost"))
        apply(s, EventRecord("c-lost", T0 + timedelta(seconds=42), "dtmf", "5"))
    writer = CallLogWriter(DBOptions(url=sqlite_url, spool_dir=str(tmp_path / "spool")))
    try:
        assert writer.flush() and wait_until(lambda: writer.healthy)
        assert writer.stats.lost_closed == 1
    finally:
        writer.close()
    with engine.connect() as conn:
        row = conn.execute(select(Call.end_reason, Call.ended_at)).one()
    assert row.end_reason == "lost"
    assert row.ended_at == T0 + timedelta(seconds=42)  # last known activity, not "now"
    assert close_lost_calls(engine) == 0
    engine.dispose()


def test_upgrade_converts_ms_rows_to_seconds(sqlite_url):
    from alembic import command

    assert upgrade(sqlite_url, "0001") == "0001"
    engine = make_engine(sqlite_url)
    try:
        insert_ms_turn(engine)
        assert upgrade(engine, "0002") == "0002"
        check_turn_in_seconds(engine)
        assert upgrade(engine) == head_revision()
        check_turn_in_seconds(engine)
        with engine.connect() as conn:
            # The table was rebuilt on SQLite: its constraints and index came along.
            ctx = MigrationContext.configure(conn, opts={"compare_type": True})
            assert compare_metadata(ctx, Base.metadata) == []
        assert "ix_turns_call_id" in {i["name"] for i in inspect(engine).get_indexes("turns")}
        # And back through every revision: downgrade restores the ms columns and values.
        command.downgrade(alembic_config(sqlite_url), "0001")
        with engine.connect() as conn:
            row = conn.execute(text(f"SELECT {', '.join(MS_COLUMNS)} FROM turns")).one()
        assert tuple(row) == MS_ROW
    finally:
        engine.dispose()


def test_upgrade_0003_existing_turns_read_as_answered(sqlite_url):
    from alembic import command

    assert upgrade(sqlite_url, "0002") == "0002"
    engine = make_engine(sqlite_url)
    try:
        insert_s_turn(engine)
        assert upgrade(engine) == "0010"
        check_turn_answered(engine)
        with engine.connect() as conn:
            ctx = MigrationContext.configure(conn, opts={"compare_type": True})
            assert compare_metadata(ctx, Base.metadata) == []
        # Back to 0002: the column goes (SQLite rebuilds the table), the rows and index stay.
        command.downgrade(alembic_config(sqlite_url), "0002")
        assert "unanswered" not in {c["name"] for c in inspect(engine).get_columns("turns")}
        assert "ix_turns_call_id" in {i["name"] for i in inspect(engine).get_indexes("turns")}
        with engine.connect() as conn:
            assert conn.execute(text('SELECT count(*) FROM turns')).scalar_one() == 3
    finally:
        engine.dispose()


def test_mask_url_hides_passwords():
    assert mask_url("postgresql+psycopg://agent:s3cret@db.example/calls") == (
        "postgresql+psycopg://agent:***@db.example/calls")
    assert mask_url("sqlite:///callagent.db") == "sqlite:///callagent.db"
    assert "s3cret" not in mask_url(make_engine("postgresql+psycopg://a:s3cret@h/d"))
    assert mask_url("no scheme here://user:s3cret@host") == "no scheme here://***@host"


def _parser(module):
    import argparse

    parser = argparse.ArgumentParser(prog="callagent")
    module.add_parser(parser.add_subparsers(dest="command", required=True))
    return parser


def test_two_connections_opening_a_new_file_at_once_both_get_wal(tmp_path):
    """The writer and the summarizer open a new call log together: neither may fail.

    SQLite does not wait out a lock for a journal-mode change, so without the wait in
    ``make_engine`` one of the two failed with "database is locked" about one time in three.
    """
    failures: list[str] = []
    for i in range(40):
        url = f"sqlite:///{tmp_path}/log{i}.db"
        engines = [make_engine(url) for _ in range(2)]
        start = threading.Barrier(2)

        def open_(engine, start=start):
            start.wait()
            try:
                with engine.connect() as c:
                    c.execute(text("SELECT 1")).all()
            except Exception as err:  # noqa: BLE001 - collected and asserted below
                failures.append(str(err).splitlines()[0])

        threads = [threading.Thread(target=open_, args=(e,)) for e in engines]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        with engines[0].connect() as c:
            assert c.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        for e in engines:
            e.dispose()
    assert failures == []
