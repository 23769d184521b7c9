"""What a caller hears on hold while an attended transfer calls the target.

The profile's ``hold_audio`` WAV (any file soundfile reads, at any rate: brought to the line's
rate once and kept), looped; without one, a generated soft tone: a quiet two-note chime every
:data:`TONE_PERIOD_S`, so the caller knows the line is alive without being shouted at.
:class:`HoldAudio` hands it out in chunks that the transfer queues on the caller's playout.
Imports no pjsua2 and no database code.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from models.audio import float_to_pcm16, read_audio, resample

TONE_LEVEL = 0.05
"""Peak of the generated tone (about -26 dBFS): a soft tone, well below speech."""
TONE_NOTES_HZ = (523.25, 659.25)
"""C5 then E5, each :data:`TONE_NOTE_S` long, raised-cosine edges (no clicks)."""
TONE_NOTE_S = 0.4
TONE_PERIOD_S = 3.0


def soft_tone(rate: int) -> np.ndarray:
    """One period of the default hold tone, int16 at ``rate``."""
    n = int(TONE_NOTE_S * rate)
    t = np.arange(n) / rate
    edge = min(n // 4, int(0.05 * rate))
    envelope = np.ones(n)
    ramp = 0.5 - 0.5 * np.cos(np.linspace(0, np.pi, edge))
    envelope[:edge], envelope[-edge:] = ramp, ramp[::-1]
    notes = [TONE_LEVEL * envelope * np.sin(2 * np.pi * hz * t) for hz in TONE_NOTES_HZ]
    period = np.zeros(int(TONE_PERIOD_S * rate))
    period[: 2 * n] = np.concatenate(notes)
    return float_to_pcm16(period.astype(np.float32))


@lru_cache(maxsize=8)
def _loop(path: str, rate: int) -> np.ndarray:
    if not path:
        return soft_tone(rate)
    audio, file_rate = read_audio(path)
    pcm = float_to_pcm16(resample(audio, file_rate, rate))
    return pcm if len(pcm) else soft_tone(rate)


class HoldAudio:
    """The hold audio of one transfer, in chunks, looped without end.

    Args:
        path: the WAV (``hold_audio``; checked at config load); "" = the soft tone.
        rate: the line's sample rate.
    """

    def __init__(self, path: str, rate: int):
        self._loop = _loop(path, rate)
        self._rate = rate
        self._at = 0

    def next(self, seconds: float) -> np.ndarray:
        """The next ``seconds`` of hold audio (int16)."""
        n = int(seconds * self._rate)
        idx = (self._at + np.arange(n)) % len(self._loop)
        self._at = (self._at + n) % len(self._loop)
        return self._loop[idx]
