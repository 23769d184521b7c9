"""``callagent report`` and ``callagent db`` output, run through argparse like the real CLI."""

from __future__ import annotations

import argparse
import csv
import io
import json
from datetime import UTC, datetime

import pytest
from db_fixtures import (
    known_records,
    sqlite_url_fixture,  # noqa: F401 (fixtures)
    write_records,
)
from test_report_queries import with_actions

from agent.cli import db as cmd_db
from agent.cli import report as cmd_report

pytestmark = pytest.mark.unit


def _main(argv: list[str]) -> int:
    """Parse and dispatch like ``agent.cli.main`` with only the call-log commands loaded."""
    parser = argparse.ArgumentParser(prog="callagent")
    sub = parser.add_subparsers(dest="command", required=True)
    cmd_report.add_parser(sub)
    cmd_db.add_parser(sub)
    args = parser.parse_args(argv)
    return args.func(args)


@pytest.fixture
def db(sqlite_url, tmp_path, monkeypatch):
    # No config.toml in cwd and no env override: --db alone decides.
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CALLAGENT_DB_URL", raising=False)
    write_records(sqlite_url, with_actions(known_records(datetime.now(UTC))), tmp_path / "spool")
    return sqlite_url


def test_table(db, capsys):
    assert _main(["report", "--db", db, "--since", "24h"]) == 0
    out = capsys.readouterr().out
    assert "3 calls, 16 turns" in out
    assert "faster-whisper" in out and "voxtral" in out
    # The log holds seconds; the table shows ms.
    line = next(x for x in out.splitlines() if "voice_to_voice" in x)
    assert "550" in line and "955" in line and "991" in line
    assert "fw-2" in out  # slowest turns and latest calls name their calls
    assert "3 unanswered (18.8%: barge-in 1, hangup 1, no-words 1)" in out
    fw = next(x for x in out.splitlines() if x.lstrip("│ ").startswith("faster-whisper"))
    vx = next(x for x in out.splitlines() if x.lstrip("│ ").startswith("voxtral"))
    assert "2 (16.7%)" in fw and "1 (25.0%)" in vx
    assert "5,000" not in out  # fw-2's unheard hangup turn is nobody's voice-to-voice


def test_json_and_since(db, capsys):
    assert _main(["report", "--db", db, "--format", "json"]) == 0
    everything = json.loads(capsys.readouterr().out)
    assert everything["totals"]["calls"] == 4
    assert _main(["report", "--db", db, "--format", "json", "--since", "24h"]) == 0
    day = json.loads(capsys.readouterr().out)
    assert day["totals"]["calls"] == 3
    fw = next(g for g in day["groups"] if g["key"] == "faster-whisper")
    assert fw["stages"]["voice_to_voice"]["p50"] == pytest.approx(0.55)  # JSON: seconds
    # Unanswered turns: counts, a rate as a fraction of all the group's turns, reasons.
    assert (fw["turns"], fw["unanswered"], fw["unanswered_reasons"]) == (
        12, 2, {"hangup": 1, "no-words": 1})
    assert fw["unanswered_rate"] == pytest.approx(2 / 12)
    assert fw["stages"]["voice_to_voice"]["n"] == 10
    t = day["totals"]
    assert (t["turns"], t["unanswered"], t["unanswered_rate"]) == (16, 3, 0.1875)
    assert t["unanswered_reasons"] == {"barge-in": 1, "hangup": 1, "no-words": 1}
    assert [c["unanswered"] for c in day["recent_calls"]] == [1, 1, 1]


def test_csv_by_model(db, capsys):
    assert _main(["report", "--db", db, "--format", "csv", "--by", "model", "--since", "7d"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    v2v = {r["group"]: r for r in rows if r["metric"] == "voice_to_voice"}
    # 7 days include the 3-day-old 9999 ms turn: 11 tiny.en turns, median 600 ms (CSV: s).
    assert (v2v["tiny.en"]["n"], float(v2v["tiny.en"]["p50"])) == ("11", 0.6)
    assert float(v2v["voxtral-mini"]["p50"]) == 0.2
    assert {r["section"] for r in rows} == {"stage_s", "rtf", "unanswered", "unanswered_total"}
    assert all(len(r) == 10 and None not in r.values() for r in rows)  # no ragged rows
    # n: every turn of the group, count: the unanswered ones, rate = count / n.
    unanswered = {(r["section"], r["group"], r["metric"]): (r["n"], r["count"], r["rate"])
                  for r in rows if r["section"].startswith("unanswered")}
    assert unanswered == {
        ("unanswered", "tiny.en", "unanswered"): ("13", "2", "0.153846"),
        ("unanswered", "tiny.en", "hangup"): ("13", "1", "0.076923"),
        ("unanswered", "tiny.en", "no-words"): ("13", "1", "0.076923"),
        ("unanswered", "voxtral-mini", "unanswered"): ("4", "1", "0.25"),
        ("unanswered", "voxtral-mini", "barge-in"): ("4", "1", "0.25"),
        ("unanswered_total", "", "unanswered"): ("17", "3", "0.176471"),
        ("unanswered_total", "", "barge-in"): ("17", "1", "0.058824"),
        ("unanswered_total", "", "hangup"): ("17", "1", "0.058824"),
        ("unanswered_total", "", "no-words"): ("17", "1", "0.058824"),
    }


def test_one_call(db, capsys):
    assert _main(["report", "--db", db, "--call", "vx-1"]) == 0
    out = capsys.readouterr().out
    assert "Call vx-1" in out and "vx-1 turn 2" in out and "barge-in" in out
    turn3 = next(x for x in out.splitlines() if x.startswith("│ 3 "))
    assert "barge-in" in turn3
    assert _main(["report", "--db", db, "--call", "vx-1", "--format", "json"]) == 0
    tl = json.loads(capsys.readouterr().out)
    assert [t["stages"]["voice_to_voice"] for t in tl["turns"]] == [0.3, 0.1, 0.2, None]
    assert _main(["report", "--db", db, "--call", "vx-1", "--format", "csv"]) == 0
    turns = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [t["voice_to_voice_s"] for t in turns] == ["0.3", "0.1", "0.2", ""]
    assert [t["unanswered"] for t in turns] == ["", "", "", "barge-in"]
    assert _main(["report", "--db", db, "--call", "nope"]) == 1


def test_one_call_shows_recording_tool_calls_and_messages(db, capsys):
    assert _main(["report", "--db", db, "--call", "vx-1"]) == 0
    out = capsys.readouterr().out
    assert "Call vx-1 (outbound)" in out
    assert "Recording: /media/2026/vx-1.wav (120.0 s)" in out
    lines = out[out.index("In time order"):].splitlines()[1:]
    # Turns, tool calls and the message in the order they happened, seconds into the call.
    assert [x.split()[0] for x in lines] == ["0.0", "4.0", "8.0", "9.0", "12.0", "13.0", "20.0",
                                             "59.0"]
    assert 'tool transfer {"to": "sales"} (llm, turn 2): ok in 320 ms - to sip:200@pbx' \
        in lines[3]
    assert "turn 3:" in lines[4] and "not heard: barge-in" in lines[4]
    assert 'tool transfer {"to": "support"} (keypad): busy in 2,500 ms' in lines[5]
    assert ('message "Please call me back about the invoice" (/media/2026/vx-1-msg.wav, 4.2 s)'
            in lines[6])
    assert "barge-in  turn 1" in lines[7]
    assert _main(["report", "--db", db, "--call", "fw-1"]) == 0
    assert "Recording: none" in (out := capsys.readouterr().out) and "(inbound)" in out
    assert _main(["report", "--db", db, "--call", "vx-1", "--format", "json"]) == 0
    tl = json.loads(capsys.readouterr().out)
    assert (tl["call"]["direction"], tl["call"]["recording_path"], tl["call"]["recording_s"]) \
        == ("outbound", "/media/2026/vx-1.wav", 120.0)
    assert [(a["name"], a["source"], a["outcome"], a["latency_s"], a["arguments"])
            for a in tl["tool_calls"]] == [
        ("transfer", "llm", "ok", 0.32, '{"to": "sales"}'),
        ("transfer", "keypad", "busy", 2.5, '{"to": "support"}')]
    assert [(m["text"], m["audio_path"]) for m in tl["messages"]] == [
        ("Please call me back about the invoice", "/media/2026/vx-1-msg.wav")]


def test_report_counts_tool_calls_by_outcome(db, capsys):
    for by in ("backend", "worker"):
        assert _main(["report", "--db", db, "--since", "24h", "--by", by]) == 0
        out = capsys.readouterr().out
        table = out[out.index("Tool calls and keypad actions"):]
        rows = [x.split("│")[1:-1] for x in table.splitlines() if x.startswith("│")]
        assert [[c.strip() for c in r] for r in rows] == [
            ["lookup_order", "timeout", "1", "3,000", "3,000"],
            ["transfer", "busy", "1", "2,500", "2,500"],
            ["transfer", "ok", "1", "320", "320"]]
    assert _main(["report", "--db", db, "--format", "json"]) == 0
    outcomes = json.loads(capsys.readouterr().out)["tool_outcomes"]
    assert [(o["name"], o["outcome"], o["count"]) for o in outcomes] == [
        ("lookup_order", "timeout", 1), ("transfer", "busy", 1), ("transfer", "ok", 2)]


def test_errors(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert _main(["report", "--db", f"sqlite:///{tmp_path / 'missing.db'}"]) == 1
    assert "no call log" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        _main(["report", "--since", "yesterday"])


def test_through_agent_cli(db, capsys):
    from agent.cli import main as cli

    assert cli.main(["report", "--db", db, "--format", "json", "--since", "24h"]) == 0
    assert json.loads(capsys.readouterr().out)["totals"]["turns"] == 16


def test_messages_lists_what_callers_left_newest_first(db, capsys):
    from agent.cli import messages as cmd_messages

    parser = argparse.ArgumentParser(prog="callagent")
    cmd_messages.add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["messages", "--db", db, "--format", "json"])
    assert args.func(args) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows and all({"call_id", "at", "caller", "text", "audio_path"} <= set(r) for r in rows)
    assert [r["at"] for r in rows] == sorted((r["at"] for r in rows), reverse=True)
    args = parser.parse_args(["messages", "--db", db])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert rows[0]["text"] in out and f"call {rows[0]['call_id']}" in out
