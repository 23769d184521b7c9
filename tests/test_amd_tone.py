"""The answering machine's beep: steady tones found, speech and noise not (models.tone)."""

from __future__ import annotations

import numpy as np
import pytest

from models.audio import pcm16_to_float, through_phone_line
from models.tone import ToneDetector, tonal_peak

RATE = 8000


def line(x: np.ndarray) -> np.ndarray:
    """``x`` (8 kHz float) through the μ-law line, as float again."""
    return pcm16_to_float(through_phone_line(x.astype(np.float32), RATE))


def sine(hz: float, s: float, amp: float = 0.3) -> np.ndarray:
    return amp * np.sin(2 * np.pi * hz * np.arange(int(s * RATE)) / RATE)


def run(x: np.ndarray, min_s: float = 0.15) -> ToneDetector:
    d = ToneDetector(RATE, min_s)
    for i in range(0, len(x) - 159, 160):
        d.feed(x[i:i + 160])
    return d


def vowel(s: float, f0_from: float = 110, f0_to: float = 160, seed: int = 0) -> np.ndarray:
    """A voiced vowel-like sound: 20 harmonics with a gliding pitch under a formant envelope."""
    t = np.arange(int(s * RATE)) / RATE
    phase = 2 * np.pi * np.cumsum(np.linspace(f0_from, f0_to, len(t))) / RATE
    x = np.zeros_like(t)
    for k in range(1, 21):
        f = k * (f0_from + f0_to) / 2
        gain = np.exp(-((f - 700) / 300) ** 2) + 0.5 * np.exp(-((f - 1200) / 300) ** 2) + 0.05
        x += gain * np.sin(k * phase)
    x += 0.01 * np.random.default_rng(seed).standard_normal(len(t))
    return 0.3 * x / np.max(np.abs(x))


@pytest.mark.unit
@pytest.mark.parametrize("hz", [400, 440, 850, 1000, 1400, 2000])
def test_beeps_at_several_frequencies_are_found_with_their_start_and_end(hz):
    x = line(np.concatenate([np.zeros(RATE // 2), sine(hz, 0.4), np.zeros(RATE // 2)]))
    d = run(x)
    assert d.tone is not None
    assert d.tone.hz == pytest.approx(hz, abs=10)
    assert d.tone.start_s == pytest.approx(0.5, abs=0.021)
    assert d.tone.end_s == pytest.approx(0.9, abs=0.021)
    assert tonal_peak(x[RATE // 2 + 800:RATE // 2 + 960], RATE)[1] > 0.99


@pytest.mark.unit
def test_a_tone_shorter_than_the_minimum_is_no_beep_and_a_quiet_one_is_line_noise():
    assert run(line(sine(1000, 0.1))).tone is None  # 100 ms: a click of a tone
    assert run(line(sine(1000, 0.2))).tone is not None
    assert run(line(sine(1000, 0.5, amp=0.001))).tone is None  # under MIN_LEVEL


@pytest.mark.unit
def test_noise_silence_and_a_vowel_with_harmonics_are_not_tones():
    rng = np.random.default_rng(1)
    assert run(line(0.1 * rng.standard_normal(RATE * 2))).tone is None
    assert run(np.zeros(RATE * 2)).tone is None
    assert run(line(vowel(2.0))).tone is None
    assert run(line(vowel(2.0, 120, 120, seed=3))).tone is None  # steady pitch, still harmonics
    _, ratio = tonal_peak(line(vowel(0.02)), RATE)
    assert ratio < 0.9


@pytest.mark.unit
def test_a_beep_after_speech_is_found_where_it_begins():
    x = line(np.concatenate([vowel(1.5), np.zeros(RATE // 4), sine(1000, 0.5)]))
    d = run(x)
    assert d.tone is not None and d.tone.start_s == pytest.approx(1.75, abs=0.021)
    assert d.tone.end_s is None  # still sounding when the audio ends


@pytest.mark.tool
@pytest.mark.needs("espeak-ng")
@pytest.mark.parametrize("text", ["Hello?", "Yeah, who's calling?",
                                  "Hi, you've reached Ann. Please leave a message after the tone.",
                                  "Oooooooh, mmmmmmm."])
def test_spoken_greetings_through_the_line_hold_no_tone(text):
    from testkit.samples import spoken

    audio, rate = spoken(text)
    x = pcm16_to_float(through_phone_line(audio, rate))
    assert run(x).tone is None
