"""Kokoro speaks in its own English voices, and hibari stands in for af_heart where speed counts.

The default profile speaks Kokoro's af_heart (voices from the npm package kokoro-js, phonemes
from misaki's G2P); its replies must survive the phone line. hibari, the small imitation of
af_heart, speaks the first clause of a reply (``tts.lead``) and every clause under load.
"""

from __future__ import annotations

import io
import tarfile

import numpy as np
import pytest

from bench.scoring import wer
from dialplan import parse_config
from dialplan.options import TTSOptions
from models.asr.base import ASR
from models.audio import ASR_RATE, PHONE_RATE, pcm16_to_float, resample, through_phone_line
from models.errors import ModelMissingError
from models.tts import kokoro_voices

REPLY = "The library opens at ten in the morning on Saturday."


def heard_on_the_line(stage_cache, speech, asr_options) -> str:
    pad = np.zeros(int(0.3 * speech.sample_rate), np.float32)
    line = through_phone_line(np.concatenate([pad, speech.audio, pad]), speech.sample_rate)
    asr: ASR = stage_cache.models.asr(asr_options)
    return asr.transcribe(resample(pcm16_to_float(line), PHONE_RATE, ASR_RATE)).text


@pytest.mark.model
@pytest.mark.parametrize("voice", ["af_heart", "bf_emma", "am_michael"])
def test_kokoro_english_voices_speak_a_reply_that_round_trips_the_line(stage_cache, voice):
    config = parse_config({"tts": {"voice": voice}, "asr": {"model": "tiny.en"},
                           "profiles": {"k": {}}, "dialplan": {"1": "k"}})
    profile = config.profiles["k"]
    assert (profile.tts.backend, profile.tts.model, profile.tts.g2p) == (
        "kokoro-onnx", "kokoro-82m-int8", "misaki")
    speech = stage_cache.models.tts(profile.tts).synthesize(REPLY)
    assert speech.sample_rate == 24000 and speech.metrics.voice == voice
    assert 2.0 < len(speech.audio) / speech.sample_rate < 5.0
    heard = heard_on_the_line(stage_cache, speech, profile.asr)
    assert wer(REPLY, heard) <= 0.10, heard


@pytest.mark.model
def test_hibari_leads_a_kokoro_reply_in_the_voice_it_imitates(stage_cache):
    config = parse_config({"asr": {"model": "tiny.en"}, "tts": {"lead": "hibari"},
                           "profiles": {"k": {}}, "dialplan": {"1": "k"}})
    tts = stage_cache.models.tts(config.profiles["k"].tts)
    first = tts.synthesize(REPLY, first=True)
    rest = tts.synthesize(REPLY)
    assert (first.metrics.model, first.metrics.voice) == ("hibari", "heart")
    assert (rest.metrics.model, rest.metrics.voice) == ("kokoro-82m-int8", "af_heart")
    # As loud as Kokoro (hibari's gain), so the hand-over does not jump in level...
    level = [float(np.sqrt(np.mean(s.audio ** 2))) for s in (first, rest)]
    assert 0.7 < level[0] / level[1] < 1.4, level
    # ... and many times quicker: the point of the lead.
    assert first.metrics.duration_s * 4 < rest.metrics.duration_s
    assert wer(REPLY, heard_on_the_line(stage_cache, first, config.profiles["k"].asr)) <= 0.10


@pytest.mark.unit
def test_voices_come_only_from_the_pinned_tarball(tmp_path, monkeypatch):
    from models import catalog

    monkeypatch.setattr(catalog, "CACHE_DIR", tmp_path)
    assert not kokoro_voices.installed()
    with pytest.raises(ModelMissingError, match="run `callagent models install`.*kokoro-js@1.2.1"):
        kokoro_voices.voices_file()
    fake = tmp_path / "kokoro-js-1.2.1.tgz"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        data = np.zeros((510, 1, 256), np.float32).tobytes()
        info = tarfile.TarInfo("package/voices/af_heart.bin")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    fake.write_bytes(buf.getvalue())
    with pytest.raises(ModelMissingError, match="sha256 .* expected 1f0d0383"):
        kokoro_voices.install(fake)
    with pytest.raises(ModelMissingError, match="npm package kokoro-js@1.2.1.*npm pack"):
        kokoro_voices.install(registry="http://127.0.0.1:9")
    assert not kokoro_voices.installed()


@pytest.mark.unit
def test_a_voice_not_in_the_voices_file_is_named_with_the_ones_there():
    import models.tts.kokoro_onnx as k

    with pytest.raises(ModelMissingError, match="tts.voices: /nope.npz not found"):
        k.voices_path(TTSOptions(voices="/nope.npz"), model=kokoro_voices.catalog.cache_dir())
