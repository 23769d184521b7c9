"""Shared fixtures and builders for the call-log tests (db/, report): import them from tests.

Fixture functions end in ``_fixture`` and register under the short name (``sqlite_url``...), so
a test module imports ``sqlite_url_fixture`` and asks for ``sqlite_url`` without shadowing.

``pg_url`` starts a throwaway PostgreSQL cluster owned by the ``postgres`` user (the server
refuses to run as root), listening only on a Unix socket in a temp dir, and removes it at the
end of the session. Nothing here fakes the database.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import inspect, select, text
from sqlalchemy.orm import Session

from agent.turn.timeline import TurnTimeline
from db.migrate import make_engine
from db.records import (
    CallEnded,
    CallStarted,
    EventRecord,
    MessageRecord,
    ToolCallRecord,
    TurnRecord,
)
from db.schema import WebhookDelivery
from db.stages import STAGES, STAMPS
from tests.needs import find, require

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def turn_from_timeline(call_id: str, index: int, tl: TurnTimeline, **extra) -> TurnRecord:
    """Build a TurnRecord the way the session does: stage seconds straight from the timeline."""
    return TurnRecord(call_id=call_id, index=index, **tl.record_fields(), **extra)


def timeline(start: float, *stage_s: float) -> TurnTimeline:
    """A timeline whose speech ends at ``start`` and whose stages last ``stage_s`` seconds."""
    assert len(stage_s) == len(STAGES)
    stamps = [start]
    for d in stage_s:
        stamps.append(stamps[-1] + d)
    return TurnTimeline(speech_start_at=start - 1.2, **dict(zip(STAMPS, stamps, strict=True)))


# Revision 0001 stored turn durations in ms; 0002 renames the columns to *_s and divides.
MS_COLUMNS = ("endpoint_ms", "asr_ms", "llm_ttft_ms", "first_chunk_ms", "tts_first_audio_ms",
              "playout_ms", "voice_to_voice_ms", "llm_total_ms", "tts_total_ms")
MS_ROW = (500.0, 250.0, 330.0, 120.0, 700.0, 20.0, 1920.0, 900.0, None)


def insert_ms_turn(engine) -> None:
    """One call and one turn as an agent of revision 0001 wrote them (plain SQL: no models)."""
    with engine.begin() as conn:
        conn.execute(text(
            "INSERT INTO calls (id, started_at, caller_uri, called_extension, profile, "
            "asr_backend, asr_model, llm_model, tts_voice, end_reason, codec, source, turns, "
            "barge_ins) VALUES ('c-ms', :at, '', '100', 'default', 'faster-whisper', "
            "'tiny.en', '', '', 'caller-bye', 'PCMU', 'sip', 1, 0)"), {"at": T0})
        cols = ", ".join(MS_COLUMNS)
        marks = ", ".join(f":v{i}" for i in range(len(MS_COLUMNS)))
        conn.execute(text(
            f'INSERT INTO turns (call_id, "index", speech_end_s, transcript, reply_text, '
            f"{cols}, llm_tokens, asr_backend, asr_model, barge_in) VALUES ('c-ms', 0, 4.5, "
            f"'hello', 'hi there', {marks}, 12, 'faster-whisper', 'tiny.en', false)"),
            {f"v{i}": v for i, v in enumerate(MS_ROW)})


def check_turn_in_seconds(engine) -> None:
    """The row of :func:`insert_ms_turn` after 0002: same turn, durations in seconds.

    Plain SQL, not the ORM model: this holds at 0002 itself, before later revisions add columns.
    """
    s_columns = [c.removesuffix("_ms") + "_s" for c in MS_COLUMNS]
    with engine.connect() as conn:
        (turn,) = conn.execute(text(
            f'SELECT call_id, "index", speech_end_s, transcript, llm_tokens, barge_in, '
            f"{', '.join(s_columns)} FROM turns")).mappings().all()
    assert [turn[c] for c in s_columns] == [None if v is None else v / 1000 for v in MS_ROW]
    assert (turn["voice_to_voice_s"], turn["tts_total_s"]) == (1.92, None)
    assert (turn["call_id"], turn["index"], turn["speech_end_s"], turn["transcript"],
            turn["llm_tokens"], bool(turn["barge_in"])) == ("c-ms", 0, 4.5, "hello", 12, False)
    names = {c["name"] for c in inspect(engine).get_columns("turns")}
    assert not names & set(MS_COLUMNS)


def insert_s_turn(engine) -> None:
    """One call and one turn as an agent of revision 0002 wrote them: no ``unanswered`` yet."""
    with engine.begin() as conn:
        conn.execute(text(
            "INSERT INTO calls (id, started_at, caller_uri, called_extension, profile, "
            "asr_backend, asr_model, llm_model, tts_voice, end_reason, codec, source, turns, "
            "barge_ins) VALUES ('c-s', :at, '', '100', 'default', 'faster-whisper', "
            "'tiny.en', '', '', 'caller-bye', 'PCMU', 'sip', 1, 0)"), {"at": T0})
        conn.execute(text(
            'INSERT INTO turns (call_id, "index", transcript, reply_text, voice_to_voice_s, '
            "asr_backend, asr_model, barge_in) VALUES ('c-s', 0, 'hello', 'hi there', 1.25, "
            "'faster-whisper', 'tiny.en', false)"))


def check_turn_answered(engine) -> None:
    """After 0003 the row of :func:`insert_s_turn` reads as answered, and reasons can be stored.

    Plain SQL, not the ORM: a new row that names no ``unanswered`` must get the server default
    too (another agent process still on 0002 can share the database for a while).
    """
    with engine.begin() as conn:
        assert conn.execute(text(
            'SELECT call_id, "index", voice_to_voice_s, unanswered FROM turns')).all() == [
            ("c-s", 0, 1.25, "")]
        conn.execute(text(
            'INSERT INTO turns (call_id, "index", transcript, reply_text, asr_backend, '
            "asr_model, barge_in) VALUES ('c-s', 1, '', '', '', '', false)"))
        conn.execute(text(
            'INSERT INTO turns (call_id, "index", transcript, reply_text, asr_backend, '
            "asr_model, barge_in, unanswered) VALUES ('c-s', 2, '', '', '', '', false, "
            "'hangup')"))
        got = conn.execute(text('SELECT "index", unanswered FROM turns ORDER BY "index"')).all()
    assert [tuple(r) for r in got] == [(0, ""), (1, ""), (2, "hangup")]
    column = next(c for c in inspect(engine).get_columns("turns") if c["name"] == "unanswered")
    assert column["nullable"] is False


def call_started(call_id: str, at: datetime = T0, **kw) -> CallStarted:
    kw.setdefault("profile", "default")
    kw.setdefault("asr_backend", "faster-whisper")
    kw.setdefault("asr_model", "tiny.en")
    return CallStarted(call_id=call_id, started_at=at, answered_at=at + timedelta(seconds=1),
                       caller_uri=f"sip:{call_id}@test", called_extension="100",
                       llm_model="smollm2-135m", tts_voice="af_heart", codec="PCMU",
                       source="simulate", **kw)


def call_ended(call_id: str, at: datetime, turns: int) -> CallEnded:
    return CallEnded(call_id=call_id, ended_at=at, end_reason="caller-bye", turns=turns)


def call_records(cid: str) -> list:
    """One call's records with every kind of webhook event, and an EventRecord (which has none).

    Its events: ``call.started``, ``turn``, ``tool``, ``transfer``, ``message``, ``call.ended``.
    """
    return [
        call_started(cid),
        turn_from_timeline(cid, 0, timeline(5.0, *[0.1] * 6), transcript="when do you open",
                           reply_text="At ten.", at=T0 + timedelta(seconds=8)),
        ToolCallRecord(cid, T0 + timedelta(seconds=9), "book_status", '{"title": "Dune"}',
                       "llm", "ok", "", 0.2, 0),
        ToolCallRecord(cid, T0 + timedelta(seconds=12), "transfer", '{"target": "desk"}',
                       "llm", "ok", "", 1.5, 1),
        MessageRecord(cid, T0 + timedelta(seconds=11), "call me back", "sip:a@b",
                      "/m/1.wav", 4.5),
        EventRecord(cid, T0, "dtmf", "1"),
        call_ended(cid, T0 + timedelta(seconds=31), turns=1),
    ]


def outbox_rows(url: str) -> list[WebhookDelivery]:
    """The webhooks' outbox of the call log at ``url``, in the order it was queued."""
    engine = make_engine(url)
    with Session(engine) as s:
        rows = list(s.scalars(select(WebhookDelivery).order_by(WebhookDelivery.id)))
    engine.dispose()
    return rows


@pytest.fixture(name="sqlite_url")
def sqlite_url_fixture(tmp_path) -> str:
    """URL of a fresh (not yet created) SQLite file."""
    return f"sqlite:///{tmp_path / 'calls.db'}"


class PgCluster:
    """A throwaway PostgreSQL cluster that a test can stop and start (a real outage)."""

    def __init__(self, pg_bin: str, root: str, run_as: list[str]):
        self.pg_bin, self.root, self.run_as = pg_bin, root, run_as
        self.data = os.path.join(root, "data")
        self.url = f"postgresql+psycopg://postgres@/postgres?host={root}"

    def pg(self, tool: str, *args: str, check: bool = True) -> None:
        subprocess.run([*self.run_as, os.path.join(self.pg_bin, tool), *args], check=check,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=60)

    def start(self) -> None:
        # No TCP at all (nothing can collide on a port); fsync off: a test cluster needs no
        # durability.
        opts = f"-k {self.root} -c listen_addresses='' -c fsync=off -c full_page_writes=off"
        self.pg("pg_ctl", "-D", self.data, "-o", opts, "-l", os.path.join(self.root, "log"),
                "-w", "start")

    def stop(self) -> None:
        self.pg("pg_ctl", "-D", self.data, "-m", "fast", "-w", "stop", check=False)


@pytest.fixture(scope="session", name="pg_cluster")
def pg_cluster_fixture():
    """A temp cluster, started once per test session and removed at the end."""
    require("initdb")  # missing: the test fails naming the package (tests/needs.py)
    pg_bin = os.path.dirname(find("initdb"))
    run_as: list[str] = []
    if os.geteuid() == 0:  # the server refuses to run as root
        require("runuser")
        run_as = ["runuser", "-u", "postgres", "--"]
    # Short path: the Unix socket path must fit in 107 bytes.
    root = tempfile.mkdtemp(prefix="cagpg")
    cluster = PgCluster(pg_bin, root, run_as)
    os.mkdir(cluster.data)
    if run_as:
        shutil.chown(root, "postgres", "postgres")
        shutil.chown(cluster.data, "postgres", "postgres")
    os.chmod(root, 0o755)
    try:
        cluster.pg("initdb", "-D", cluster.data, "-A", "trust", "-U", "postgres", "--no-sync",
                   "-E", "UTF8")
        cluster.start()
        yield cluster
    finally:
        cluster.pg("pg_ctl", "-D", cluster.data, "-m", "immediate", "-w", "stop", check=False)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session", name="pg_url")
def pg_url_fixture(pg_cluster) -> str:
    """``postgresql+psycopg://`` URL of the temp cluster (Unix socket)."""
    return pg_cluster.url


@pytest.fixture(name="pg_clean_url")
def pg_clean_url_fixture(pg_url):
    """The temp cluster with an empty ``public`` schema (each test migrates from scratch)."""
    from sqlalchemy import create_engine, text

    engine = create_engine(pg_url)
    with engine.begin() as conn:
        conn.execute(text("DROP SCHEMA public CASCADE; CREATE SCHEMA public"))
    engine.dispose()
    return pg_url


def write_records(url: str, records, spool_dir) -> None:
    """Write records through the real writer and wait until they are in the database."""
    from db.writer import CallLogWriter
    from dialplan.options import DBOptions

    writer = CallLogWriter(DBOptions(url=url, spool_dir=str(spool_dir)))
    for r in records:
        writer.put(r)
    assert writer.flush(timeout=30)
    assert writer.close(timeout=30)
    assert writer.stats.spooled == 0 and writer.stats.rejected == 0, writer.stats


def known_records(now: datetime):
    """Calls with hand-picked voice-to-voice values, so report percentiles are known exactly.

    faster-whisper (profile sales, model tiny.en): 2 calls, v2v 100, 200, ... 1000 ms, and two
    unanswered turns: ``no-words`` (fw-1) and ``hangup`` (fw-2). The hangup turn also carries a
    5 s voice-to-voice: the session never writes both, but if a record does, its reason wins and
    those 5 s are in no percentile.
    voxtral (profile support, model voxtral-mini): 1 call, v2v 300, 100, 200 ms, and a
    ``barge-in`` turn cut before its first audio.
    Unanswered turns have endpoint 50 ms and ASR 20 ms, like the answered ones, and nothing later.
    An old faster-whisper call (3 days ago) with one 9999 ms turn: outside ``--since 24h``.
    """
    records = []

    def add_call(cid, start, backend, model, profile, v2vs, unanswered=()):
        records.append(call_started(cid, start, asr_backend=backend, asr_model=model,
                                    profile=profile))
        for i, v in enumerate(v2vs):
            # endpoint 50 ms, playout 10 ms, the rest in the LLM: stages sum to v2v (records
            # hold seconds).
            records.append(TurnRecord(
                call_id=cid, index=i, endpoint_s=0.05, asr_s=0.02, llm_ttft_s=(v - 100) / 1000,
                first_chunk_s=0.01, tts_first_audio_s=0.01, playout_s=0.01,
                voice_to_voice_s=v / 1000, asr_rtf=v / 10000.0, tts_rtf=0.5,
                speech_start_s=4.0 * i, speech_end_s=4.0 * i + 1.5, audio_out_s=1.0,
                asr_backend=backend, asr_model=model, transcript=f"{cid} turn {i}",
                at=start + timedelta(seconds=5 * (i + 1))))
        for i, (reason, v2v) in enumerate(unanswered, start=len(v2vs)):
            records.append(TurnRecord(
                call_id=cid, index=i, endpoint_s=0.05, asr_s=0.02, voice_to_voice_s=v2v,
                speech_start_s=4.0 * i, speech_end_s=4.0 * i + 1.5, asr_backend=backend,
                asr_model=model, transcript="" if reason == "no-words" else f"{cid} turn {i}",
                unanswered=reason, at=start + timedelta(seconds=5 * (i + 1))))
        records.append(call_ended(cid, start + timedelta(minutes=2),
                                  turns=len(v2vs) + len(unanswered)))

    add_call("fw-1", now - timedelta(hours=3), "faster-whisper", "tiny.en", "sales",
             [100, 200, 300, 400, 500], [("no-words", None)])
    add_call("fw-2", now - timedelta(hours=2), "faster-whisper", "tiny.en", "sales",
             [600, 700, 800, 900, 1000], [("hangup", 5.0)])
    add_call("vx-1", now - timedelta(hours=1), "voxtral", "voxtral-mini", "support",
             [300, 100, 200], [("barge-in", None)])
    add_call("old-1", now - timedelta(days=3), "faster-whisper", "tiny.en", "sales", [9999])
    records.append(EventRecord("vx-1", now - timedelta(minutes=59), "barge-in", "turn 1"))
    return records
