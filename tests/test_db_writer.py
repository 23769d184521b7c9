"""The background writer against a real SQLite file: invariants, outages, spool replay."""

from __future__ import annotations

import json
import time
from dataclasses import fields
from datetime import timedelta

import pytest
from db_fixtures import (
    T0,
    call_ended,
    call_started,
    sqlite_url_fixture,  # noqa: F401 (fixtures)
    timeline,
    turn_from_timeline,
)
from sqlalchemy import func, select

from db.migrate import make_engine
from db.records import CallStarted, EventRecord, TurnRecord, from_json_dict
from db.schema import TURN_FIELDS, Call, Event, Turn
from db.stages import METRICS, STAGES, TIMING_COLUMNS, column
from db.writer import CallLogWriter, FaultInjected
from dialplan.options import DBOptions
from tests.waiting import wait_until

pytestmark = pytest.mark.unit
STAGE_COLS = [column(s) for s in STAGES]


def _turns(url: str) -> list[Turn]:
    engine = make_engine(url)
    from sqlalchemy.orm import Session

    with Session(engine) as s:
        rows = list(s.scalars(select(Turn).order_by(Turn.call_id, Turn.index)))
    engine.dispose()
    return rows


def _count(url: str, model) -> int:
    engine = make_engine(url)
    with engine.connect() as conn:
        n = conn.execute(select(func.count()).select_from(model)).scalar_one()
    engine.dispose()
    return n


def test_stage_sum_invariant_round_trip(sqlite_url, tmp_path):
    # Monotonic stamps of awkward magnitude, as time.monotonic() returns after days of uptime.
    stamps = [
        timeline(734512.318734, 0.5004, 0.1873, 0.2419, 0.0871, 0.1337, 0.0211),
        timeline(734520.000001, 0.9, 0.31, 0.050003, 0.4, 0.12, 0.02),
        timeline(734533.777, 0.0, 0.25, 1.5, 0.0, 0.3, 0.0),
    ]
    records = [turn_from_timeline("c1", i, tl, transcript=f"turn {i}", asr_backend="faster-whisper",
                                  asr_model="tiny.en", at=T0 + timedelta(seconds=10 * i))
               for i, tl in enumerate(stamps)]
    with CallLogWriter(DBOptions(url=sqlite_url, spool_dir=str(tmp_path / "spool"))) as writer:
        writer.put(call_started("c1"))
        for r in records:
            writer.put(r)
        writer.put(call_ended("c1", T0 + timedelta(minutes=1), turns=3))
        assert writer.flush()
    rows = _turns(sqlite_url)
    assert len(rows) == 3
    for row, rec, tl in zip(rows, records, stamps, strict=True):
        # Written and read back bit for bit ...
        assert [getattr(row, c) for c in STAGE_COLS] == [getattr(rec, c) for c in STAGE_COLS]
        assert row.voice_to_voice_s == rec.voice_to_voice_s
        # ... and the stages add up to voice-to-voice (up to float rounding of the differences).
        assert sum(getattr(row, c) for c in STAGE_COLS) == pytest.approx(
            row.voice_to_voice_s, abs=1e-9)
        assert row.voice_to_voice_s == pytest.approx(
            tl.first_frame_out_at - tl.speech_end_at, abs=1e-12)
        assert row.recorded_at == rec.at


def test_database_down_then_recovers(tmp_path):
    # The database file's directory does not exist yet: every connect fails, like a dead server.
    db_dir = tmp_path / "not-yet"
    url = f"sqlite:///{db_dir / 'calls.db'}"
    spool_dir = tmp_path / "spool"
    writer = CallLogWriter(DBOptions(url=url, spool_dir=str(spool_dir)), retry_s=0.2)
    try:
        worst = 0.0
        records = [call_started("c-down")]
        records += [turn_from_timeline("c-down", i, timeline(100.0 + i, *[0.1] * 6))
                    for i in range(20)]
        records += [EventRecord("c-down", T0, "barge-in", "turn 3"),
                    call_ended("c-down", T0 + timedelta(minutes=2), turns=20)]
        for r in records:
            t = time.perf_counter()
            writer.put(r)  # must neither block nor raise
            worst = max(worst, time.perf_counter() - t)
        assert worst < 0.05
        assert writer.flush()
        assert not writer.healthy
        lines = sum(len(p.read_text().splitlines()) for p in spool_dir.glob("*.jsonl"))
        assert lines == len(records)

        db_dir.mkdir()  # the database comes back
        assert wait_until(lambda: writer.healthy), "writer did not recover"
        assert not writer.spool.pending()
        assert writer.stats.replayed == len(records)
    finally:
        writer.close()
    assert [r.index for r in _turns(url)] == list(range(20))
    assert _count(url, Event) == 1
    assert list(spool_dir.glob("*.jsonl")) == []


def test_outage_mid_call_keeps_every_record(sqlite_url, tmp_path):
    down = {"on": False}

    def fault():
        if down["on"]:
            raise FaultInjected("database down (test)")

    opts = DBOptions(url=sqlite_url, spool_dir=str(tmp_path / "spool"), queue_size=2)
    with CallLogWriter(opts, retry_s=0.1, fault=fault) as writer:
        writer.put(call_started("c-mid"))
        assert writer.flush() and wait_until(lambda: writer.healthy)
        down["on"] = True
        # A burst into a tiny queue: some records overflow straight from put() to the spool.
        for i in range(50):
            writer.put(turn_from_timeline("c-mid", i, timeline(10.0 + i, *[0.05] * 6)))
        writer.put(call_ended("c-mid", T0 + timedelta(minutes=5), turns=50))
        assert writer.flush()
        assert writer.stats.spooled > 0
        down["on"] = False
        assert wait_until(lambda: writer.healthy)
    assert [r.index for r in _turns(sqlite_url)] == list(range(50))
    engine = make_engine(sqlite_url)
    with engine.connect() as conn:
        call = conn.execute(select(Call.end_reason, Call.turns, Call.profile)).one()
    engine.dispose()
    assert tuple(call) == ("caller-bye", 50, "default")


def test_turn_before_its_call_and_bad_record(sqlite_url, tmp_path):
    spool_dir = tmp_path / "spool"
    with CallLogWriter(DBOptions(url=sqlite_url, spool_dir=str(spool_dir))) as writer:
        # The turn arrives first (its CallStarted was delayed): a stub call keeps it.
        writer.put(turn_from_timeline("c-late", 0, timeline(5.0, *[0.1] * 6)))
        writer.put(call_started("c-late", profile="sales"))
        # started_at is NOT NULL: the database refuses this one; it must not block the others.
        writer.put(CallStarted(call_id="c-bad", started_at=None))  # type: ignore[arg-type]
        writer.put(EventRecord("c-late", T0, "dtmf", "1"))
        assert writer.flush()
    assert writer.stats.rejected == 1
    rejected = [json.loads(x) for x in (spool_dir / "rejected.jsonl").read_text().splitlines()]
    assert rejected[0]["data"]["call_id"] == "c-bad" and rejected[0]["error"]
    engine = make_engine(sqlite_url)
    with engine.connect() as conn:
        calls = conn.execute(select(Call.id, Call.profile, Call.started_at)).all()
    engine.dispose()
    assert calls == [("c-late", "sales", T0)]
    assert _count(sqlite_url, Turn) == 1 and _count(sqlite_url, Event) == 1


def test_spool_left_by_a_crash_is_replayed_at_start(sqlite_url, tmp_path):
    from db.records import to_json_dict

    spool_dir = tmp_path / "spool"
    spool_dir.mkdir()
    good = json.dumps(to_json_dict(call_started("c-crash")))
    # The previous process died mid-write: the last line is torn.
    (spool_dir / "current.jsonl").write_text(good + "\n" + good[:25])
    with CallLogWriter(DBOptions(url=sqlite_url, spool_dir=str(spool_dir))) as writer:
        assert wait_until(lambda: writer.healthy)
    assert writer.stats.replayed == 1 and _count(sqlite_url, Call) == 1
    assert (spool_dir / "rejected.jsonl").read_text() == good[:25] + "\n"
    assert sorted(p.name for p in spool_dir.iterdir()) == ["rejected.jsonl"]


def test_record_fields_are_the_turn_columns():
    # One list of stages (db.stages) names the record fields and the columns, all in seconds.
    assert set(TURN_FIELDS) == {f.name for f in fields(TurnRecord)} - {"at"}
    assert set(TIMING_COLUMNS) <= set(TURN_FIELDS)
    assert not [f for f in TURN_FIELDS if f.endswith("_ms")]
    assert set(timeline(1.0, *[0.1] * 6).record_fields()) == {column(m) for m in METRICS}


def test_spool_from_before_the_unit_change_is_replayed_in_seconds(sqlite_url, tmp_path):
    # An agent of revision 0001 spooled a turn in ms, then was upgraded while the DB was down.
    old_turn = {"type": "TurnRecord", "data": {
        "call_id": "c-old", "index": 0, "transcript": "hi", "endpoint_ms": 500.0,
        "asr_ms": 250.0, "llm_ttft_ms": None, "voice_to_voice_ms": 1250.0,
        "llm_total_ms": 900.0, "tts_total_ms": 300.0, "audio_in_s": 1.5,
        "at": T0.isoformat()}}
    rec = from_json_dict(old_turn)
    assert (rec.endpoint_s, rec.asr_s, rec.llm_ttft_s, rec.voice_to_voice_s) == (
        0.5, 0.25, None, 1.25)
    assert (rec.llm_total_s, rec.tts_total_s, rec.audio_in_s) == (0.9, 0.3, 1.5)
    spool_dir = tmp_path / "spool"
    spool_dir.mkdir()
    (spool_dir / "current.jsonl").write_text(json.dumps(old_turn) + "\n")
    with CallLogWriter(DBOptions(url=sqlite_url, spool_dir=str(spool_dir))) as writer:
        assert wait_until(lambda: writer.healthy)
    assert writer.stats.replayed == 1 and writer.stats.rejected == 0
    (row,) = _turns(sqlite_url)
    assert (row.call_id, row.endpoint_s, row.voice_to_voice_s) == ("c-old", 0.5, 1.25)


def test_unanswered_reason_is_written_and_spooled(sqlite_url, tmp_path):
    down = {"on": False}

    def fault():
        if down["on"]:
            raise FaultInjected("database down (test)")

    spool_dir = tmp_path / "spool"
    # An agent before the field spooled this turn: no "unanswered" key at all.
    old_turn = {"type": "TurnRecord", "data": {"call_id": "c-na", "index": 9,
                                               "transcript": "old", "at": T0.isoformat()}}
    spool_dir.mkdir()
    (spool_dir / "current.jsonl").write_text(json.dumps(old_turn) + "\n")
    with CallLogWriter(DBOptions(url=sqlite_url, spool_dir=str(spool_dir)), retry_s=0.1,
                       fault=fault) as writer:
        assert wait_until(lambda: writer.healthy) and writer.stats.replayed == 1
        writer.put(call_started("c-na"))
        writer.put(turn_from_timeline("c-na", 0, timeline(5.0, *[0.1] * 6)))
        writer.put(TurnRecord("c-na", 1, endpoint_s=0.2, unanswered="hangup"))
        assert writer.flush()
        down["on"] = True  # these go through the spool and come back
        writer.put(TurnRecord("c-na", 2, unanswered="no-words"))
        # Not what the agent should send, but neither may cost the turn its row.
        writer.put(TurnRecord("c-na", 3, unanswered=None))  # type: ignore[arg-type]
        writer.put(TurnRecord("c-na", 4, unanswered="error: " + "x" * 100))
        assert writer.flush() and not writer.healthy
        spooled = [json.loads(x)["data"] for x in (spool_dir / "current.jsonl").read_text()
                   .splitlines()]
        assert [d["unanswered"] for d in spooled] == ["no-words", None, "error: " + "x" * 100]
        down["on"] = False
        assert wait_until(lambda: writer.healthy)
    assert writer.stats.rejected == 0 and writer.stats.replayed == 4
    got = [(r.index, r.unanswered) for r in _turns(sqlite_url)]
    assert got == [(0, ""), (1, "hangup"), (2, "no-words"), (3, ""),
                   (4, ("error: " + "x" * 100)[:32]), (9, "")]


def test_tool_calls_messages_and_recordings_are_written_and_survive_the_spool(sqlite_url,
                                                                              tmp_path):
    from db.records import CallEnded, MessageRecord, ToolCallRecord, to_json_dict
    from db.schema import CallerMessage, ToolCall

    tool = ToolCallRecord("c-act", T0, "transfer", '{"target": "accounts"}', "llm", "sip-486",
                          "486 Busy Here", 1.25, 2)
    msg = MessageRecord("c-act", T0, "call me back", "sip:bob@x", "/m/c-act-1.wav", 3.5)
    end = CallEnded("c-act", T0 + timedelta(seconds=60), "transferred", 3, 0, "PCMU",
                    "/r/c-act.wav", 59.8)
    for rec in (tool, msg, end):  # what a spool written while the database was down holds
        assert from_json_dict(json.loads(json.dumps(to_json_dict(rec)))) == rec
    with CallLogWriter(DBOptions(url=sqlite_url, spool_dir=str(tmp_path / "s"))) as writer:
        for rec in (call_started("c-act"), tool, msg, end):
            writer.put(rec)
    engine = make_engine(sqlite_url)
    with engine.connect() as conn:
        row = conn.execute(select(ToolCall.name, ToolCall.outcome, ToolCall.latency_s,
                                  ToolCall.turn_index, ToolCall.source)).one()
        assert tuple(row) == ("transfer", "sip-486", 1.25, 2, "llm")
        assert conn.execute(select(CallerMessage.text, CallerMessage.duration_s)).one() == (
            "call me back", 3.5)
        call = conn.execute(select(Call.direction, Call.recording_path, Call.recording_s,
                                   Call.end_reason)).one()
        assert tuple(call) == ("inbound", "/r/c-act.wav", 59.8, "transferred")
    engine.dispose()
