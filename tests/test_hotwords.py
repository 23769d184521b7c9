"""``asr.hotwords`` reach faster-whisper and change how a made-up name is heard on the line."""

from __future__ import annotations

import pytest

from dialplan import parse_config
from models.audio import ASR_RATE, PHONE_RATE, pcm16_to_float, resample, through_phone_line
from testkit.samples import spoken

QUESTION = "Can I speak to Doctor Quiblerton about my appointment?"


def asr_with(stage_cache, hotwords: list[str]):
    config = parse_config({"asr": {"model": "base", "hotwords": hotwords},
                           "profiles": {"p": {}}, "dialplan": {"1": "p"}})
    return stage_cache.models.asr(config.profiles["p"].asr)


@pytest.mark.model
@pytest.mark.tool
def test_a_hotword_makes_a_made_up_name_heard(stage_cache):
    audio = resample(pcm16_to_float(through_phone_line(*spoken(QUESTION))), PHONE_RATE,
                     ASR_RATE)
    plain = asr_with(stage_cache, []).transcribe(audio).text
    biased = asr_with(stage_cache, ["Quiblerton"]).transcribe(audio).text
    assert "quiblerton" not in plain.lower(), plain  # base alone mishears the name
    assert "quiblerton" in biased.lower(), biased


@pytest.mark.unit
def test_hotwords_are_a_list_of_strings_in_config():
    with pytest.raises(Exception, match="asr.hotwords"):
        parse_config({"asr": {"hotwords": "Quiblerton"}, "profiles": {"p": {}},
                      "dialplan": {"1": "p"}})
