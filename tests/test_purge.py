"""``callagent db purge``: old calls lose their audio files and words, keep their timings.

A real SQLite call log written through the real writer, and real files under a media folder.
"""

from __future__ import annotations

import argparse
import os
from datetime import UTC, datetime, timedelta

import pytest
from db_fixtures import (
    call_started,
    pg_clean_url_fixture,  # noqa: F401 (fixtures)
    pg_cluster_fixture,  # noqa: F401
    pg_url_fixture,  # noqa: F401
    sqlite_url_fixture,  # noqa: F401
    write_records,
)
from sqlalchemy import select
from sqlalchemy.orm import Session

from agent.cli import db as cmd_db
from db import reports
from db.migrate import make_engine
from db.purge import purge
from db.records import CallEnded, MessageRecord, ToolCallRecord, TurnRecord
from db.schema import Call, CallerMessage, ToolCall, Turn

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def _file(tmp_path, day: str, name: str, size: int) -> str:
    path = tmp_path / "media" / day / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\0" * size)
    return str(path)


def _call(cid: str, start: datetime, recording: str | None, message_audio: str | None):
    records = [call_started(cid, start)]
    for i in range(2):
        records.append(TurnRecord(call_id=cid, index=i, transcript=f"{cid} said {i}",
                                  reply_text=f"{cid} answer {i}", endpoint_s=0.05,
                                  asr_s=0.02, voice_to_voice_s=0.5 + i / 10,
                                  speech_start_s=4.0 * i, speech_end_s=4.0 * i + 1,
                                  at=start + timedelta(seconds=5 * (i + 1))))
    records.append(ToolCallRecord(call_id=cid, at=start + timedelta(seconds=6),
                                  name="take_message", arguments='{"for": "sales"}',
                                  outcome="ok", latency_s=0.01, turn_index=1))
    records.append(MessageRecord(call_id=cid, at=start + timedelta(seconds=20),
                                 text=f"{cid}: call me back", caller_uri=f"sip:{cid}@test",
                                 audio_path=message_audio, duration_s=3.5))
    records.append(CallEnded(call_id=cid, ended_at=start + timedelta(minutes=1),
                             end_reason="caller-bye", turns=2, recording_path=recording,
                             recording_s=60.0 if recording else None))
    return records


def _log(url, tmp_path):
    """Two calls 40 days old (one whose recording is gone already), one from yesterday."""
    old = NOW - timedelta(days=40)
    new = NOW - timedelta(days=1)
    files = {
        "old-1.wav": _file(tmp_path, "2026-04-22", "old-1.wav", 1000),
        "old-1-msg.wav": _file(tmp_path, "2026-04-22", "old-1-msg.wav", 300),
        "old-2-msg.wav": _file(tmp_path, "2026-04-22", "old-2-msg.wav", 200),
        "new-1.wav": _file(tmp_path, "2026-05-31", "new-1.wav", 4000),
        "new-1-msg.wav": _file(tmp_path, "2026-05-31", "new-1-msg.wav", 100),
    }
    gone = str(tmp_path / "media" / "2026-04-22" / "old-2.wav")  # deleted by hand
    records = (_call("old-1", old, files["old-1.wav"], files["old-1-msg.wav"])
               + _call("old-2", old + timedelta(hours=1), gone, files["old-2-msg.wav"])
               + _call("new-1", new, files["new-1.wav"], files["new-1-msg.wav"]))
    write_records(url, records, tmp_path / "spool")
    return make_engine(url), files


@pytest.fixture
def log(sqlite_url, tmp_path):
    engine, files = _log(sqlite_url, tmp_path)
    yield engine, files
    engine.dispose()


def _rows(engine):
    with Session(engine) as s:
        calls = {c.id: (c.recording_path, c.recording_s) for c in s.scalars(select(Call))}
        turns = {(t.call_id, t.index): (t.transcript, t.reply_text, t.voice_to_voice_s,
                                        t.endpoint_s) for t in s.scalars(select(Turn))}
        messages = {m.call_id: (m.text, m.audio_path, m.duration_s)
                    for m in s.scalars(select(CallerMessage))}
        tools = {t.call_id: (t.name, t.arguments, t.outcome) for t in s.scalars(select(ToolCall))}
    return calls, turns, messages, tools


@pytest.mark.unit
def test_purge_old_calls(log, tmp_path):
    engine, files = log
    before = _rows(engine)
    r = purge(engine, timedelta(days=30), now=NOW)
    assert (r.calls, r.turns, r.messages) == (2, 4, 2)
    assert (r.files, r.bytes, r.missing, r.failed) == (3, 1500, 1, [])
    for name in ("old-1.wav", "old-1-msg.wav", "old-2-msg.wav"):
        assert not (tmp_path / "media" / "2026-04-22" / name).exists()
    assert not (tmp_path / "media" / "2026-04-22").exists()  # the emptied day went too
    calls, turns, messages, tools = _rows(engine)
    assert calls["old-1"] == calls["old-2"] == (None, None)
    assert turns[("old-1", 1)] == ("", "", 0.6, 0.05)  # words gone, timings kept
    assert messages["old-2"] == ("", None, 3.5)
    # The new call, and every call's tool calls, are as they were.
    assert calls["new-1"] == before[0]["new-1"] and messages["new-1"] == before[2]["new-1"]
    assert turns[("new-1", 0)] == before[1][("new-1", 0)]
    assert tools == before[3]
    assert (tmp_path / "media" / "2026-05-31" / "new-1.wav").exists()
    # Latency reports over the purged calls are unchanged.
    group = reports.build_report(engine, None, now=NOW).groups[0]
    assert (group.turns, group.stages["voice_to_voice"].n) == (6, 6)
    # Again: nothing is left to purge.
    again = purge(engine, timedelta(days=30), now=NOW)
    assert (again.calls, again.files, again.missing, again.turns) == (0, 0, 0, 0)


@pytest.mark.server
@pytest.mark.needs("initdb")
def test_purge_on_postgresql(pg_clean_url, tmp_path):
    engine, _ = _log(pg_clean_url, tmp_path)
    try:
        dry = purge(engine, timedelta(days=30), now=NOW, dry_run=True)
        r = purge(engine, timedelta(days=30), now=NOW)
        for got in (dry, r):
            assert (got.calls, got.turns, got.messages, got.files, got.bytes, got.missing) == (
                2, 4, 2, 3, 1500, 1)
        calls, turns, messages, _ = _rows(engine)
        assert calls["old-1"] == (None, None) and calls["new-1"][1] == 60.0
        assert turns[("old-2", 0)] == ("", "", 0.5, 0.05) and messages["old-1"][:2] == ("", None)
        assert purge(engine, timedelta(days=30), now=NOW).calls == 0
    finally:
        engine.dispose()


@pytest.mark.unit
def test_dry_run_changes_nothing(log, tmp_path):
    engine, files = log
    before = _rows(engine)
    r = purge(engine, timedelta(days=30), now=NOW, dry_run=True)
    assert (r.calls, r.turns, r.messages, r.files, r.bytes, r.missing) == (2, 4, 2, 3, 1500, 1)
    assert _rows(engine) == before
    assert all(os.path.exists(p) for p in files.values())


@pytest.mark.unit
def test_a_file_that_cannot_go_keeps_its_path(log, tmp_path):
    engine, files = log
    # A folder where the recording should be: os.remove refuses it (as root, too).
    stuck = tmp_path / "media" / "2026-04-22" / "old-1.wav"
    stuck.unlink()
    stuck.mkdir()
    r = purge(engine, timedelta(days=30), now=NOW)
    assert len(r.failed) == 1 and r.failed[0].startswith(str(stuck))
    calls, turns, messages, _ = _rows(engine)
    assert calls["old-1"][0] == str(stuck)  # still named: the next purge tries again
    assert turns[("old-1", 0)][:2] == ("", "") and messages["old-1"][:2] == ("", None)
    assert purge(engine, timedelta(days=30), now=NOW).calls == 1
    with pytest.raises(ValueError):
        purge(engine, timedelta(days=-1))


def _main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="callagent")
    cmd_db.add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


@pytest.mark.unit
def test_cli(sqlite_url, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CALLAGENT_DB_URL", raising=False)
    wav = _file(tmp_path, "2026-01-01", "c.wav", 2048)
    old = datetime.now(UTC) - timedelta(days=10)
    write_records(sqlite_url, _call("c", old, wav, None), tmp_path / "spool")
    assert _main(["db", "purge", "--older-than", "30", "--db", sqlite_url]) == 0
    assert "purged 0 calls" in capsys.readouterr().out
    assert _main(["db", "purge", "--older-than", "7", "--db", sqlite_url, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("would purge 1 calls started before ")
    assert "1 files to delete (2,048 bytes), 0 already gone; 2 turns and 1 messages to blank" \
        in out
    assert _main(["db", "purge", "--older-than", "7", "--db", sqlite_url]) == 0
    assert "purged 1 calls" in (out := capsys.readouterr().out) and "1 files deleted" in out
    assert not (tmp_path / "media" / "2026-01-01").exists()
    with pytest.raises(SystemExit):
        _main(["db", "purge", "--older-than", "-3", "--db", sqlite_url])
    with pytest.raises(SystemExit):
        _main(["db", "purge", "--db", sqlite_url])  # --older-than is required
    empty = f"sqlite:///{tmp_path / 'empty.db'}"
    assert _main(["db", "purge", "--older-than", "1", "--db", empty]) == 1
    assert "call log is empty" in capsys.readouterr().err
