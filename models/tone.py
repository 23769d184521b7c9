"""A steady-tone detector: the beep an answering machine plays before it records.

Pure numpy, per 20 ms line frame. A frame is *tonal* when one narrow band (the main lobe of
its strongest peak, 300-2100 Hz) holds nearly all of its energy; a *tone* is a run of tonal
frames whose peak stays at one frequency for at least ``min_s``. Speech fails either test:
a voiced vowel spreads its energy over harmonics and formants, and its pitch glides. Imports
nothing from the project.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

BAND_HZ = (300.0, 2100.0)
"""Where the peak may lie: answering-machine beeps are ~400-2000 Hz (1 kHz is most common)."""
MIN_RATIO = 0.9
"""Share of a frame's energy within ``LOBE_HZ`` of its peak for the frame to be tonal: a sine
through the μ-law line stays near all of it, sung or held vowels well below
(tests/test_amd_tone.py holds both sides of the line)."""
LOBE_HZ = 120.0
"""Half-width of the band counted as the peak: a Hann window's main lobe on 20 ms is ±100 Hz."""
MAX_DRIFT_HZ = 30.0
"""A tone's peak may move this much between frames (a glide is speech, not a beep)."""
MIN_LEVEL = 0.003
"""RMS (of full scale 1.0) under which a frame is line noise, never a tone (about -50 dBFS)."""
_NFFT = 1024


def tonal_peak(frame: np.ndarray, rate: int) -> tuple[float, float]:
    """The frame's strongest frequency in :data:`BAND_HZ` and the share of energy around it.

    Args:
        frame: float32 samples (a 20 ms line frame).
        rate: their sample rate.

    Returns:
        ``(hz, ratio)``; ``(0.0, 0.0)`` for a frame under :data:`MIN_LEVEL`.
    """
    x = np.asarray(frame, dtype=np.float32)
    if len(x) == 0 or float(np.sqrt(np.mean(x * x))) < MIN_LEVEL:
        return 0.0, 0.0
    x = x - float(np.mean(x))
    power = np.abs(np.fft.rfft(x * np.hanning(len(x)), _NFFT)) ** 2
    freqs = np.fft.rfftfreq(_NFFT, 1.0 / rate)
    band = (freqs >= BAND_HZ[0]) & (freqs <= BAND_HZ[1])
    total = float(power.sum())
    if total <= 0.0 or not band.any():
        return 0.0, 0.0
    peak = float(freqs[band][int(np.argmax(power[band]))])
    lobe = np.abs(freqs - peak) <= LOBE_HZ
    return peak, float(power[lobe].sum()) / total


@dataclass(frozen=True)
class Tone:
    """A steady tone heard on the line."""

    hz: float
    """Its mean frequency."""
    start_s: float
    """Where it began, in seconds of the audio fed."""
    end_s: float | None = None
    """Where it ended (None: still sounding)."""


class ToneDetector:
    """Finds steady tones in a stream of line frames.

    Args:
        rate: sample rate of the frames.
        min_s: shortest run of tonal frames that counts as a tone (a beep is >= ~150 ms).
    """

    def __init__(self, rate: int, min_s: float = 0.15):
        self._rate = rate
        self._min_s = min_s
        self._t = 0.0
        self._run: list[float] = []  # peaks of the current run of tonal frames
        self._run_start = 0.0
        self.tone: Tone | None = None
        """The first tone heard (its ``end_s`` set once it stopped); None until one is."""
        self.tonal = False
        """The last frame was tonal (a tone's frames are not speech)."""

    def feed(self, frame: np.ndarray) -> Tone | None:
        """One frame of float32 samples; returns the first tone once it has lasted ``min_s``."""
        hz, ratio = tonal_peak(frame, self._rate)
        start = self._t
        self._t += len(frame) / self._rate
        self.tonal = ratio >= MIN_RATIO
        steady = self.tonal and (not self._run or abs(hz - self._run[-1]) <= MAX_DRIFT_HZ)
        if steady:
            if not self._run:
                self._run_start = start
            self._run.append(hz)
        else:
            self._end_run(start)
            if self.tonal:  # a new run at another frequency
                self._run, self._run_start = [hz], start
        if (self.tone is None and self._run
                and self._t - self._run_start >= self._min_s - 1e-9):
            self.tone = Tone(float(np.mean(self._run)), self._run_start)
        return self.tone

    def _end_run(self, at: float) -> None:
        if self._run and self.tone is not None and self.tone.end_s is None:
            self.tone = Tone(self.tone.hz, self.tone.start_s, at)
        self._run = []
