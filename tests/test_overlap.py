"""Caller speech that overlaps the agent's audio, through :func:`agent.simulate.simulate`.

Fake stages (a tone is speech, FakeTTS speaks 50 ms per character) on the virtual clock, so
each case is a whole call in a second or two. The rule under test: speech that goes on after
the agent fell silent is the caller's and is answered; speech entirely under the agent's
audio (echo, a backchannel) is not answered but is recorded with its reason.
"""

from __future__ import annotations

import pytest
from fakes import FakeASR, fake_stages, silence, tone

from agent.simulate import simulate
from agent.turn.runner import TurnRunner
from db.records import EventRecord
from dialplan import parse_config
from models.audio import pcm16_to_float

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
