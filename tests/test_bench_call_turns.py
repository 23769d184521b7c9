"""What `bench call --turns N` reads: each question of a call on the wire and in the call log.

The caller's stream is laid out so every call's questions end at the same offsets; each
question's end on the wire is its last speech packet in that question's window, its reply the
agent's first speech after it and before the next question ends. Synthetic packets at known
times stand for the capture.
"""

from __future__ import annotations

import pytest

from bench.call_conversations import CONVERSATIONS, MAX_TURNS
from bench.call_turns import (
    FIRST,
    FOLLOW_UP,
    Layout,
    LogTurn,
    WireTurn,
    lay_out,
    log_turns,
    match_log_turns,
    question_ends,
    speech_bursts,
    turn_stats,
    turns_rows,
    wire_turns,
)
from testkit.wire import RtpPacket, WireCall

SPEECH = bytes([0x20, 0xA0] * 80)  # loud μ-law samples
ZERO = bytes([0xFF] * 160)
CALLER_PORT, AGENT_PORT = 40000, 21000


def line(t0: float, until: float, speech: list[tuple[float, float]], src: int, dst: int,
         ) -> list[RtpPacket]:
    """20 ms packets from ``t0`` to ``until`` (s), speech inside the ``speech`` spans."""
    out, i = [], 0
    while (at := t0 + i * 0.02) < until:
        loud = any(a <= at <= b for a, b in speech)
        out.append(RtpPacket(at, src, dst, 0, i & 0xFFFF, SPEECH if loud else ZERO))
        i += 1
    return out


def call(t0: float, asked: list[tuple[float, float]], said: list[tuple[float, float]],
         until: float = 40.0) -> WireCall:
    """A call on the wire: caller speech ``asked``, agent speech ``said`` (s from ``t0``)."""
    shift = [(t0 + a, t0 + b) for a, b in asked], [(t0 + a, t0 + b) for a, b in said]
    return WireCall(line(t0, t0 + until, shift[0], CALLER_PORT, AGENT_PORT),
                    line(t0 + 0.01, t0 + until, shift[1], AGENT_PORT, CALLER_PORT))


# Three questions ending at 5, 14 and 23 s of the stream, as lay_out would place them.
LAYOUT = Layout((5.0, 14.0, 23.0), 40.0)
# Each question but the second in two words (a short pause inside); the greeting at 0.5-1.5 s.
# Caller packets are sent at even hundredths of a second, the agent's at odd ones: no packet
# lies on a span's edge. Each question's last speech packet is at 4.98, 13.98 and 22.98 s.
ASKED = [(2.99, 3.91), (4.09, 4.99), (12.39, 13.99), (20.99, 21.81), (21.99, 22.99)]
GREETING = (0.5, 1.5)


@pytest.mark.unit
def test_the_layout_ends_every_calls_questions_at_the_same_offsets():
    # Question k of every call ends where the longest question k ends: one layout reads
    # every call's capture, whichever conversation it carried.
    rate = 8000
    short, long_ = b"\x10" * rate, b"\x20" * (2 * rate)  # 1 s and 2 s of "speech"
    layout, (a, b) = lay_out([[long_, short], [short, long_]], gap_s=7.0, hold_s=10.0,
                             lead_s=3.0)
    assert layout.ends_s == (5.0, 14.0)  # 3 + 2; 5 + 7 + 2 (the second slot is 2 s too)
    assert layout.duration_s == 24.0 and layout.call_ms == 24000 and layout.turns == 2
    assert len(a) == len(b) == 24 * rate
    # The first call: its 2 s question fills 3-5 s, its 1 s one 13-14 s; silence elsewhere.
    assert a[3 * rate:5 * rate] == long_ and a[13 * rate:14 * rate] == short
    assert set(a[:3 * rate]) == set(a[5 * rate:13 * rate]) == set(a[14 * rate:]) == {0xFF}
    # The second: the short one ends at 5 s (starts late), the long one ends at 14 s.
    assert b[4 * rate:5 * rate] == short and b[12 * rate:14 * rate] == long_
    assert set(b[:4 * rate]) == set(b[5 * rate:12 * rate]) == {0xFF}
    with pytest.raises(ValueError):
        lay_out([[short], [short, short]], 7.0, 10.0)


@pytest.mark.unit
def test_each_conversation_has_its_follow_ups():
    assert len(CONVERSATIONS) == 8 and MAX_TURNS == 3
    assert len({c[0] for c in CONVERSATIONS}) == 8  # no two calls ask the same first question


@pytest.mark.unit
def test_each_question_is_answered_by_the_next_agent_speech():
    t0 = 100.0
    replies = [(5.8, 7.5), (14.9, 16.0), (24.2, 26.0)]
    turns = wire_turns(call(t0, ASKED, [GREETING, *replies]), LAYOUT)
    assert [round(t.asked_at - t0, 2) for t in turns] == [4.98, 13.98, 22.98]
    assert [round(t.v2v_s, 2) for t in turns] == [0.83, 0.93, 1.23]
    assert [len(t.replies) for t in turns] == [1, 1, 1]  # the greeting is no reply


@pytest.mark.unit
def test_a_question_with_no_reply_is_unanswered_not_the_next_ones():
    t0 = 7.0
    # No reply to question 2: the agent's next speech, after question 3, is question 3's.
    turns = wire_turns(call(t0, ASKED, [GREETING, (6.0, 7.0), (24.0, 25.0)]), LAYOUT)
    assert [None if t.v2v_s is None else round(t.v2v_s, 2) for t in turns] == [1.03, None, 1.03]
    assert turns[1].asked_at is not None and turns[1].replies == []
    # A reply late enough to start during the next question is still the earlier one's.
    late = wire_turns(call(t0, ASKED, [(13.0, 13.5), (24.0, 25.0)]), LAYOUT)
    assert [None if t.v2v_s is None else round(t.v2v_s, 2) for t in late] == [8.03, None, 1.03]


@pytest.mark.unit
def test_a_question_the_caller_never_said_is_not_measured():
    turns = wire_turns(call(0.0, ASKED[:3], [(6.0, 7.0), (15.0, 16.0)]), LAYOUT)
    assert turns[2] == WireTurn(None, None)
    assert question_ends([], 3, LAYOUT) == [None, None, None]


@pytest.mark.unit
def test_without_a_layout_the_callers_bursts_are_its_questions():
    assert speech_bursts([(0.0, 1.0), (1.5, 2.0), (4.0, 5.0)]) == [(0.0, 2.0), (4.0, 5.0)]
    c = call(0.0, ASKED, [])
    assert [round(e, 2) for e in question_ends(c.caller, 3)] == [4.98, 13.98, 22.98]
    # Two bursts for three questions: which is which cannot be told, so none is measured.
    assert question_ends(call(0.0, ASKED[:3], []).caller, 3) == [None, None, None]


@pytest.mark.unit
def test_a_one_question_call_reads_as_before():
    c = call(0.0, [(3.0, 5.0)], [GREETING, (6.0, 8.0), (9.0, 10.0)])
    (turn,) = wire_turns(c, None)
    assert turn.v2v_s == c.voice_to_voice_s() and turn.replies == c.reply_runs()


@pytest.mark.unit
def test_logged_turns_are_matched_by_index_or_else_by_speech_end():
    rows = [LogTurn(2, 23.1, 1.0), LogTurn(0, 5.1, 0.9), LogTurn(1, 14.2, 1.1)]
    assert [t.index for t in match_log_turns(rows, LAYOUT)] == [0, 1, 2]
    # A noise taken for a turn (index 1, at 9 s) and question 3 not logged: by speech end.
    rows = [LogTurn(0, 5.1, 0.9), LogTurn(1, 9.0, None, "no-words"), LogTurn(2, 14.2, 1.1)]
    matched = match_log_turns(rows, LAYOUT)
    assert [None if t is None else t.index for t in matched] == [0, 2, None]
    fewer = match_log_turns([LogTurn(0, 5.1, 0.9), LogTurn(1, 23.0, 1.0)], LAYOUT)
    assert [None if t is None else t.index for t in fewer] == [0, None, 1]


@pytest.mark.unit
def test_a_rounds_turns_are_reported_first_and_follow_up_apart():
    wire = [[WireTurn(5.0, 1.0), WireTurn(14.0, 1.2), WireTurn(23.0, None)],
            [WireTurn(5.0, 2.0), WireTurn(14.0, 1.6), WireTurn(None, None)]]
    logged = [[LogTurn(0, 5.0, 0.8), LogTurn(1, 14.0, 1.0), LogTurn(2, 23.0, None, "error")],
              [LogTurn(0, 5.0, 1.8), LogTurn(1, 14.0, 1.4)]]
    s = turn_stats(wire, logged, LAYOUT)
    assert s.wire_ms == {FIRST: [1000.0, 2000.0], FOLLOW_UP: [1200.0, 1600.0]}
    assert s.asked == {FIRST: 2, FOLLOW_UP: 3} and s.unanswered == {FIRST: 0, FOLLOW_UP: 1}
    assert s.agent_ms[FIRST] == [800.0, 1800.0]
    assert s.log_unanswered == {FIRST: {}, FOLLOW_UP: {"error": 1, "not logged": 1}}
    first, follow, ratio = turns_rows("1 serve", 2, s, baseline_s=1.0)
    assert first[2:8] == (FIRST, "2/2", "1500", "1950", "1.50x", "1300")
    assert follow[2:5] == (FOLLOW_UP, "2/3", "1400") and follow[9:] == ("1/3",
                                                                         "error 1, not logged 1")
    assert ratio[2] == "follow-up / first" and ratio[4] == "0.93x" and ratio[7] == "0.92x"


@pytest.mark.unit
def test_logged_turns_are_read_from_the_real_call_log(tmp_path):
    from db.records import CallStarted, TurnRecord
    from tests.db_fixtures import T0, write_records

    db = tmp_path / "calls.db"
    records = [CallStarted(call_id=c, started_at=T0) for c in ("earlier", "a")]
    records += [TurnRecord("earlier", 0, speech_end_s=5.0, voice_to_voice_s=3.0),
                TurnRecord("a", 1, speech_end_s=14.0, voice_to_voice_s=1.1),
                TurnRecord("a", 0, speech_end_s=5.0, unanswered="no-words")]
    write_records(f"sqlite:///{db}", records, tmp_path / "spool")
    got = log_turns(db, {"a"})
    assert sorted(got["a"], key=lambda t: t.index) == [LogTurn(0, 5.0, None, "no-words"),
                                                       LogTurn(1, 14.0, 1.1, "")]


@pytest.mark.tool  # espeak-ng and sox, no model
@pytest.mark.needs("espeak-ng", "sox")
def test_the_spoken_questions_end_where_the_layout_says(tmp_path):
    # The streams as sipp sends them (160 bytes every 20 ms) and read with the wire's own
    # detector: each question ends just before its layout end (espeak-ng's own trailing
    # silence), in each voice, well inside its window.
    from bench.call_turns import WINDOW_SLACK_S, conversation_audio

    layout, paths = conversation_audio(3, 3, tmp_path, gap_s=7.0, hold_s=2.0,
                                       voices=("en-us", "en"))
    assert len(paths) == 3 and layout.turns == 3
    assert layout.ends_s[1] - layout.ends_s[0] > 7.0
    for path in paths:
        stream = path.read_bytes()
        assert len(stream) == round(layout.duration_s * 8000)
        sent = [RtpPacket(50.0 + i * 0.02, CALLER_PORT, AGENT_PORT, 0, i,
                          stream[i * 160:(i + 1) * 160]) for i in range(len(stream) // 160)]
        for end, at in zip(layout.ends_s, question_ends(sent, 3, layout), strict=True):
            assert at is not None and -0.6 < at - 50.0 - end <= 0.02 < WINDOW_SLACK_S
