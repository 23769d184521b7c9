"""A turn the caller never heard an answer to is recorded, with why (fake stages, real time)."""

from __future__ import annotations

import pytest
from fakes import FakeASR, FakeLLM, fake_stages, tone
from test_session import close, make

from db.records import CallEnded, EventRecord, TurnRecord
from tests.waiting import wait_until

pytestmark = pytest.mark.unit


def test_speech_with_no_words_is_an_unanswered_turn():
    session, line, calllog, _ = make(fake_stages(asr=FakeASR([""])))
    assert wait_until(lambda: session.state == "listening")
    line.say(tone(0.6))
    assert wait_until(lambda: calllog.of(TurnRecord))
    (turn,) = calllog.of(TurnRecord)
    assert (turn.unanswered, turn.transcript, turn.voice_to_voice_s) == ("no-words", "", None)
    close(session, line)


def test_a_turn_cut_by_the_callers_hangup_is_recorded_as_hangup():
    llm = FakeLLM(hang=True)  # still thinking when the caller hangs up
    session, line, calllog, _ = make(fake_stages(asr=FakeASR(["are you open?"]), llm=llm))
    assert wait_until(lambda: session.state == "listening")
    line.say(tone(0.6))
    assert wait_until(lambda: session.state == "thinking")
    session.disconnected(by_local=False)
    llm.release.set()
    assert session.join(5.0)
    line.stop()
    (turn,) = calllog.of(TurnRecord)
    assert (turn.unanswered, turn.transcript) == ("hangup", "are you open?")
    assert calllog.of(CallEnded)[0].turns == 1


def test_a_failing_stage_is_an_unanswered_turn_with_reason_error():
    llm = FakeLLM(fail_with=RuntimeError("model crashed"))
    session, line, calllog, _ = make(fake_stages(llm=llm))
    assert wait_until(lambda: session.state == "listening")
    line.say(tone(0.6))
    assert wait_until(lambda: calllog.of(TurnRecord))
    assert calllog.of(TurnRecord)[0].unanswered == "error"
    close(session, line)


def test_an_answered_turn_has_no_reason():
    session, line, calllog, _ = make(fake_stages(asr=FakeASR(["hello"])))
    assert wait_until(lambda: session.state == "listening")
    line.say(tone(0.6))
    assert wait_until(lambda: calllog.of(TurnRecord))
    (turn,) = calllog.of(TurnRecord)
    assert turn.unanswered == "" and turn.voice_to_voice_s is not None
    close(session, line)


def test_a_late_answer_gets_one_moment_once_and_v2v_still_counts_to_the_answer():
    # The LLM takes 2 s before its first token: past filler_after_s, the caller hears the
    # filler (once), then the answer; voice-to-voice is measured to the answer, not the filler.
    llm = FakeLLM("Ten.", delay_s=2.0)
    session, line, calllog, _ = make(
        fake_stages(asr=FakeASR(["when do you open?"]), llm=llm),
        limits={"max_call_s": 60, "max_silence_s": 30, "filler_after_s": 0.8})
    assert wait_until(lambda: session.state == "listening")
    line.say(tone(0.6))
    assert wait_until(lambda: calllog.of(TurnRecord), timeout=10)
    fillers = [e for e in calllog.of(EventRecord) if e.kind == "filler"]
    assert len(fillers) == 1
    (turn,) = calllog.of(TurnRecord)
    assert turn.unanswered == "" and turn.voice_to_voice_s > 2.0
    close(session, line)


def test_the_filler_is_heard_while_the_late_answer_holds_the_cpu():
    # The answer's first LLM step holds the scheduler's slot (a loaded agent): the filler was
    # rendered before the call, so the session says it without waiting for that slot.
    llm = FakeLLM("Ten.", hang=True)
    session, line, calllog, _ = make(
        fake_stages(asr=FakeASR(["when do you open?"]), llm=llm),
        limits={"max_call_s": 60, "max_silence_s": 30, "filler_after_s": 0.5})
    assert wait_until(lambda: session.state == "listening")
    line.say(tone(0.6))
    try:
        assert wait_until(lambda: [e for e in calllog.of(EventRecord) if e.kind == "filler"],
                          timeout=5)
        assert session.state == "thinking" and not calllog.of(TurnRecord)
    finally:
        llm.release.set()
    assert wait_until(lambda: calllog.of(TurnRecord))
    assert calllog.of(TurnRecord)[0].reply_text == "Ten."
    close(session, line)
