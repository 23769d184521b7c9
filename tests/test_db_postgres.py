"""The call log on a real PostgreSQL server (a temp cluster): migrate, write, outage, report."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
from db_fixtures import (  # noqa: F401 (fixtures)
    call_ended,
    call_started,
    check_turn_answered,
    check_turn_in_seconds,
    insert_ms_turn,
    insert_s_turn,
    pg_clean_url_fixture,
    pg_cluster_fixture,
    pg_url_fixture,
    timeline,
    turn_from_timeline,
)
from sqlalchemy import inspect, text

from db import reports
from db.migrate import current_revision, head_revision, make_engine, upgrade
from db.records import EventRecord, TurnRecord
from db.stages import STAGES
from db.writer import CallLogWriter, FaultInjected
from dialplan.options import DBOptions
from tests.waiting import wait_until

pytestmark = [pytest.mark.server, pytest.mark.needs("initdb")]  # a PostgreSQL cluster


def test_migrate_write_and_report(pg_clean_url, tmp_path):
    assert pg_clean_url.startswith("postgresql+psycopg://")
    assert upgrade(pg_clean_url) == head_revision()
    engine = make_engine(pg_clean_url)
    try:
        assert {"calls", "turns", "events"} <= set(inspect(engine).get_table_names())
        with engine.connect() as conn:
            kinds = dict(conn.execute(text(
                "SELECT column_name, data_type FROM information_schema.columns "
                "WHERE table_name = 'turns'")).all())
        assert kinds["voice_to_voice_s"] == "double precision"
        assert kinds["recorded_at"] == "timestamp with time zone"

        now = datetime.now(UTC)
        down = {"on": False}

        def fault():
            if down["on"]:
                raise FaultInjected("postgres down (test)")

        opts = DBOptions(url=pg_clean_url, spool_dir=str(tmp_path / "spool"))
        tls = [timeline(5000.25 + 7 * i, 0.5, 0.2 + 0.01 * i, 0.3, 0.1, 0.15, 0.02)
               for i in range(4)]
        with CallLogWriter(opts, retry_s=0.1, fault=fault) as writer:
            writer.put(call_started("pg-1", now - timedelta(minutes=5), profile="pg"))
            writer.put(turn_from_timeline("pg-1", 0, tls[0], asr_backend="faster-whisper",
                                          asr_rtf=0.2, at=now - timedelta(minutes=4)))
            assert writer.flush() and wait_until(lambda: writer.healthy)
            down["on"] = True  # the rest of the call happens while the server is "down"
            for i in (1, 2, 3):
                writer.put(turn_from_timeline("pg-1", i, tls[i], asr_backend="faster-whisper",
                                              asr_rtf=0.2, at=now - timedelta(minutes=4 - i)))
            # Unanswered turns through the spool; varchar(32) is enforced here, unlike SQLite,
            # so an over-long reason must be cut, not get the turn rejected.
            writer.put(TurnRecord("pg-1", 4, endpoint_s=0.5, unanswered="hangup",
                                  asr_backend="faster-whisper", at=now))
            writer.put(TurnRecord("pg-1", 5, unanswered="error: " + "x" * 80,
                                  asr_backend="faster-whisper", at=now))
            writer.put(EventRecord("pg-1", now - timedelta(minutes=1), "barge-in", "turn 2"))
            writer.put(call_ended("pg-1", now, turns=6))
            assert writer.flush() and not writer.healthy
            down["on"] = False
            assert wait_until(lambda: writer.healthy)
        assert writer.stats.replayed == 7 and not writer.spool.pending()
        assert writer.stats.rejected == 0

        report = reports.build_report(engine, timedelta(hours=1), "backend")
        assert report.totals.calls == 1 and report.totals.turns == 6
        cut = ("error: " + "x" * 80)[:32]
        assert (report.totals.unanswered, report.totals.unanswered_reasons) == (
            2, {cut: 1, "hangup": 1})
        (group,) = report.groups
        assert group.key == "faster-whisper" and group.turns == 6
        assert (group.unanswered, group.unanswered_rate) == (2, pytest.approx(2 / 6))
        assert group.stages["voice_to_voice"].n == 4
        assert group.stages["asr"].p50 == pytest.approx(0.215)
        tl = reports.call_timeline(engine, "pg-1")
        assert tl.call.end_reason == "caller-bye" and tl.call.started_at.tzinfo is not None
        assert [e.kind for e in tl.events] == ["barge-in"]
        assert [t.unanswered for t in tl.turns] == ["", "", "", "", "hangup", cut]
        for t, src in zip(tl.turns[:4], tls, strict=True):
            assert sum(t.stages[s] for s in STAGES) == pytest.approx(t.voice_to_voice_s,
                                                                     abs=1e-9)
            assert t.voice_to_voice_s == src.voice_to_voice_s
    finally:
        engine.dispose()


def test_writer_migrates_empty_postgres(pg_clean_url, tmp_path):
    opts = DBOptions(url=pg_clean_url, spool_dir=str(tmp_path / "spool"))
    with CallLogWriter(opts) as writer:
        writer.put(call_started("pg-2", datetime.now(UTC)))
        assert writer.flush() and wait_until(lambda: writer.healthy)
    engine = make_engine(pg_clean_url)
    assert current_revision(engine) == head_revision()
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM calls")).scalar_one() == 1
    engine.dispose()


def test_upgrade_converts_ms_rows_to_seconds(pg_clean_url):
    assert upgrade(pg_clean_url, "0001") == "0001"
    engine = make_engine(pg_clean_url)
    try:
        insert_ms_turn(engine)
        assert upgrade(engine, "0002") == "0002"
        check_turn_in_seconds(engine)
        assert upgrade(engine) == head_revision()
        check_turn_in_seconds(engine)
    finally:
        engine.dispose()


def test_upgrade_0003_existing_turns_read_as_answered(pg_clean_url):
    from alembic import command
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    from db.migrate import alembic_config
    from db.schema import Base

    assert upgrade(pg_clean_url, "0002") == "0002"
    engine = make_engine(pg_clean_url)
    try:
        insert_s_turn(engine)
        assert upgrade(engine) == head_revision()
        check_turn_answered(engine)
        with engine.connect() as conn:
            kind, length = conn.execute(text(
                "SELECT data_type, character_maximum_length FROM information_schema.columns "
                "WHERE table_name = 'turns' AND column_name = 'unanswered'")).one()
            ctx = MigrationContext.configure(conn, opts={"compare_type": True})
            assert compare_metadata(ctx, Base.metadata) == []
        assert (kind, length) == ("character varying", 32)
        command.downgrade(alembic_config(pg_clean_url), "0002")
        assert "unanswered" not in {c["name"] for c in inspect(engine).get_columns("turns")}
        with engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM turns")).scalar_one() == 3
    finally:
        engine.dispose()


def test_server_stopped_mid_call(pg_cluster, pg_clean_url, tmp_path):
    opts = DBOptions(url=pg_clean_url, spool_dir=str(tmp_path / "spool"))
    writer = CallLogWriter(opts, retry_s=0.2)
    try:
        writer.put(call_started("pg-3", datetime.now(UTC)))
        assert writer.flush() and wait_until(lambda: writer.healthy)
        pg_cluster.stop()
        try:
            worst = 0.0
            for i in range(10):
                t = time.perf_counter()
                writer.put(turn_from_timeline("pg-3", i, timeline(10.0 + i, *[0.1] * 6)))
                worst = max(worst, time.perf_counter() - t)
            writer.put(call_ended("pg-3", datetime.now(UTC), turns=10))
            assert worst < 0.05
            assert writer.flush() and wait_until(lambda: writer.spool.pending())
            assert not writer.healthy
        finally:
            pg_cluster.start()
        assert wait_until(lambda: writer.healthy), "writer did not recover after the restart"
    finally:
        writer.close()
    engine = make_engine(pg_clean_url)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM turns WHERE call_id = 'pg-3'")
                            ).scalar_one() == 10
        assert conn.execute(text("SELECT end_reason FROM calls")).scalar_one() == "caller-bye"
    engine.dispose()
