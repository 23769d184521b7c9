"""Caller speech that overlaps the agent's audio, through :func:`agent.simulate.simulate`.

Fake stages (a tone is speech, FakeTTS speaks 50 ms per character) on the virtual clock, so
each case is a whole call in a second or two. The rule under test: speech that goes on after
the agent fell silent is the caller's and is answered; speech entirely under the agent's
audio (echo, a backchannel) is not answered but is recorded with its reason.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from fakes import FakeASR, FakeLLM, ListLog, fake_stages, silence, tone

from agent.call.recorder import CallRecorder
from agent.call.state import CallState
from agent.call.turn import Work
from agent.call.turntaking import TurnTaking
from agent.simulate import simulate
from agent.turn.result import TurnResult
from agent.turn.runner import TurnRunner
from db.records import EventRecord
from dialplan import parse_config
from models.audio import pcm16_to_float
from models.metrics import VADMetrics
from models.vad.segmenter import Utterance

pytestmark = pytest.mark.unit

GREETING = "Hello and welcome to the library."  # 33 characters: 1.65 s of FakeTTS tone


def profile(**audio):
    return parse_config({
        "profiles": {"p": {"greeting": GREETING, "audio": {
            "endpoint_silence_s": 0.3, "min_speech_s": 0.1, **audio}}},
        "dialplan": {"1": "p"}}).profiles["p"]


def run(pcm, prof, stages, **kw):
    return simulate(pcm16_to_float(pcm), 8000, prof, stages, fast=True, **kw)


def events(call, kind):
    return [r for r in call.records if isinstance(r, EventRecord) and r.kind == kind]


def greeting_s(prof, stages) -> float:
    return len(TurnRunner(stages, prof).speak(GREETING)) / 8000


def test_speech_starting_over_the_greeting_and_going_on_is_answered():
    # Too quiet to barge in (barge_in_min_s is out of reach), so only the overlap rule applies.
    prof = profile(barge_in_min_s=60.0)
    stages = fake_stages(asr=FakeASR(["what time do you open?"]))
    lead = greeting_s(prof, stages) - 0.5
    call = run(_cat(silence(lead), tone(1.5, level=0.1)), prof, stages)
    assert [t.transcript for t in call.turns] == ["what time do you open?"]
    assert not events(call, "speech-ignored")
    assert not events(call, "barge-in")


def test_speech_entirely_under_the_greeting_is_recorded_not_answered():
    prof = profile(barge_in_min_s=60.0)
    stages = fake_stages(asr=FakeASR(["uh huh"]))
    call = run(_cat(silence(0.3), tone(0.6, level=0.1)), prof, stages)
    assert call.turns == []
    (ignored,) = events(call, "speech-ignored")
    assert ignored.detail.startswith("during-reply")


def test_loud_speech_over_the_greeting_barges_in_and_is_answered():
    prof = profile(barge_in_min_s=0.2)
    stages = fake_stages(asr=FakeASR(["sorry, when do you open?"]))
    call = run(_cat(silence(0.3), tone(1.2, level=0.6)), prof, stages)
    assert len(events(call, "barge-in")) == 1
    assert [t.transcript for t in call.turns] == ["sorry, when do you open?"]


def test_the_agents_own_echo_is_neither_a_barge_in_nor_a_turn():
    prof = profile(barge_in_min_s=0.2)
    stages = fake_stages(asr=FakeASR(["hello and welcome"]))
    call = run(silence(0.5), prof, stages, echo_gain=0.3)
    assert not events(call, "barge-in")
    assert call.turns == []
    assert call.end_reason == "caller-bye"


def _cat(*parts):
    import numpy as np

    return np.concatenate(parts)


def test_a_reply_begun_over_the_rest_of_the_callers_turn_is_merged_not_recorded_twice():
    """One turn is recorded when a reply began over the rest of the caller's turn.

    The endpoint took a mid-thought pause for the end; the short reply was done (its record
    queued) before the caller's resumed speech was confirmed. On a loaded SIP line this race
    once recorded both the cut turn and the merged one.
    """
    state = CallState(now=lambda: 0.0, on_change=lambda change: None, state="listening")
    worker = SimpleNamespace(history=[], start=lambda turn, call_id: None,
                             cancel=lambda turn: turn.cancel.set(),
                             open_gate=lambda turn: turn.gate.open(),
                             prefill=lambda audio, call_id: None)
    rec = CallRecorder(ListLog(), "c")
    tt = TurnTaking("c", profile().audio, worker, rec, state)

    def utt(start_s, end_s):
        vad = VADMetrics("v", 0.0, 0.0, 0.0, 0)
        return Utterance(np.zeros(int((end_s - start_s) * 16000), np.float32), start_s, end_s,
                         end_s + 0.3, vad)

    tt.speech_started(0.0)
    tt.utterance(utt(0.0, 1.0), 1.0, 1.3, closing=False)
    first = tt.turn
    first.transcript = "I would like a room."
    tt.transcribed(first, 1.31)
    assert first.gate_open
    first.audible, first.timeline.first_frame_out_at = True, 1.35
    tt.reply_audio(first)
    first.result = TurnResult(transcript=first.transcript, reply_text="Sure.")
    first.work_to(Work.FINISHED)  # what the worker does before it posts TurnDone
    assert tt.turn_done(first) == "" and rec.pending == [first]
    # The caller had gone on at 1.25 s, before the reply reached the line at 1.35 s.
    assert tt.speech_started(1.25) is True
    assert rec.pending == [] and tt.held is first and state.state == "listening"
    tt.utterance(utt(1.25, 2.5), 2.5, 2.8, closing=False)
    merged = tt.turn
    assert merged.merged_from is first and merged.utterance.start_s == 0.0
    merged.transcript = "I would like a room for two on Saturday."
    tt.transcribed(merged, 2.81)
    merged.result = TurnResult(transcript=merged.transcript)
    merged.work_to(Work.FINISHED)
    tt.turn_done(merged)
    assert rec.pending == [merged]


@pytest.mark.parametrize("pause_s, merged", [(0.4, True), (0.8, True), (1.5, False)])
def test_speech_just_after_a_reply_began_goes_on_the_turn_later_speech_barges_in(pause_s, merged):
    # The words ended the turn at a mid-thought pause; the caller goes on, loud. Within
    # RESUMED_GRACE_S of the reply's start that is the same turn (too soon to be an answer to
    # the reply): merged, one answer. Later it is a barge-in on the reply.
    prof = profile(barge_in_min_s=0.2)
    asr = FakeASR(["I want to book a room.", "I want to book a room for two on Saturday."])
    stages = fake_stages(asr=asr, llm=FakeLLM(" ".join(["word"] * 40)))
    call = run(_cat(tone(0.8), silence(pause_s), tone(1.0, level=0.6)), prof, stages,
               greeting=False)
    if merged:
        assert not events(call, "barge-in")
        assert [(t.transcript, t.barge_in) for t in call.turns] == [
            ("I want to book a room for two on Saturday.", False)]
    else:
        assert len(events(call, "barge-in")) == 1
        assert call.turns[0].barge_in and len(call.turns) == 2
