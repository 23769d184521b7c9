"""A turn's model jobs get the priority of what its caller is waiting for, read when queued."""

import threading

import pytest

from agent.turn.result import TurnResult
from agent.turn.timeline import TurnTimeline
from agent.turn.urgency import HURRY_S, LOW_WATER_S, Urgency
from models.priority import Priority

pytestmark = pytest.mark.unit


def test_a_turn_s_priority_follows_what_the_caller_hears():
    now = [10.0]
    t = TurnTimeline(speech_end_at=9.5)
    result = TurnResult()
    gate = threading.Event()
    u = Urgency(t, result, gate.is_set, lambda: now[0])
    # Speculative until the endpoint opens the gate; the earliest speech end goes first.
    assert u.llm() == u.tts() == (Priority.SPECULATIVE, 9.5)
    gate.set()
    assert u.llm() == u.tts() == (Priority.FIRST_AUDIO, 9.5)
    # The first clause's text exists: its TTS first, the rest of the reply may wait.
    t.first_chunk_text_at = 10.2
    assert (u.tts()[0], u.llm()[0]) == (Priority.FIRST_AUDIO, Priority.PLAYOUT)
    assert not u.short(0.0) and not u.hurry()  # nothing plays yet: nothing can run out
    # Playing: 3 s of audio handed to playout, 1.5 s of it played.
    t.tts_first_audio_at, t.first_frame_out_at, result.audio_out_s = 10.3, 10.4, 3.0
    now[0] = 11.9
    assert u.llm()[0] == u.tts()[0] == Priority.PLAYOUT
    assert not u.hurry()
    # Below the low water the reply is urgent again, but still spoken in sentences...
    now[0] = 10.4 + 3.0 - (LOW_WATER_S + HURRY_S) / 2
    assert u.llm() == u.tts() == (Priority.FIRST_AUDIO, 9.5)
    assert u.short() and not u.hurry()
    # ...and about to run out, cut into phrases.
    now[0] = 10.4 + 3.0 - HURRY_S / 2
    assert u.hurry()
