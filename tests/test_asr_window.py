"""Whisper encodes the utterance, not a 30 s window of mostly padding.

faster-whisper pads every segment to 30 s before the encoder; CTranslate2 takes a shorter
input, so the backend cuts the padding to the utterance plus ``asr.window_margin_s``
(5 s: measured as accurate as the full window, see its option), rounded up to whole seconds.
What follows the speech in the window is silence, as Whisper was trained on, not zero features.
"""

from __future__ import annotations

import numpy as np
import pytest

from dialplan.options import ASROptions, TTSOptions
from models.asr.whisper_batch import padded
from models.audio import ASR_RATE, PHONE_RATE, pcm16_to_float, resample, through_phone_line
from testkit.samples import spoken

pytestmark = pytest.mark.model


def _line(text: str) -> np.ndarray:
    audio, rate = spoken(text)
    return resample(pcm16_to_float(through_phone_line(audio, rate)), PHONE_RATE, ASR_RATE)


def _encoded_frames(asr, monkeypatch) -> list[int]:
    """Encoder output lengths (in mel frames) of every pass through ``asr`` from now on."""
    seen: list[int] = []
    model = asr._model
    encode = model.encode

    def watched(features):
        out = encode(features)
        seen.append(2 * out.shape[1])  # the encoder's stride-2 convolution halves the frames
        return out

    monkeypatch.setattr(model, "encode", watched)
    return seen


@pytest.mark.tool
def test_a_question_is_encoded_without_the_padding_and_heard(stage_cache, monkeypatch):
    line = _line("What time does the library open on Saturday?")
    trimmed = stage_cache.models.asr(ASROptions(model="base"))
    full = stage_cache.models.asr(ASROptions(model="base", window_margin_s=-1))
    seen_trimmed = _encoded_frames(trimmed, monkeypatch)
    seen_full = _encoded_frames(full, monkeypatch)
    text = trimmed.transcribe(line).text.lower()
    assert text.rstrip("?. ") == "what time does the library open on saturday", text
    # The full window hears the words that matter too (it misheard the first two: bench
    # answers measures both as close, word for word, on 136 questions).
    assert "library open on saturday" in full.transcribe(line).text.lower()
    duration_s = len(line) / ASR_RATE
    assert seen_full == [3000]
    assert seen_trimmed == [100 * int(np.ceil(duration_s + 5.0))]


def test_the_window_comes_in_whole_seconds(stage_cache, monkeypatch):
    # Every distinct encoder length costs the process memory it keeps (~1 MB each, measured):
    # utterances a few samples apart share a length; at most 25 lengths exist below 30 s.
    asr = stage_cache.models.asr(ASROptions(model="tiny.en"))
    seen = _encoded_frames(asr, monkeypatch)
    for seconds in (0.5, 0.51, 0.99, 1.01, 3.7, 24.9):
        asr.transcribe(np.zeros(int(seconds * ASR_RATE), np.float32))
    assert seen == [600, 600, 600, 700, 900, 3000]


@pytest.mark.tool
def test_audio_longer_than_the_window_is_still_transcribed_whole(stage_cache, monkeypatch):
    sentence = "Please renew my three books, the cookbook, the atlas and the novel. "
    line = _line(sentence * 8)
    assert len(line) / ASR_RATE > 30
    asr = stage_cache.models.asr(ASROptions(model="tiny.en"))
    seen = _encoded_frames(asr, monkeypatch)
    text = asr.transcribe(line).text
    assert seen[0] == 3000 and len(seen) >= 2  # a full first window, then the rest
    assert text.lower().count("atlas") >= 6, text


def test_the_warm_up_meets_every_window_of_a_question_up_to_10_s(stage_cache, monkeypatch):
    # Each window's buffers are taken at start, not over the first calls (tiny.en: +29 MB
    # over 60 utterances after a 1 s warm-up, flat after this one).
    asr = stage_cache.models.asr(ASROptions(model="tiny.en"))
    seen = _encoded_frames(asr, monkeypatch)
    asr.warm_up()
    assert seen == [100 * (s + 5) for s in range(1, 11)]
    seen.clear()
    for seconds in np.random.default_rng(1).uniform(0.2, 10.0, 30):
        asr.transcribe(np.zeros(int(seconds * ASR_RATE), np.float32))
    assert set(seen) <= {100 * (s + 5) for s in range(1, 11)}
    full = stage_cache.models.asr(ASROptions(model="tiny.en", window_margin_s=-1))
    assert full.warm_up_lengths_s() == (1.0,)  # one 30 s window: one length


def test_the_window_is_padded_with_silence_up_to_its_frames():
    audio = np.ones(int(1.5 * ASR_RATE), np.float32)
    out = padded(audio, 700)
    assert len(out) == 7 * ASR_RATE and np.all(out[: len(audio)] == 1)
    assert not out[len(audio):].any()
    assert len(padded(audio, None)) == 30 * ASR_RATE  # the full window
    long = np.ones(31 * ASR_RATE, np.float32)
    assert padded(long, None) is long  # longer than a window: faster-whisper splits it


@pytest.mark.tool
def test_a_fast_short_question_is_heard_to_its_end(stage_cache):
    # hibari says it in 1.6 s. With zero features after it (faster-whisper's own padding)
    # Whisper base stopped after the first word, "When", and after "...the library" of the next.
    speech = stage_cache.models.tts(TTSOptions(backend="hibari"))
    asr = stage_cache.models.asr(ASROptions(model="base"))
    heard = []
    for text in ("When is story time for the kids?", "How many books does the library own?"):
        s = speech.synthesize(text)
        line = resample(pcm16_to_float(through_phone_line(s.audio, s.sample_rate)),
                        PHONE_RATE, ASR_RATE)
        heard.append(asr.transcribe(line).text.lower())
    assert "for the kids" in heard[0], heard
    assert heard[1].rstrip("?. ").endswith("library own"), heard
