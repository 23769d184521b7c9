"""Streaming resampler, G.711 and file reading."""

import numpy as np
import pytest
import soundfile as sf

from models.audio import (
    LineUpsampler,
    StreamResampler,
    alaw_decode,
    alaw_encode,
    read_audio,
    resample,
    through_phone_line,
    ulaw_decode,
    ulaw_encode,
)

pytestmark = pytest.mark.unit


def sweep(rate: int, seconds: float = 2.0) -> np.ndarray:
    t = np.arange(int(rate * seconds)) / rate
    f0, f1 = 100.0, 0.45 * rate
    return (0.5 * np.sin(2 * np.pi * (f0 * t + (f1 - f0) / (2 * seconds) * t**2))).astype(
        np.float32
    )


def snr_db(ref: np.ndarray, x: np.ndarray) -> float:
    n = min(len(ref), len(x))
    noise = ref[:n] - x[:n]
    return 10 * np.log10(np.sum(ref[:n] ** 2) / max(np.sum(noise**2), 1e-20))


@pytest.mark.parametrize(("rin", "rout"), [(8000, 16000), (16000, 8000), (24000, 8000)])
def test_chunked_stream_matches_one_shot(rin, rout):
    x = sweep(rin)
    frame = rin // 50  # 20 ms
    rs = StreamResampler(rin, rout)
    chunks = [rs.process(x[i : i + frame]) for i in range(0, len(x), frame)]
    chunks.append(rs.process(np.zeros(0, np.float32), last=True))
    y = np.concatenate(chunks)
    ref = resample(x, rin, rout)
    assert abs(len(y) - len(ref)) <= 2
    assert snr_db(ref, y) >= 60.0
    # No clicks at frame boundaries: the largest sample step stays that of the signal itself.
    out_frame = rout // 50
    steps = np.abs(np.diff(y))
    boundary = steps[out_frame - 1 :: out_frame]
    assert boundary.max() <= steps.max() + 1e-6
    assert boundary.max() <= np.abs(np.diff(ref)).max() * 1.05


def test_the_line_reaches_16k_whole_at_every_frame():
    # What the VAD hears of the line: every 20 ms frame comes out at once (soxr HQ held back
    # 63 ms on average), equal to a one-shot VHQ resampling across the phone band.
    x = sweep(8000)
    x = x * (np.arange(len(x)) < 8000 * 3400 / 3600)  # up to ~3.4 kHz, what a line carries
    up = LineUpsampler()
    chunks = [up.process(x[i : i + 160]) for i in range(0, len(x), 160)]
    assert {len(c) for c in chunks} == {320}
    y = np.concatenate(chunks)
    delay = (LineUpsampler.TAPS - 1) // 2  # linear phase: 47 samples, 2.9 ms
    ref = resample(x, 8000, 16000)
    assert snr_db(ref[1000:-1000], y[delay + 1000 : len(ref) - 1000 + delay]) >= 60.0
    # A 3 kHz tone keeps its level; its image at 5 kHz is gone.
    tone = (0.5 * np.sin(2 * np.pi * 3000 * np.arange(8000) / 8000)).astype(np.float32)
    out = LineUpsampler().process(tone)[1000:-1000]
    spectrum = np.abs(np.fft.rfft(out * np.hanning(len(out))))
    hz = np.fft.rfftfreq(len(out), 1 / 16000)
    at = {f: spectrum[np.argmin(np.abs(hz - f))] for f in (3000, 5000)}
    assert 20 * np.log10(at[5000] / at[3000]) < -70
    assert np.sqrt(np.mean(out**2)) == pytest.approx(0.5 / np.sqrt(2), rel=0.01)


def test_g711_round_trip_error_is_small():
    pcm = (np.sin(np.linspace(0, 200, 8000)) * 20000).astype(np.int16)
    for enc, dec in ((ulaw_encode, ulaw_decode), (alaw_encode, alaw_decode)):
        back = dec(enc(pcm)).astype(np.float64)
        assert snr_db(pcm.astype(np.float64), back) > 30  # G.711 gives ~38 dB on a full sine
        assert dec(enc(np.array([0], np.int16)))[0] in (0, 8, -8)


@pytest.mark.parametrize("subtype", ["PCM_16", "FLOAT", "ULAW", "ALAW", "PCM_24"])
def test_read_audio_any_encoding(tmp_path, subtype):
    x = sweep(8000 if subtype in ("ULAW", "ALAW") else 44100, 0.5)
    path = tmp_path / f"a.{'flac' if subtype == 'PCM_24' else 'wav'}"
    sf.write(
        path,
        np.stack([x, x], axis=1),
        8000 if subtype in ("ULAW", "ALAW") else 44100,
        subtype=subtype,
    )
    audio, rate = read_audio(path)
    assert audio.dtype == np.float32 and audio.ndim == 1 and len(audio) == len(x)
    assert snr_db(x, audio) > 25


def test_phone_line_is_8k_companded():
    x = sweep(48000, 1.0)
    line = through_phone_line(x, 48000)
    assert line.dtype == np.int16 and len(line) == 8000
    assert set(np.unique(ulaw_encode(line))) <= set(range(256))
    assert np.array_equal(ulaw_decode(ulaw_encode(line)), line)  # already on the μ-law grid


def test_the_line_upsampler_skips_digital_silence_exactly():
    """Zeros in after zeros out of the filter: zeros, and the next speech filtered as ever."""
    rng = np.random.default_rng(1)
    speech = rng.normal(0, 0.2, 800).astype(np.float32)
    line = np.concatenate([speech, np.zeros(1600, np.float32), speech])
    up = LineUpsampler()
    framed = np.concatenate([up.process(line[i:i + 160]) for i in range(0, len(line), 160)])
    # The whole line in one piece holds speech, so it goes through the filter everywhere.
    whole = LineUpsampler().process(line)
    np.testing.assert_allclose(framed, whole, atol=1e-6)
    quiet = framed[2 * 800 + 2 * 94:2 * 2400]
    assert not quiet.any()
