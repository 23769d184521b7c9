"""CallSession state machine, turn-taking, barge-in and limits, on fake stages in real time.

The line is :class:`fakes.FakeCall` (a 20 ms clock thread); the stages are fakes whose
output is scripted, so these tests check the session's decisions and timing, not the models.
"""

from __future__ import annotations

import threading
import time

import pytest
from fakes import FakeASR, FakeCall, FakeLLM, FakeTTS, ListLog, fake_stages, silence, tone

from agent.call.session import CallSession
from agent.turn.load import LoadPolicy
from agent.turn.runner import TurnRunner
from db.records import CallEnded, CallStarted, EventRecord, TurnRecord
from dialplan import parse_config
from models.priority import Priority, priority
from tests.waiting import wait_until

pytestmark = pytest.mark.unit

# The VAD hangover ends these turns (the words rule, on by default, is tested on its own).
AUDIO = {"endpoint_silence_s": 0.3, "pause_tolerance_s": 0.7, "max_endpoint_wait_s": 1.0,
         "min_speech_s": 0.1, "barge_in_min_s": 0.2, "barge_in_echo_ratio": 0.5,
         "end_of_turn_words": False}


def make(stages=None, limits=None, greeting="Hi.", load=None, **audio):
    profile = parse_config({
        "profiles": {"p": {"greeting": greeting, "goodbye": "Bye now.",
                           "audio": {**AUDIO, **audio},
                           "limits": limits or {"max_call_s": 60, "max_silence_s": 30}}},
        "dialplan": {"1": "p"}}).profiles["p"]
    stages = stages or fake_stages()
    calllog = ListLog()
    hangups = []
    session = CallSession(profile, stages, calllog, hangup=lambda: hangups.append(time.time()),
                          phrase=TurnRunner(stages, profile).prepare_phrases(), load=load)
    line = FakeCall(session.link)
    session.start()
    line.start()
    session.media_active("PCMU")
    return session, line, calllog, hangups


def close(session, line):
    session.disconnected(by_local=False)
    assert session.join(5.0)
    line.stop()


def states(session):
    return [c.new for c in session.states]


def test_one_turn_transcript_reply_and_timeline():
    stages = fake_stages(asr=FakeASR(["what time do you open?"]))
    session, line, calllog, _ = make(stages)
    assert wait_until(lambda: session.state == "listening")
    said_at = time.monotonic()
    line.say(tone(1.0))
    assert wait_until(lambda: calllog.of(TurnRecord))
    turn = calllog.of(TurnRecord)[0]
    assert turn.transcript == "what time do you open?"
    assert turn.reply_text == "The library opens at ten."
    # Endpoint waits the 300 ms hangover; all stage stamps are present and add up.
    assert 0.25 <= turn.endpoint_s <= 0.6
    parts = [turn.endpoint_s, turn.asr_s, turn.llm_ttft_s, turn.first_chunk_s,
             turn.tts_first_audio_s, turn.playout_s]
    assert turn.voice_to_voice_s == pytest.approx(sum(parts), abs=1e-5)
    assert wait_until(lambda: session.state == "listening" and len(session.states) >= 5)
    assert states(session)[:5] == ["greeting", "listening", "thinking", "speaking", "listening"]
    # The reply really went out on the line after the caller's speech, as long as TTS made it.
    reply = [s for s in line.speech_spans() if s[0] > said_at + 1.0]
    assert reply, "no reply audio on the line"
    spoken = sum(e - s for s, e in reply)
    assert spoken == pytest.approx(len("The library opens at ten.") * 0.05, abs=0.25)
    close(session, line)
    ended = calllog.of(CallEnded)[0]
    assert (ended.end_reason, ended.turns, ended.codec) == ("caller-bye", 1, "PCMU")
    assert calllog.of(CallStarted)[0].call_id == session.call_id


def test_barge_in_stops_reply_within_200ms():
    long_reply = " ".join(["word"] * 60)  # ~15 s of fake speech
    stages = fake_stages(llm=FakeLLM(long_reply))
    session, line, calllog, _ = make(stages)
    assert wait_until(lambda: session.state == "listening")
    line.say(tone(0.8))
    assert wait_until(lambda: session.state == "speaking")
    time.sleep(1.0)
    interrupt_at = time.monotonic()
    line.say(tone(1.0, level=0.6))
    assert wait_until(lambda: any(e.kind == "barge-in" for e in calllog.of(EventRecord)))
    time.sleep(0.5)
    loud_after = [s for s in line.speech_spans() if s[1] > interrupt_at]
    stopped_at = max(e for _, e in loud_after)
    # Detection needs barge_in_min_s of speech (+ one 32 ms VAD chunk); then <= 200 ms.
    assert stopped_at - interrupt_at <= (200 + 32 + 200) / 1000
    assert session.barge_ins == 1
    assert wait_until(lambda: len(calllog.of(TurnRecord)) >= 1)
    assert calllog.of(TurnRecord)[0].barge_in is True
    close(session, line)


def test_echo_level_speech_does_not_barge_in():
    stages = fake_stages(llm=FakeLLM("one two three four five six seven eight nine ten"))
    session, line, calllog, _ = make(stages)
    assert wait_until(lambda: session.state == "listening")
    line.say(tone(0.8))
    assert wait_until(lambda: session.state == "speaking")
    line.say(tone(1.5, level=0.05))  # speech-like, but far below the agent's own level
    assert wait_until(lambda: session.state == "listening", timeout=10)
    assert session.barge_ins == 0
    assert not [e for e in calllog.of(EventRecord) if e.kind == "barge-in"]
    close(session, line)


def test_mid_sentence_pause_is_one_turn():
    asr = FakeASR(["I want to book uh", "I want to book uh a table for two."])
    llm = FakeLLM("Sure.")
    session, line, calllog, _ = make(fake_stages(asr=asr, llm=llm))
    assert wait_until(lambda: session.state == "listening")
    line.say(tone(0.8))
    line.say(silence(0.5))  # longer than the 300 ms hangover, shorter than the tolerance
    line.say(tone(0.8))
    assert wait_until(lambda: calllog.of(TurnRecord))
    time.sleep(0.5)
    turns = calllog.of(TurnRecord)
    assert [t.transcript for t in turns] == ["I want to book uh a table for two."]
    # The first half may have been answered speculatively, but nothing of it was heard or kept.
    assert llm.prompts[-1][-1].content == "I want to book uh a table for two."
    assert [m.content for m in session.history] == ["I want to book uh a table for two.",
                                                    "Sure."]
    assert asr.heard_s[-1] >= 1.5  # the merged utterance holds both halves
    close(session, line)


def test_unfinished_utterance_waits_at_most_max_endpoint_wait():
    asr = FakeASR(["so I was wondering if"])
    session, line, calllog, _ = make(fake_stages(asr=asr))
    assert wait_until(lambda: session.state == "listening")
    line.say(tone(0.8))
    assert wait_until(lambda: calllog.of(TurnRecord))
    turn = calllog.of(TurnRecord)[0]
    # Held for the pause tolerance (700 ms after speech end), never past the 1000 ms cap.
    assert 0.6 <= turn.endpoint_s <= 1.0 + 0.06
    close(session, line)


def test_silence_limit_says_goodbye_and_hangs_up():
    session, line, calllog, hangups = make(limits={"max_call_s": 60, "max_silence_s": 1.0})
    assert wait_until(lambda: hangups, timeout=6)
    assert "speaking" in states(session)  # the goodbye was played before hanging up
    bye = [s for s in line.speech_spans() if s[1] - s[0] > 0.1]
    assert len(bye) >= 2  # greeting, then goodbye
    session.disconnected(by_local=True)
    assert session.join(5)
    line.stop()
    assert calllog.of(CallEnded)[0].end_reason == "silence"


def test_caller_hangs_up_mid_reply_closes_session_without_leaks():
    before = {t.name for t in threading.enumerate()}
    stages = fake_stages(llm=FakeLLM(" ".join(["word"] * 60)))
    session, line, calllog, _ = make(stages)
    assert wait_until(lambda: session.state == "listening")
    line.say(tone(0.8))
    assert wait_until(lambda: session.state == "speaking")
    session.disconnected(by_local=False)
    assert session.join(3.0)
    line.stop()
    assert session.state == "ended"
    assert calllog.of(CallEnded)[0].end_reason == "caller-bye"
    assert not session.playout.busy
    time.sleep(0.2)
    leaked = {t.name for t in threading.enumerate() if t.is_alive()} - before
    assert not [n for n in leaked if n.startswith(("call-", "turn-", "llm-stream"))], leaked


def test_dtmf_is_logged():
    session, line, calllog, _ = make()
    session.dtmf("5")
    assert wait_until(lambda: [e for e in calllog.of(EventRecord) if e.kind == "dtmf"])
    assert [e.detail for e in calllog.of(EventRecord) if e.kind == "dtmf"] == ["5"]
    close(session, line)


def test_stage_error_is_recorded_and_call_goes_on():
    stages = fake_stages(asr=FakeASR(fail_with=RuntimeError("asr down")), tts=FakeTTS())
    session, line, calllog, _ = make(stages)
    assert wait_until(lambda: session.state == "listening")
    line.say(tone(0.8))
    assert wait_until(lambda: [e for e in calllog.of(EventRecord) if e.kind == "error"])
    assert "asr down" in [e for e in calllog.of(EventRecord) if e.kind == "error"][0].detail
    assert wait_until(lambda: session.state == "listening")
    close(session, line)
    assert calllog.of(CallEnded)[0].end_reason == "caller-bye"


def test_speculative_turn_hides_asr_behind_the_hangover():
    # Speculation at 200 ms of silence: ASR (150 ms) runs in the rest of the 500 ms hangover.
    asr = FakeASR(["what time do you open?"], delay_s=0.15)
    session, line, calllog, _ = make(fake_stages(asr=asr), speculate_s=0.2,
                                     endpoint_silence_s=0.5)
    assert wait_until(lambda: session.state == "listening")
    line.say(tone(0.8))
    assert wait_until(lambda: calllog.of(TurnRecord))
    turn = calllog.of(TurnRecord)[0]
    assert turn.asr_s < 0.06, turn  # done before the endpoint: costs the caller nothing
    assert 0.45 <= turn.endpoint_s <= 0.8
    close(session, line)


def test_short_pause_drops_the_speculation_and_keeps_one_utterance():
    asr = FakeASR(["what time", "what time do you open?"])
    session, line, calllog, _ = make(fake_stages(asr=asr), speculate_s=0.2,
                                     endpoint_silence_s=0.5)
    assert wait_until(lambda: session.state == "listening")
    line.say(tone(0.6))
    line.say(silence(0.35))  # past speculate_s, short of the 500 ms hangover
    line.say(tone(0.6))
    assert wait_until(lambda: calllog.of(TurnRecord))
    time.sleep(0.3)
    assert [t.transcript for t in calllog.of(TurnRecord)] == ["what time do you open?"]
    assert asr.heard_s[-1] >= 1.3  # one utterance holding both parts
    assert [m.role for m in session.history] == ["user", "assistant"]
    close(session, line)


def test_a_speculation_still_queued_when_the_caller_goes_on_never_runs():
    """Behind another call's work, the dropped speculation's ASR pass is never computed."""
    asr = FakeASR(["what time do you open?"])
    session, line, calllog, _ = make(fake_stages(asr=asr), speculate_s=0.2,
                                     endpoint_silence_s=0.5)
    assert wait_until(lambda: session.state == "listening")
    busy, held = threading.Event(), threading.Event()

    def other_call():  # another call's first-audio work holds the CPU slot
        with priority(Priority.FIRST_AUDIO), session.jobs.scheduler.job("llm"):
            held.set()
            busy.wait(5)

    other = threading.Thread(target=other_call)
    other.start()
    assert held.wait(5)
    line.say(tone(0.6))
    line.say(silence(0.35))  # the speculation starts and queues for the slot
    line.say(tone(0.6))  # the caller goes on: it is cancelled while it waits
    time.sleep(1.55 + 0.3)  # the line plays in real time; then the VAD confirms the speech
    busy.set()
    other.join(5)
    assert wait_until(lambda: calllog.of(TurnRecord))
    assert [t.transcript for t in calllog.of(TurnRecord)] == ["what time do you open?"]
    assert len(asr.heard_s) == 1 and asr.heard_s[0] >= 1.3, asr.heard_s  # only the whole utterance
    close(session, line)


def test_hold_suspends_the_silence_limit():
    session, line, calllog, hangups = make(limits={"max_call_s": 60, "max_silence_s": 1.0})
    assert wait_until(lambda: session.state == "listening")
    session.hold(True)
    time.sleep(2.0)  # twice the silence limit, on hold
    assert not hangups and session.state == "listening"
    session.hold(False)
    assert wait_until(lambda: hangups, timeout=4)  # counted again from the resume
    assert any(e.kind == "hold" for e in calllog.of(EventRecord))
    session.disconnected(by_local=True)
    assert session.join(5)
    line.stop()
    assert calllog.of(CallEnded)[0].end_reason == "silence"


class _PrefillLLM(FakeLLM):
    can_prefill = True

    def __init__(self):
        super().__init__()
        self.prefilled: list[list] = []

    def prefill(self, messages, cancel):
        self.prefilled.append(list(messages))
        return 5


def test_words_so_far_are_prefilled_while_the_caller_speaks():
    # 2.5 s of speech, prefill_every_s 1.0: the words so far (less the last) reach the LLM
    # twice before the turn, with the call's system prompt, and the turn asks the whole.
    llm = _PrefillLLM()
    asr = FakeASR(["can I", "can I renew a", "can I renew a book?"])
    session, line, calllog, _ = make(fake_stages(asr=asr, llm=llm), prefill_every_s=1.0)
    assert wait_until(lambda: session.state == "listening")
    line.say(tone(2.5))
    assert wait_until(lambda: calllog.of(TurnRecord))
    assert [m[-1].content for m in llm.prefilled if m[-1].content] == ["can", "can I renew"]
    assert all(m[0].role == "system" and m[-1].role == "user" for m in llm.prefilled)
    assert llm.prompts[-1][-1].content == "can I renew a book?"
    close(session, line)


def test_the_history_is_prefilled_when_the_caller_speaks_again():
    # A follow-up too short for its words to be prefilled ("And on Saturday?") still finds
    # the last reply's end and the opening of its message in the cache.
    llm = _PrefillLLM()
    session, line, calllog, _ = make(fake_stages(asr=FakeASR(["when do you open?", "and then?"]),
                                                 llm=llm), prefill_every_s=5.0)
    assert wait_until(lambda: session.state == "listening")
    line.say(tone(1.0))
    assert wait_until(lambda: calllog.of(TurnRecord) and session.state == "listening")
    assert llm.prefilled == []  # the first question: the primed prefix holds all before it
    line.say(tone(1.0))
    assert wait_until(lambda: any(m[-1].content == "" for m in llm.prefilled))
    (history,) = [m for m in llm.prefilled if m[-1].content == ""]
    assert [m.role for m in history] == ["system", "user", "assistant", "user"]
    assert history[1].content == "when do you open?" and history[2].content == llm.reply
    close(session, line)


def test_no_words_are_prefilled_while_another_caller_speaks():
    # Another call's caller is mid-question: their turn will want the CPU within the second,
    # so this caller's words so far are neither transcribed nor prefilled; the turn still is.
    other = _Other()
    llm = _PrefillLLM()
    asr = FakeASR(["can I renew a book?"])
    stages = fake_stages(asr=asr, llm=llm)
    load = LoadPolicy(stages.llm.scheduler)
    load.backlog.join(other)
    load.backlog.speaking(other, True)
    try:
        session, line, calllog, _ = make(stages, prefill_every_s=1.0, load=load)
        assert wait_until(lambda: session.state == "listening")
        line.say(tone(2.5))
        assert wait_until(lambda: calllog.of(TurnRecord))
        assert llm.prefilled == []
        assert len(asr.heard_s) == 1 and asr.heard_s[0] >= 2.5  # the turn's own pass only
        assert calllog.of(TurnRecord)[0].transcript == "can I renew a book?"
        close(session, line)
    finally:
        load.backlog.part(other)


class _Other:
    """Another call, as the process's backlog knows it."""


@pytest.mark.parametrize("another_call_up", [False, True])
def test_a_call_alone_prefills_whatever_waits_the_scheduler_measured(monkeypatch,
                                                                     another_call_up):
    # The first-audio waits a call alone sees are its own reply's jobs queued behind each
    # other; they said "load" and a quarter of a lone caller's questions went unprefilled.
    # With another call up (idle, not speaking) the same waits still hold its words back.
    other = _Other()
    llm = _PrefillLLM()
    so_far = [] if another_call_up else ["can I", "can I renew a"]
    asr = FakeASR([*so_far, "can I renew a book?"])
    stages = fake_stages(asr=asr, llm=llm)
    monkeypatch.setattr(stages.llm.scheduler, "recent_wait", lambda *a, **k: 0.5)
    load = LoadPolicy(stages.llm.scheduler)
    if another_call_up:
        load.backlog.join(other)
    try:
        session, line, calllog, _ = make(stages, prefill_every_s=1.0, load=load)
        assert wait_until(lambda: session.state == "listening")
        line.say(tone(2.5))
        assert wait_until(lambda: calllog.of(TurnRecord))
        prefilled = [m[-1].content for m in llm.prefilled if m[-1].content]
        assert prefilled == ([] if another_call_up else ["can", "can I renew"])
        assert calllog.of(TurnRecord)[0].transcript == "can I renew a book?"
        close(session, line)
    finally:
        load.backlog.part(other)


def test_a_caller_hanging_up_mid_question_drops_their_prefill():
    # A prefill left running would hold an LLM sequence until the CPU is next idle.
    class Blocking(_PrefillLLM):
        def prefill(self, messages, cancel):
            self.cancel = cancel
            cancel.wait(10)
            return 0

    llm = Blocking()
    session, line, _, _ = make(fake_stages(asr=FakeASR(["can I renew"]), llm=llm),
                               prefill_every_s=1.0)
    assert wait_until(lambda: session.state == "listening")
    line.say(tone(3.0))
    assert wait_until(lambda: hasattr(llm, "cancel"))
    close(session, line)
    assert llm.cancel.is_set()
