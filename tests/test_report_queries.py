"""Report numbers come from the database: known rows in, known percentiles out (seconds)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from db_fixtures import (
    T0,
    known_records,
    sqlite_url_fixture,  # noqa: F401 (fixtures)
    write_records,
)

from db import reports
from db.migrate import make_engine
from db.records import CallEnded, CallStarted, MessageRecord, ToolCallRecord
from db.stages import METRICS
from db.stats import Percentiles, percentile, percentile_interval

pytestmark = pytest.mark.unit
NOW = T0 + timedelta(days=10)


def with_actions(records: list) -> list:
    """:func:`known_records` plus what vx-1 did besides talking, and its recording.

    vx-1 (answered 1 s after it started; turns start 0, 4, 8 and 12 s in) was placed by the
    agent; a transfer at 9 s went through, one from the keypad at 13 s found the line busy, and
    the caller left a message at 20 s. fw-2 has a lookup that timed out; the old call a transfer
    that is outside ``--since 24h``.
    """
    started = {r.call_id: r for r in records if isinstance(r, CallStarted)}
    vx = started["vx-1"]
    vx.direction = "outbound"
    t0 = vx.answered_at
    fw2 = started["fw-2"].answered_at
    return records + [
        ToolCallRecord("vx-1", t0 + timedelta(seconds=9), "transfer", '{"to": "sales"}',
                       source="llm", outcome="ok", detail="to sip:200@pbx", latency_s=0.32,
                       turn_index=2),
        ToolCallRecord("vx-1", t0 + timedelta(seconds=13), "transfer", '{"to": "support"}',
                       source="keypad", outcome="busy", latency_s=2.5),
        MessageRecord("vx-1", t0 + timedelta(seconds=20), "Please call me back about the invoice",
                      caller_uri="sip:vx-1@test", audio_path="/media/2026/vx-1-msg.wav",
                      duration_s=4.2),
        CallEnded("vx-1", vx.started_at + timedelta(minutes=2), "caller-bye", turns=4,
                  recording_path="/media/2026/vx-1.wav", recording_s=120.0),
        ToolCallRecord("fw-2", fw2 + timedelta(seconds=2), "lookup_order", '{"order": "A17"}',
                       outcome="timeout", latency_s=3.0, turn_index=0),
        ToolCallRecord("old-1", started["old-1"].answered_at, "transfer", "{}", outcome="ok",
                       latency_s=0.1),
    ]


@pytest.fixture
def engine(sqlite_url, tmp_path):
    write_records(sqlite_url, with_actions(known_records(NOW)), tmp_path / "spool")
    engine = make_engine(sqlite_url)
    yield engine
    engine.dispose()


def test_percentiles_interpolate_linearly():
    p = Percentiles.of([None, 300.0, 100.0, float("nan"), 200.0])
    assert (p.n, p.p50, p.max) == (3, 200.0, 300.0)
    assert p.p95 == pytest.approx(290.0) and p.p99 == pytest.approx(298.0)
    assert Percentiles.of([]) == Percentiles.of([None]) == Percentiles(n=0)
    # The one percentile helper, as the benchmarks and playout metrics use it.
    assert percentile(iter([300.0, None, 100.0, 200.0]), 95) == pytest.approx(290.0)
    assert percentile([7.0], 99) == 7.0
    assert percentile([], 50) is None and percentile([None], 50) is None


def test_percentile_interval_brackets_the_percentile_and_narrows_with_more_samples():
    # 40 calls, 38 near 4 s and two slow ones: the p95 rests on those two.
    calls = [4000.0 + 10 * i for i in range(38)] + [6000.0, 7000.0]
    low, high = percentile_interval(calls, 95)
    assert low <= percentile(calls, 95) <= high
    assert low < 4400 and high > 6000  # another run could land anywhere in there
    assert percentile_interval(calls, 95) == (low, high)  # the same samples, the same answer
    low4, high4 = percentile_interval(calls * 4, 95)
    assert high4 - low4 < high - low
    assert percentile_interval([5.0], 95) is None and percentile_interval([None], 50) is None


def test_parse_since():
    assert reports.parse_since("24h") == timedelta(hours=24)
    assert reports.parse_since("7d") == timedelta(days=7)
    assert reports.parse_since("30m") == timedelta(minutes=30)
    assert reports.parse_since(None) is None
    with pytest.raises(ValueError):
        reports.parse_since("yesterday")


def test_stage_percentiles_by_backend(engine):
    r = reports.build_report(engine, reports.parse_since("24h"), "backend", now=NOW)
    groups = {g.key: g for g in r.groups}
    assert list(groups) == ["faster-whisper", "voxtral"]
    fw, vx = groups["faster-whisper"], groups["voxtral"]
    # Turn counts include the unanswered turns; voice-to-voice only the 10 answered ones (not
    # the 5 s stamped on fw-2's unheard hangup turn).
    assert (fw.calls, fw.turns, vx.calls, vx.turns) == (2, 12, 1, 4)
    v2v = fw.stages["voice_to_voice"]
    assert (v2v.n, v2v.max) == (10, 1.0)
    assert fw.stages["endpoint"].n == 12 and fw.stages["llm_ttft"].n == 10
    assert v2v.p50 == pytest.approx(0.55)
    assert v2v.p95 == pytest.approx(0.955) and v2v.p99 == pytest.approx(0.991)
    assert fw.stages["llm_ttft"].p50 == pytest.approx(0.45)
    assert fw.stages["endpoint"].p99 == pytest.approx(0.05)
    assert vx.stages["voice_to_voice"].p50 == pytest.approx(0.2)
    # The 3-day-old call is outside the window; with no window it is in.
    assert r.totals.calls == 3 and r.totals.turns == 16
    everything = reports.build_report(engine, None, "backend", now=NOW)
    assert everything.totals.calls == 4
    assert {g.key: g.turns for g in everything.groups}["faster-whisper"] == 13
    assert everything.slowest[0].voice_to_voice_s == 9.999


def test_group_by_profile_and_model(engine):
    since = timedelta(hours=24)
    by_profile = reports.build_report(engine, since, "profile", now=NOW).groups
    assert [(g.key, g.turns) for g in by_profile] == [("sales", 12), ("support", 4)]
    by_model = reports.build_report(engine, since, "model", now=NOW).groups
    assert [(g.key, g.stages["voice_to_voice"].p50) for g in by_model] == [
        ("tiny.en", pytest.approx(0.55)), ("voxtral-mini", pytest.approx(0.2))]


def test_rtf_counts_slowest_and_recent(engine):
    r = reports.build_report(engine, timedelta(hours=24), calls=2, slowest=3, now=NOW)
    rtf = {(x.backend, x.model): x for x in r.rtf}
    assert rtf[("faster-whisper", "tiny.en")].asr.p50 == pytest.approx(0.055)
    assert rtf[("voxtral", "voxtral-mini")].tts.p50 == 0.5
    assert [(s.call_id, s.index, s.voice_to_voice_s) for s in r.slowest] == [
        ("fw-2", 4, 1.0), ("fw-2", 3, 0.9), ("fw-2", 2, 0.8)]
    assert [c.id for c in r.recent_calls] == ["vx-1", "fw-2"]
    assert r.recent_calls[0].voice_to_voice.p50 == pytest.approx(0.2)
    assert [c.unanswered for c in r.recent_calls] == [1, 1]
    assert r.recent_calls[1].voice_to_voice.max == 1.0  # fw-2's unheard 5 s is not in
    assert r.totals.end_reasons == {"caller-bye": 3}


def test_call_timeline(engine):
    tl = reports.call_timeline(engine, "vx-1")
    assert tl is not None
    assert [(t.index, t.voice_to_voice_s, t.unanswered) for t in tl.turns] == [
        (0, 0.3, ""), (1, 0.1, ""), (2, 0.2, ""), (3, None, "barge-in")]
    assert tl.call.unanswered == 1 and tl.call.voice_to_voice.n == 3
    hangup = reports.call_timeline(engine, "fw-2")
    # The per-turn view shows what was recorded; the call's summary only what was heard.
    assert hangup.turns[5].voice_to_voice_s == 5.0 and hangup.turns[5].unanswered == "hangup"
    assert hangup.call.voice_to_voice.max == 1.0
    assert tl.turns[1].speech_end_s == 5.5 and tl.turns[1].transcript == "vx-1 turn 1"
    assert [(e.kind, e.detail) for e in tl.events] == [("barge-in", "turn 1")]
    assert tl.call.profile == "support" and tl.call.end_reason == "caller-bye"
    assert reports.call_timeline(engine, "nope") is None


def test_call_timeline_has_its_actions_and_recording(engine):
    tl = reports.call_timeline(engine, "vx-1")
    c = tl.call
    assert (c.direction, c.recording_path, c.recording_s) == (
        "outbound", "/media/2026/vx-1.wav", 120.0)
    assert [(a.name, a.arguments, a.source, a.outcome, a.latency_s, a.turn_index, a.offset_s)
            for a in tl.tool_calls] == [
        ("transfer", '{"to": "sales"}', "llm", "ok", 0.32, 2, 9.0),
        ("transfer", '{"to": "support"}', "keypad", "busy", 2.5, None, 13.0)]
    assert tl.tool_calls[0].detail == "to sip:200@pbx"
    assert [(m.text, m.audio_path, m.duration_s, m.offset_s) for m in tl.messages] == [
        ("Please call me back about the invoice", "/media/2026/vx-1-msg.wav", 4.2, 20.0)]
    plain = reports.call_timeline(engine, "fw-1")
    assert (plain.call.direction, plain.call.recording_path, plain.tool_calls,
            plain.messages) == ("inbound", None, [], [])


def test_tool_outcomes_in_the_window(engine):
    r = reports.build_report(engine, timedelta(hours=24), now=NOW)
    assert [(o.name, o.outcome, o.count, o.latency.p50) for o in r.tool_outcomes] == [
        ("lookup_order", "timeout", 1, 3.0), ("transfer", "busy", 1, 2.5),
        ("transfer", "ok", 1, 0.32)]
    everything = reports.build_report(engine, None, now=NOW)
    ok = next(o for o in everything.tool_outcomes if o.outcome == "ok")
    assert (ok.count, ok.latency.max) == (2, 0.32)  # the old call's transfer too


def test_unanswered_counts_and_rates(engine):
    since = timedelta(hours=24)
    r = reports.build_report(engine, since, "backend", now=NOW)
    got = {g.key: (g.turns, g.unanswered, g.unanswered_rate, g.unanswered_reasons)
           for g in r.groups}
    assert got == {
        "faster-whisper": (12, 2, pytest.approx(2 / 12), {"hangup": 1, "no-words": 1}),
        "voxtral": (4, 1, 0.25, {"barge-in": 1}),
    }
    t = r.totals
    assert (t.turns, t.unanswered, t.unanswered_rate) == (16, 3, 3 / 16)
    assert t.unanswered_reasons == {"barge-in": 1, "hangup": 1, "no-words": 1}
    by_profile = reports.build_report(engine, since, "profile", now=NOW).groups
    assert [(g.key, g.unanswered, g.unanswered_rate) for g in by_profile] == [
        ("sales", 2, pytest.approx(1 / 6)), ("support", 1, 0.25)]
    by_model = reports.build_report(engine, since, "model", now=NOW).groups
    assert [(g.key, g.unanswered) for g in by_model] == [("tiny.en", 2), ("voxtral-mini", 1)]
    # The 3-day-old call had no unanswered turn: all time, the rate falls, the count stays.
    everything = reports.build_report(engine, None, "backend", now=NOW)
    assert (everything.totals.turns, everything.totals.unanswered) == (17, 3)
    assert everything.groups[0].unanswered_rate == pytest.approx(2 / 13)
    # No turns, no rate (not 0 %).
    empty = reports.build_report(engine, timedelta(minutes=1), now=NOW + timedelta(days=1))
    assert (empty.totals.turns, empty.totals.unanswered, empty.totals.unanswered_rate,
            empty.totals.unanswered_reasons) == (0, 0, None, {})


def test_unanswered_turns_do_not_break_percentiles():
    def row(index, v2v, unanswered=""):
        return reports.TurnRow(call_id="c", index=index, recorded_at=None, profile="p",
                               asr_backend="b", asr_model="m", unanswered=unanswered,
                               stages={m: None for m in METRICS} | {"voice_to_voice": v2v})

    # A group where nobody heard a reply: no voice-to-voice at all, not an error or a zero.
    (g,) = reports.stage_groups([row(0, None, "no-words"), row(1, 3.0, "hangup")])
    assert g.stages["voice_to_voice"] == Percentiles(n=0)
    assert (g.turns, g.unanswered, g.unanswered_rate) == (2, 2, 1.0)
    assert reports.slowest_turns([row(0, None, "no-words"), row(1, 3.0, "hangup")]) == []
    (g,) = reports.stage_groups([row(0, 0.4), row(1, None, "error"), row(2, 0.6)])
    assert (g.stages["voice_to_voice"].n, g.stages["voice_to_voice"].p50) == (2, 0.5)
    assert g.unanswered_reasons == {"error": 1}
