"""VAD segmentation with the real Silero model on espeak-ng speech."""

import math

import numpy as np
import pytest

from dialplan.options import AudioOptions
from models.audio import line_to_asr, resample
from models.vad.base import CHUNK, SAMPLE_RATE
from models.vad.segmenter import (
    Segmenter,
    SpeechPaused,
    SpeechResumed,
    SpeechSoFar,
    SpeechStarted,
    Utterance,
)
from models.vad.silero import SileroVAD
from testkit.samples import spoken

pytestmark = pytest.mark.model
OPTS = AudioOptions(endpoint_silence_s=0.5, min_speech_s=0.2, prefill_every_s=0)


@pytest.fixture(scope="module")
def vad():
    return SileroVAD()


@pytest.fixture(scope="module")
def words():
    a, ra = spoken("Please book a table for two.")
    b, rb = spoken("Tomorrow at seven.")
    return trim(resample(a, ra, 16000)), trim(resample(b, rb, 16000))


def trim(x: np.ndarray) -> np.ndarray:
    """espeak-ng pads its output with silence; the gaps below must be the only silence."""
    loud = np.flatnonzero(np.abs(x) > 0.01)
    return x[loud[0] : loud[-1] + 1]


def segment(vad, audio: np.ndarray, frame: int = 320, opts: AudioOptions = OPTS) -> list:
    seg = Segmenter(vad.new_stream(), opts)
    events = []
    for i in range(0, len(audio), frame):
        events += seg.feed(audio[i : i + frame])
    return events + seg.flush()


def with_gap(a, b, gap_s):
    silence = lambda s: np.zeros(int(s * 16000), np.float32)  # noqa: E731
    return np.concatenate([silence(0.3), a, silence(gap_s), b, silence(1.0)])


@pytest.mark.tool
def test_800ms_gap_gives_two_utterances(vad, words):
    events = segment(vad, with_gap(*words, 0.8))
    utts = [e for e in events if isinstance(e, Utterance)]
    starts = [e for e in events if isinstance(e, SpeechStarted)]
    assert len(utts) == 2 and len(starts) == 2
    first, second = utts
    assert first.end_s < second.start_s
    # The second utterance begins after the first one's endpoint (hangover elapsed).
    assert first.endpoint_s - first.end_s == pytest.approx(0.5, abs=0.07)
    assert 0.3 <= first.duration_s <= len(words[0]) / 16000 + 0.6


@pytest.mark.tool
def test_150ms_gap_gives_one_utterance(vad, words):
    utts = [e for e in segment(vad, with_gap(*words, 0.15)) if isinstance(e, Utterance)]
    assert len(utts) == 1
    total = (len(words[0]) + len(words[1])) / 16000
    assert utts[0].duration_s >= total * 0.8


def test_silence_and_short_click_give_nothing(vad):
    audio = np.zeros(32000, np.float32)
    audio[16000 : 16000 + 800] = np.random.default_rng(0).normal(0, 0.3, 800)  # 50 ms burst
    assert segment(vad, audio) == []


@pytest.mark.tool
def test_frame_size_does_not_change_segments(vad, words):
    audio = with_gap(*words, 0.8)
    a = [(e.start_s, e.end_s) for e in segment(vad, audio, 320) if isinstance(e, Utterance)]
    b = [(e.start_s, e.end_s) for e in segment(vad, audio, 160) if isinstance(e, Utterance)]
    assert a == b


@pytest.mark.tool
def test_pause_is_announced_with_the_final_audio(vad, words):
    """SpeechPaused (speculation point) carries exactly the audio the Utterance will have."""
    events = segment(vad, with_gap(*words, 0.8))
    kinds = [type(e).__name__ for e in events]
    assert kinds == ["SpeechStarted", "SpeechPaused", "Utterance"] * 2
    for paused, utt in ((events[1], events[2]), (events[4], events[5])):
        assert np.array_equal(paused.audio, utt.audio)
        assert paused.end_s == utt.end_s
        # announced at the first whole VAD chunk past speculate_s (0.09 s: 3 chunks, 96 ms)
        chunks = math.ceil(OPTS.speculate_s * SAMPLE_RATE / CHUNK)
        assert paused.at_s - paused.end_s == pytest.approx(chunks * CHUNK / SAMPLE_RATE)


@pytest.mark.tool
def test_resumed_speech_withdraws_the_pause(vad, words):
    events = segment(vad, with_gap(*words, 0.33))  # longer than speculate_s, under the hangover
    kinds = [type(e).__name__ for e in events]
    assert kinds.count("Utterance") == 1
    assert "SpeechResumed" in kinds
    assert kinds.index("SpeechPaused") < kinds.index("SpeechResumed")
    resumed = next(e for e in events if isinstance(e, SpeechResumed))
    paused = [e for e in events if isinstance(e, SpeechPaused)]
    utt = events[-1]
    assert isinstance(utt, Utterance) and utt.end_s > resumed.at_s - 0.1
    assert np.array_equal(paused[-1].audio, utt.audio)


@pytest.mark.tool
def test_speech_so_far_comes_every_prefill_every_s_of_speech(vad, words):
    # While the caller speaks, the audio so far every 0.5 s of it (for the LLM prefill);
    # none during the pause, and each is the start of the utterance that follows.
    opts = AudioOptions(endpoint_silence_s=0.5, min_speech_s=0.2, prefill_every_s=0.5)
    events = segment(vad, with_gap(*words, 0.8), opts=opts)
    so_far = [e for e in events if isinstance(e, SpeechSoFar)]
    utts = [e for e in events if isinstance(e, Utterance)]
    first = [e for e in so_far if e.at_s < utts[0].endpoint_s]
    every = int((utts[0].end_s - utts[0].start_s) / 0.5)
    assert every - 1 <= len(first) <= every
    for a, b in zip(first, first[1:], strict=False):  # later only past a silent chunk
        assert 0.5 - 1e-9 <= b.at_s - a.at_s <= 0.5 + 4 * CHUNK / SAMPLE_RATE
    for e in first:
        assert e.start_s == utts[0].start_s and e.at_s <= utts[0].end_s
        assert np.array_equal(e.audio, utts[0].audio[:len(e.audio)])
    assert len(so_far) > len(first)  # the second utterance has its own


class CountingStream:
    """The real Silero stream, counting the chunks it is asked to score."""

    def __init__(self, inner):
        self.inner, self.scored = inner, 0

    def probability(self, chunk):
        self.scored += 1
        return self.inner.probability(chunk)


@pytest.mark.tool
@pytest.mark.parametrize("idle", ["zeros", "A-law +8", "mu-law dither"])
def test_a_quiet_line_is_not_scored_after_a_second(vad, words, idle):
    """A silent line costs the VAD 1 s of chunks, and the speech after it is found as before."""
    a, b = words
    n = int(6 * SAMPLE_RATE)
    line = {"zeros": np.zeros(n, np.float32), "A-law +8": np.full(n, 8 / 32768, np.float32),
            # sox's dither on a silent mu-law line (bench call's callers), upsampled as a call
            "mu-law dither": line_to_asr(np.random.default_rng(0).choice(
                np.array([-8, 0, 8], np.float32) / 32768, n // 2))}[idle]
    audio = np.concatenate([line, a, line, b, line])
    stream = CountingStream(vad.new_stream())
    seg = Segmenter(stream, OPTS)
    events = []
    for i in range(0, len(audio), 320):
        events += seg.feed(audio[i : i + 320])
    utts = [e for e in events + seg.flush() if isinstance(e, Utterance)]
    assert len(utts) == 2
    assert utts[0].start_s == pytest.approx(6.0, abs=0.35)
    assert utts[1].start_s == pytest.approx(12.0 + len(a) / SAMPLE_RATE, abs=0.35)
    # Speech and ~1 s of each silence (three of them) are scored, not the other 5 s of each.
    speech_chunks = (len(a) + len(b)) / CHUNK
    per_second = SAMPLE_RATE / CHUNK
    assert stream.scored <= speech_chunks + 3 * 1.1 * per_second + 40  # + hangovers
    assert stream.scored < len(audio) / CHUNK / 2
