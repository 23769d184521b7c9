"""Answering-machine detection on spoken greetings through the line, with Silero and tiny.en."""

from __future__ import annotations

import pytest

from bench.amd import Sample, callee_audio, detect
from dialplan.options import ASROptions
from testkit.samples import spoken

pytestmark = [pytest.mark.model, pytest.mark.tool, pytest.mark.needs("espeak-ng")]


@pytest.fixture(scope="module")
def heard(stage_cache):
    return stage_cache.models.vad(), stage_cache.models.asr(ASROptions(model="tiny.en"))


@pytest.mark.parametrize(("text", "beep", "result"), [
    ("Hello?", None, "human"),
    ("Yeah, who's calling?", None, "human"),
    ("Please leave a message after the tone.", 1000, "machine"),
    ("Sorry, I am not available right now. Please leave a message.", None, "machine"),
])
def test_spoken_greetings_through_the_line_are_told_apart(heard, text, beep, result):
    vad, asr = heard
    s = Sample(text, "espeak:en-us", result == "machine", beep)
    audio, rate = spoken(text, wpm=165)
    detect(s, callee_audio(s, audio, rate), vad, asr, max_s=4.0)
    assert s.result == result, s.why
    assert s.at_s <= 4.0
    if beep is not None:
        assert s.message_s is not None and s.message_s >= s.beep_end_s
