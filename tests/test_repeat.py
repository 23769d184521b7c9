"""A transcript that is a guess gets "could you say it again?", not an answer, and a record."""

from __future__ import annotations

import numpy as np
import pytest

from agent.simulate import simulate
from db.records import EventRecord
from dialplan import parse_config
from testkit.samples import spoken

pytestmark = [pytest.mark.model, pytest.mark.tool]  # espeak-ng says the questions

SYSTEM = "You are the phone assistant of a public library. Answer in one short sentence."


@pytest.fixture(scope="module")
def profile():
    return parse_config({"system_prompt": SYSTEM,
                         "profiles": {"p": {"asr": {"model": "base"},
                                            "llm": {"model": "smollm2-135m", "max_tokens": 20}}},
                         "dialplan": {"1": "p"}}).profiles["p"]


def test_babble_is_asked_again_and_logged(stage_cache, profile):
    # Speech sounds with no words in them: a sentence played backwards (base: avg log-prob
    # -1.34 on the line, against -0.2..-0.83 for real questions).
    audio, rate = spoken("The quick brown fox jumps over the lazy dog near the river bank")
    call = simulate(audio[::-1].copy(), rate, profile, stage_cache.stages(profile), fast=True,
                    greeting=False)
    (turn,) = call.turns
    assert turn.reply_text == profile.repeat and turn.unanswered == ""
    asked = [e for e in call.records if isinstance(e, EventRecord) and e.kind == "asked-to-repeat"]
    assert len(asked) == 1 and "low-confidence" in asked[0].detail
    assert np.abs(call.reply_audio).max() > 1000  # the phrase was spoken


def test_a_clear_question_is_answered(stage_cache, profile):
    call = simulate(*spoken("What time does the library open on Saturday?"), profile,
                    stage_cache.stages(profile), fast=True, greeting=False)
    (turn,) = call.turns
    assert turn.reply_text and turn.reply_text != profile.repeat
