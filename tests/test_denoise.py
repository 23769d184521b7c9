"""RNNoise before the ASR (``asr.denoise``): noise taken out, the caller's speech kept."""

from __future__ import annotations

import numpy as np
import pytest

from dialplan.options import TTSOptions
from models.asr.denoise import denoise
from models.audio import ASR_RATE, resample

pytestmark = pytest.mark.model


def level_db(x: np.ndarray) -> float:
    return 10 * np.log10(np.mean(x.astype(np.float64) ** 2) + 1e-20)


def test_rnnoise_takes_noise_out_and_keeps_speech(stage_cache):
    speech = stage_cache.models.tts(TTSOptions(backend="hibari")).synthesize(
        "The library opens at ten on Saturday.")
    voice = resample(speech.audio, speech.sample_rate, ASR_RATE)
    pause = np.zeros(ASR_RATE, np.float32)
    clean = np.concatenate([pause, voice, pause])
    noise = (np.random.default_rng(0).standard_normal(len(clean)) * 0.02).astype(np.float32)
    out = denoise(clean + noise, ASR_RATE)
    assert len(out) == len(clean) and out.dtype == np.float32
    gap = slice(ASR_RATE // 2, ASR_RATE)  # noise alone, after RNNoise has adapted
    said = slice(ASR_RATE, ASR_RATE + len(voice))
    assert level_db(out[gap]) < level_db(noise[gap]) - 15  # the noise is gone...
    assert abs(level_db(out[said]) - level_db(clean[said])) < 6  # ... the speech is not
    assert len(denoise(np.zeros(0, np.float32), ASR_RATE)) == 0


def test_asr_denoise_is_a_checked_option():
    from dialplan import ConfigError, parse_config

    config = parse_config({"profiles": {"p": {"asr": {"denoise": "rnnoise"}}}})
    assert config.profiles["p"].asr.denoise == "rnnoise"
    with pytest.raises(ConfigError, match="profiles.p.asr.denoise"):
        parse_config({"profiles": {"p": {"asr": {"denoise": "deepfilter"}}}})
