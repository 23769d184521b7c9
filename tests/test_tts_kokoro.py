"""Kokoro stays available: a profile choosing it speaks replies that survive the phone line.

Piper is the default voice now; Kokoro (Japanese voices speaking English) is still what users
with the official English voices run, so its round trip is checked on its own.
"""

from __future__ import annotations

import numpy as np
import pytest

from agent.bench.scoring import wer
from dialplan import parse_config
from models.asr.base import ASR
from models.audio import ASR_RATE, PHONE_RATE, pcm16_to_float, resample, through_phone_line

pytestmark = pytest.mark.model

REPLY = "The library opens at ten in the morning on Saturday."


def test_a_kokoro_profile_speaks_a_reply_that_round_trips_the_line(stage_cache):
    config = parse_config({"tts": {"backend": "kokoro-onnx"}, "asr": {"model": "tiny.en"},
                           "profiles": {"k": {}}, "dialplan": {"1": "k"}})
    profile = config.profiles["k"]
    assert (profile.tts.model, profile.tts.voice) == ("kokoro-82m-int8", "jf_gongitsune")
    tts = stage_cache.models.tts(profile.tts)
    speech = tts.synthesize(REPLY)
    assert speech.sample_rate == 24000 and speech.metrics.voice == "jf_gongitsune"
    assert 2.0 < len(speech.audio) / speech.sample_rate < 6.0
    pad = np.zeros(int(0.3 * speech.sample_rate), np.float32)
    line = through_phone_line(np.concatenate([pad, speech.audio, pad]), speech.sample_rate)
    asr: ASR = stage_cache.models.asr(profile.asr)
    heard = asr.transcribe(resample(pcm16_to_float(line), PHONE_RATE, ASR_RATE)).text
    assert wer(REPLY, heard) <= 0.10, heard
