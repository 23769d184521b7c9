"""Audio helpers: streaming resampling, G.711 companding, reading any audio file.

Resampling uses soxr's streaming resampler, which keeps its filter state between 20 ms frames
so a chunked stream equals the one-shot result (tested with a sine sweep, SNR >= 60 dB).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

PHONE_RATE = 8000
"""Sample rate of a G.711 line (and of pjsua2's bridge: G.722 calls are resampled to it)."""
ASR_RATE = 16000
"""Sample rate the VAD and ASR models take."""
FRAME_MS = 20
"""One line frame: the RTP packet time and pjsua2's bridge tick."""


def frame_samples(rate: int = PHONE_RATE) -> int:
    """Samples in one :data:`FRAME_MS` frame at ``rate`` (160 on a phone line)."""
    return rate * FRAME_MS // 1000


class StreamResampler:
    """Stateful float32 mono resampler for frame-by-frame audio."""

    def __init__(self, in_rate: int, out_rate: int, quality: str = "HQ"):
        self.in_rate, self.out_rate = in_rate, out_rate
        self._same = in_rate == out_rate
        self._stream = (
            None
            if self._same
            else soxr.ResampleStream(in_rate, out_rate, 1, dtype="float32", quality=quality)
        )

    def process(self, audio: np.ndarray, last: bool = False) -> np.ndarray:
        """Resample the next piece of the stream (``last`` flushes the filter tail)."""
        audio = np.ascontiguousarray(audio, dtype=np.float32).reshape(-1)
        if self._same:
            return audio
        return self._stream.resample_chunk(audio, last=last)


class LineUpsampler:
    """8 to 16 kHz for the caller's line, 3 ms behind it: a 95-tap Kaiser lowpass, streamed.

    soxr (HQ) releases its output in bursts, well behind the line with 20 ms frames, and the
    VAD's end of speech waits for that audio (bench pipeline). Its quicker settings (QQ, LQ)
    cost accuracy (bench wer, paired against HQ). A phone line carries nothing above ~3.4 kHz,
    so a short linear-phase filter (passband to ~3.5 kHz, stopband from ~4.5 kHz at -80 dB)
    loses nothing there and every frame comes out whole, 47 samples (2.9 ms) late.
    """

    TAPS = 95

    def __init__(self):
        n = np.arange(self.TAPS) - (self.TAPS - 1) / 2
        # Cutoff at the 8 kHz line's Nyquist (4 kHz = half of 16 kHz's); gain 2 for the zeros.
        taps = np.sinc(n / 2) * np.kaiser(self.TAPS, 8.0)
        self._taps = (2 * taps / taps.sum()).astype(np.float32)
        self._tail = np.zeros(self.TAPS - 1, np.float32)

    def process(self, audio: np.ndarray, last: bool = False) -> np.ndarray:
        """The next piece of the line at 16 kHz, two samples for each one in.

        ``last`` changes nothing: only the filter's delay is held back, and a call never
        flushes that either (``last`` is there for :class:`StreamResampler`'s callers).
        """
        audio = np.ascontiguousarray(audio, dtype=np.float32).reshape(-1)
        stuffed = np.zeros(2 * len(audio), np.float32)
        if not audio.any() and not self._tail.any():
            return stuffed  # digital silence in and held: zeros out, the filter's work skipped
        stuffed[::2] = audio
        x = np.concatenate([self._tail, stuffed])
        self._tail = x[len(x) - (self.TAPS - 1):]
        return np.convolve(x, self._taps, mode="valid").astype(np.float32, copy=False)


def line_resampler(rate: int) -> LineUpsampler | StreamResampler:
    """How a call's line at ``rate`` reaches the VAD and ASR at 16 kHz."""
    return LineUpsampler() if rate * 2 == ASR_RATE else StreamResampler(rate, ASR_RATE)


def line_to_asr(audio: np.ndarray, rate: int = PHONE_RATE) -> np.ndarray:
    """A whole caller line at 16 kHz, resampled as a call's session does it: 20 ms at a time.

    As long as the line (a call hears the filter's delay too, and no flushed tail).
    """
    rs = line_resampler(rate)
    step = frame_samples(rate)
    parts = [rs.process(audio[i:i + step]) for i in range(0, len(audio), step)]
    parts.append(rs.process(np.zeros(0, np.float32), last=True))
    out = np.concatenate(parts).astype(np.float32, copy=False)
    return out[:len(audio) * ASR_RATE // rate]


def resample(audio: np.ndarray, in_rate: int, out_rate: int) -> np.ndarray:
    """One-shot resampling of a whole signal."""
    audio = np.ascontiguousarray(audio, dtype=np.float32).reshape(-1)
    if in_rate == out_rate:
        return audio
    return soxr.resample(audio, in_rate, out_rate, quality="HQ").astype(np.float32, copy=False)


def float_to_pcm16(audio: np.ndarray) -> np.ndarray:
    return (np.clip(audio, -1.0, 1.0) * 32767.0).round().astype(np.int16)


def pcm16_to_float(pcm: np.ndarray | bytes) -> np.ndarray:
    if isinstance(pcm, bytes | bytearray | memoryview):
        pcm = np.frombuffer(pcm, dtype=np.int16)
    return pcm.astype(np.float32) / 32768.0


# G.711 tables built once (ITU-T G.711); encoding via lookup over all 65536 PCM16 values.
def rms(pcm: bytes | np.ndarray) -> float:
    """RMS level of int16 PCM, 0..1 of full scale."""
    f = pcm16_to_float(pcm)
    if len(f) == 0:
        return 0.0
    return float(np.sqrt(np.mean(f * f)))


SPEECH_RMS = 0.01
"""RMS (of full scale) above which a frame or packet of line audio counts as speech."""
SILENCE_PEAK = 1e-3
"""Audio peaking below this (-60 dBFS) is silence: on a line, G.711's few smallest steps (A-law's
idle +8, the +-8 dither of a silent line: ~4.6e-4 once upsampled); from a voice, the quiet it
opens a chunk with (Piper opens every chunk with some)."""


def speech_runs(levels: Iterable[tuple[float, float]], threshold: float = SPEECH_RMS,
                min_gap_s: float = 0.3) -> list[tuple[float, float]]:
    """Runs of speech in stamped levels: the one detector for frames, packets and recordings.

    Args:
        levels: ``(stamp_s, rms)`` pairs in time order.
        threshold: RMS above which an item counts as speech.
        min_gap_s: items closer than this join one run (pauses between words).

    Returns:
        ``(first, last)`` stamps of the loud items of each run.
    """
    runs: list[list[float]] = []
    for at, level in levels:
        if level <= threshold:
            continue
        if runs and at - runs[-1][1] <= min_gap_s:
            runs[-1][1] = at
        else:
            runs.append([at, at])
    return [(a, b) for a, b in runs]


def _ulaw_decode_table() -> np.ndarray:
    u = ~np.arange(256, dtype=np.int32) & 0xFF
    t = (((u & 0x0F) << 3) + 0x84) << ((u & 0x70) >> 4)
    return np.where(u & 0x80, 0x84 - t, t - 0x84).astype(np.int16)


def _alaw_decode_table() -> np.ndarray:
    a = np.arange(256, dtype=np.int32) ^ 0x55
    seg = (a & 0x70) >> 4
    t = (a & 0x0F) << 4
    t = np.where(seg == 0, t + 8, np.where(seg == 1, t + 0x108, (t + 0x108) << (seg - 1)))
    return np.where(a & 0x80, t, -t).astype(np.int16)


ULAW_DECODE = _ulaw_decode_table()
ALAW_DECODE = _alaw_decode_table()


def _encode_table(decode: np.ndarray) -> np.ndarray:
    # Nearest code for every PCM16 value: sort the 256 decoded levels and bisect.
    order = np.argsort(decode, kind="stable")
    levels = decode[order].astype(np.int32)
    pcm = np.arange(-32768, 32768, dtype=np.int32)
    idx = np.clip(np.searchsorted(levels, pcm), 1, 255)
    lower, upper = levels[idx - 1], levels[idx]
    idx = np.where(pcm - lower <= upper - pcm, idx - 1, idx)
    return order[idx].astype(np.uint8)


ULAW_ENCODE = _encode_table(ULAW_DECODE)
ALAW_ENCODE = _encode_table(ALAW_DECODE)


def ulaw_encode(pcm: np.ndarray) -> np.ndarray:
    return ULAW_ENCODE[pcm.astype(np.int32) + 32768]


def _codes(codes: np.ndarray | bytes) -> np.ndarray:
    if isinstance(codes, bytes | bytearray | memoryview):
        return np.frombuffer(bytes(codes), np.uint8)
    return codes


def ulaw_decode(codes: np.ndarray | bytes) -> np.ndarray:
    return ULAW_DECODE[_codes(codes)]


def alaw_encode(pcm: np.ndarray) -> np.ndarray:
    return ALAW_ENCODE[pcm.astype(np.int32) + 32768]


def alaw_decode(codes: np.ndarray | bytes) -> np.ndarray:
    return ALAW_DECODE[_codes(codes)]


def read_audio(path: str | Path) -> tuple[np.ndarray, int]:
    """Read any file soundfile can (PCM16/24/32, float, μ-law/A-law WAV, FLAC, OGG...).

    Returns:
        Mono float32 samples and their sample rate.
    """
    audio, rate = sf.read(str(path), dtype="float32", always_2d=True)
    return audio.mean(axis=1).astype(np.float32), int(rate)


def through_phone_line(audio: np.ndarray, rate: int, law: str = "ulaw") -> np.ndarray:
    """Convert audio to what a G.711 line carries: 8 kHz, μ-law (or A-law) companded PCM16."""
    pcm = float_to_pcm16(resample(audio, rate, PHONE_RATE))
    if law == "ulaw":
        return ulaw_decode(ulaw_encode(pcm))
    return alaw_decode(alaw_encode(pcm))
