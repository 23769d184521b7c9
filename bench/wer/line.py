"""Phone-line conditions for ``bench wer``: codecs, lost packets and concealment, level, noise.

A condition turns a caller's clean audio (any rate) into the 16 kHz float32 the ASR gets, in
the order a call does it: the caller's end first (a quiet talker, background noise), then the
codec, then lost 20 ms packets on the 8 kHz frames pjmedia's bridge hands the agent (G.722
calls are resampled to 8 kHz there too), then the resampler to 16 kHz. Every random choice takes
a seed, so a run is reproducible. No model code here.
"""

from __future__ import annotations

import array
import zlib
from dataclasses import dataclass
from typing import Literal

import numpy as np

from models.audio import (
    PHONE_RATE,
    float_to_pcm16,
    frame_samples,
    line_to_asr,
    pcm16_to_float,
    resample,
    through_phone_line,
)

G722_RATE = 16000
G722_BITRATE = 64000
PLC_FADE_PER_FRAME = 0.25
"""Basic concealment: each further lost frame in a row repeats the last one 25 % quieter
(silent after 80 ms), as simple PLCs do rather than buzz a 20 ms loop."""


@dataclass(frozen=True)
class Condition:
    """One way the line can treat the caller's audio."""

    name: str
    description: str
    codec: Literal["ulaw", "alaw", "g722"] = "ulaw"
    loss: float = 0.0
    """Probability that a 20 ms packet is lost (independently, seeded)."""
    conceal: Literal["zero", "repeat"] = "zero"
    """What fills a lost packet: silence, or the last packet repeated with a fade."""
    gain_db: float = 0.0
    """Level change at the caller's end (a quiet talker, a phone held away)."""
    noise: Literal["", "pink", "babble"] = ""
    """Background noise mixed in at the caller's end."""
    snr_db: float = 0.0
    """Speech-to-noise power ratio of that mix."""


CONDITIONS: dict[str, Condition] = {
    c.name: c
    for c in (
        Condition("ulaw", "G.711 μ-law (the reference line)"),
        Condition("alaw", "G.711 A-law", codec="alaw"),
        Condition("g722", "G.722 64 kbit/s, then the 8 kHz bridge", codec="g722"),
        Condition("loss1-zero", "μ-law, 1 % packets lost, silence", loss=0.01),
        Condition("loss1-plc", "μ-law, 1 % packets lost, repeat+fade", loss=0.01,
                  conceal="repeat"),
        Condition("loss5-zero", "μ-law, 5 % packets lost, silence", loss=0.05),
        Condition("loss5-plc", "μ-law, 5 % packets lost, repeat+fade", loss=0.05,
                  conceal="repeat"),
        Condition("quiet", "μ-law, talker 20 dB quieter", gain_db=-20.0),
        Condition("babble15", "μ-law, 6-talker babble at 15 dB SNR", noise="babble",
                  snr_db=15.0),
        Condition("pink10", "μ-law, pink noise at 10 dB SNR", noise="pink", snr_db=10.0),
    )
}
REFERENCE = "ulaw"
"""The condition every other is compared with, on the same utterances."""


def seed_for(*parts: object) -> int:
    """A stable seed from names and numbers (Python's ``hash`` differs between runs)."""
    return zlib.crc32("/".join(map(str, parts)).encode())


# --- the caller's end ---------------------------------------------------------------------


def power(x: np.ndarray) -> float:
    """Mean square of a signal."""
    x = np.asarray(x, np.float64)
    return float(np.mean(x * x)) if len(x) else 0.0


def snr_db(speech: np.ndarray, noise: np.ndarray) -> float:
    """Speech-to-noise power ratio in dB (whole signals: the clips are trimmed utterances)."""
    return 10.0 * np.log10(power(speech) / max(power(noise), 1e-20))


def scale_to_snr(speech: np.ndarray, noise: np.ndarray, snr: float) -> np.ndarray:
    """``noise`` scaled so that ``snr_db(speech, result) == snr``."""
    return (noise * np.sqrt(power(speech) / max(power(noise), 1e-20) / 10 ** (snr / 10))).astype(
        np.float32
    )


def pink_noise(n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` samples of 1/f noise (white noise shaped in the frequency domain), unit power."""
    spectrum = np.fft.rfft(rng.standard_normal(n))
    f = np.arange(len(spectrum), dtype=np.float64)
    f[0] = 1.0  # no DC boost
    x = np.fft.irfft(spectrum / np.sqrt(f), n)
    return (x / np.sqrt(power(x))).astype(np.float32)


def babble_noise(talkers: list[np.ndarray], n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` samples of several talkers at once, each from a random point, equal loudness.

    Args:
        talkers: one long recording per talker, at the rate wanted.
        n: samples to return.
        rng: where each talker starts in its recording.
    """
    out = np.zeros(n, np.float64)
    for t in talkers:
        t = np.asarray(t, np.float64) / np.sqrt(max(power(t), 1e-20))
        looped = np.tile(t, n // len(t) + 2)
        start = int(rng.integers(0, len(t)))
        out += looped[start : start + n]
    return (out / np.sqrt(max(power(out), 1e-20))).astype(np.float32)


# --- the codec and the network ------------------------------------------------------------


def g722_roundtrip(pcm16k: np.ndarray) -> np.ndarray:
    """16 kHz PCM16 through a G.722 encoder and decoder (libg722, bit-exact ITU G.722)."""
    from G722 import G722  # a small C extension; imported here so the rest needs no codec

    codec = G722(G722_RATE, G722_BITRATE)
    coded = codec.encode(array.array("h", np.asarray(pcm16k, np.int16).tobytes()))
    decoded = G722(G722_RATE, G722_BITRATE).decode(coded)
    return np.frombuffer(bytes(decoded), np.int16).copy()


def loss_mask(n_frames: int, loss: float, rng: np.random.Generator) -> np.ndarray:
    """Which of ``n_frames`` packets are lost: each independently with probability ``loss``."""
    return rng.random(n_frames) < loss


def conceal(pcm: np.ndarray, lost: np.ndarray, method: str, rate: int = PHONE_RATE) -> np.ndarray:
    """PCM16 with the frames marked ``lost`` replaced, as a receiver without them plays it.

    Args:
        pcm: the received signal, one 20 ms frame per ``lost`` entry (a short tail is kept).
        lost: True for each lost frame.
        method: ``zero`` (silence) or ``repeat`` (the last good frame, fading
            :data:`PLC_FADE_PER_FRAME` per frame over each frame, so there is no step).
        rate: sample rate of ``pcm``.

    Raises:
        ValueError: an unknown method.
    """
    if method not in ("zero", "repeat"):
        raise ValueError(f"conceal: unknown method '{method}' (zero, repeat)")
    n = frame_samples(rate)
    out = np.asarray(pcm, np.int16).copy()
    last: np.ndarray | None = None
    run = 0
    for i, gone in enumerate(lost):
        frame = slice(i * n, (i + 1) * n)
        if not gone:
            last, run = out[frame].astype(np.float64), 0
            continue
        if method == "zero" or last is None:
            out[frame] = 0
            continue
        g0 = max(0.0, 1.0 - PLC_FADE_PER_FRAME * run)
        g1 = max(0.0, 1.0 - PLC_FADE_PER_FRAME * (run + 1))
        ramp = np.linspace(g0, g1, n, endpoint=False)
        out[frame] = np.round(last[: len(out[frame])] * ramp[: len(out[frame])]).astype(np.int16)
        run += 1
    return out


# --- the whole line -----------------------------------------------------------------------


def caller_end(
    cond: Condition, audio: np.ndarray, rate: int, seed: int, babble: list[np.ndarray] | None
) -> np.ndarray:
    """The caller's audio as the phone's microphone takes it: level and background noise."""
    x = np.asarray(audio, np.float32) * np.float32(10 ** (cond.gain_db / 20))
    if not cond.noise:
        return x
    rng = np.random.default_rng(seed_for(seed, "noise"))
    if cond.noise == "pink":
        noise = pink_noise(len(x), rng)
    else:
        if not babble:
            raise ValueError(f"condition {cond.name}: babble needs talker recordings")
        noise = babble_noise(babble, len(x), rng)
    return x + scale_to_snr(x, noise, cond.snr_db)


def line_pcm(cond: Condition, audio: np.ndarray, rate: int) -> np.ndarray:
    """The 8 kHz PCM16 the agent's bridge receives through ``cond``'s codec."""
    if cond.codec in ("ulaw", "alaw"):
        return through_phone_line(audio, rate, cond.codec)
    if cond.codec == "g722":
        wide = g722_roundtrip(float_to_pcm16(resample(audio, rate, G722_RATE)))
        return float_to_pcm16(resample(pcm16_to_float(wide), G722_RATE, PHONE_RATE))
    raise ValueError(f"condition {cond.name}: unknown codec '{cond.codec}'")


def received(
    cond: Condition,
    audio: np.ndarray,
    rate: int,
    seed: int,
    babble: list[np.ndarray] | None = None,
) -> np.ndarray:
    """``audio`` (mono float, ``rate`` Hz) through ``cond``: the 8 kHz PCM16 the agent gets.

    Args:
        cond: the line condition.
        audio: the caller's clean speech.
        rate: its sample rate.
        seed: this utterance's seed (noise start and lost packets derive from it).
        babble: talker recordings at ``rate``, for babble noise.
    """
    pcm = line_pcm(cond, caller_end(cond, audio, rate, seed, babble), rate)
    if cond.loss > 0:
        n = frame_samples(PHONE_RATE)
        rng = np.random.default_rng(seed_for(seed, "loss"))
        lost = loss_mask(-(-len(pcm) // n), cond.loss, rng)
        pcm = conceal(pcm, lost, cond.conceal)
    return pcm


def apply(
    cond: Condition,
    audio: np.ndarray,
    rate: int,
    seed: int,
    babble: list[np.ndarray] | None = None,
) -> np.ndarray:
    """:func:`received`, resampled to the 16 kHz float32 the ASR takes, as a call does it."""
    return line_to_asr(pcm16_to_float(received(cond, audio, rate, seed, babble)))


def parse_conditions(names: list[str] | None) -> list[Condition]:
    """Conditions by name (all when ``names`` is empty), the reference first.

    Raises:
        ValueError: an unknown name, naming the known ones.
    """
    if not names:
        return list(CONDITIONS.values())
    unknown = [n for n in names if n not in CONDITIONS]
    if unknown:
        raise ValueError(
            f"--conditions: unknown {', '.join(unknown)} (known: {', '.join(CONDITIONS)})"
        )
    ordered = sorted(set(names), key=list(CONDITIONS).index)
    return [CONDITIONS[n] for n in ordered]
