"""Turn a stream of 16 kHz audio into utterances with VAD hysteresis and an endpoint hangover.

Times here are *stream offsets* in seconds (audio time since the stream began), not clock
stamps: the caller maps them to its clock. That keeps the segmenter deterministic in tests and
in faster-than-real-time simulation.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass

import numpy as np

from dialplan.options import SPEECH_TAIL_S, AudioOptions
from models.audio import SILENCE_PEAK
from models.metrics import VADMetrics
from models.vad.base import CHUNK, SAMPLE_RATE, VADStream

PREROLL_S = 0.3  # audio kept before the detected onset: Silero fires a little into a word
QUIET_HOLD_S = 1.0
"""Quiet after which the VAD is not run until the line carries sound again.

Silero is cheap per chunk, but its cost is spent again in every silent second of a held or
listening call, and on 2 cores that CPU is taken from the model work a caller waits for.
Holding its state is what it would hold had the silence lasted this long: on questions after
a long silence, hardly a chunk crossed the threshold differently (fewer than with the state
reset instead).
"""


@dataclass(frozen=True)
class SpeechStarted:
    """Speech has lasted ``min_speech_s``: a turn (or a barge-in) has begun."""

    start_s: float
    at_s: float
    """Stream offset at which the start was confirmed."""


@dataclass(frozen=True)
class Utterance:
    """A finished utterance, endpointed after the hangover."""

    audio: np.ndarray
    start_s: float
    end_s: float
    """Offset of the end of the last speech chunk."""
    endpoint_s: float
    """Offset at which the hangover elapsed and the turn was ended."""
    vad: VADMetrics

    @property
    def duration_s(self) -> float:
        return len(self.audio) / SAMPLE_RATE


@dataclass(frozen=True)
class SpeechPaused:
    """Silence has lasted ``speculate_s`` inside an utterance: the turn may be over.

    ``audio`` is exactly what the :class:`Utterance` will hold if the caller stays silent until
    the endpoint, so work started on it now (speculatively) is valid then.
    """

    audio: np.ndarray
    start_s: float
    end_s: float
    at_s: float

    @property
    def duration_s(self) -> float:
        return len(self.audio) / SAMPLE_RATE


@dataclass(frozen=True)
class SpeechSoFar:
    """The caller is still speaking; ``audio`` is their utterance up to now.

    Every ``prefill_every_s`` of it, for work that can start before the turn ends (the words
    so far into the LLM's cache).
    """

    audio: np.ndarray
    start_s: float
    at_s: float


@dataclass(frozen=True)
class SpeechResumed:
    """The caller spoke again after a :class:`SpeechPaused`: drop the speculative work."""

    at_s: float


SegmentEvent = SpeechStarted | SpeechPaused | SpeechResumed | SpeechSoFar | Utterance


class Segmenter:
    """Per-call speech segmentation; feed it frames, get events."""

    def __init__(self, stream: VADStream, options: AudioOptions, model: str = "silero-vad"):
        self._vad = stream
        self._o = options
        self._model = model
        self._pending = np.zeros(0, np.float32)
        self._offset = 0  # samples consumed into chunks
        self._preroll: deque[np.ndarray] = deque(maxlen=int(PREROLL_S * SAMPLE_RATE / CHUNK) + 1)
        self._reset()
        self.last_probability = 0.0
        self._quiet = 0  # chunks of digital silence in a row
        self._quiet_hold = int(QUIET_HOLD_S * SAMPLE_RATE / CHUNK)

    def _reset(self) -> None:
        self._in_speech = False
        self._confirmed = False
        self._chunks: list[np.ndarray] = []
        self._start_s = 0.0
        self._speech_run_s = 0.0
        self._silence_s = 0.0
        self._last_speech_end_s = 0.0
        self._vad_s = 0.0
        self._frames = 0
        self._paused = False
        self._so_far_s = 0.0  # speech length at the last SpeechSoFar
        self._started_at = time.monotonic()

    @property
    def in_speech(self) -> bool:
        """True while confirmed speech is in progress (not yet endpointed)."""
        return self._confirmed

    @property
    def speech_start_s(self) -> float | None:
        """Where the speech in progress began (stream offset, s); None between utterances."""
        return self._start_s if self._in_speech else None

    @property
    def offset_s(self) -> float:
        return self._offset / SAMPLE_RATE

    def feed(self, audio: np.ndarray) -> list[SegmentEvent]:
        """Add 16 kHz float32 audio of any length; return the events it completed."""
        self._pending = np.concatenate([self._pending, audio.astype(np.float32, copy=False)])
        events: list[SegmentEvent] = []
        while len(self._pending) >= CHUNK:
            chunk, self._pending = self._pending[:CHUNK], self._pending[CHUNK:]
            event = self._step(chunk)
            if event is not None:
                events.append(event)
        return events

    def flush(self) -> list[SegmentEvent]:
        """End of stream: close an utterance in progress."""
        if self._confirmed:
            return [self._finish(self.offset_s)]
        return []

    def _probability(self, chunk: np.ndarray) -> float:
        """The VAD's speech probability, or the last one deep into a quiet line."""
        # A phone that suppresses silence, a caller on mute, a line on hold, one waiting.
        if float(np.max(np.abs(chunk))) < SILENCE_PEAK:
            self._quiet += 1
            if self._quiet > self._quiet_hold:
                return self.last_probability
        else:
            self._quiet = 0
        return self._vad.probability(chunk)

    def _step(self, chunk: np.ndarray) -> SegmentEvent | None:
        t0 = time.perf_counter()
        p = self._probability(chunk)
        self._vad_s += time.perf_counter() - t0
        self._frames += 1
        self.last_probability = p
        begin_s = self._offset / SAMPLE_RATE
        self._offset += CHUNK
        end_s = self._offset / SAMPLE_RATE
        chunk_s = CHUNK / SAMPLE_RATE
        o = self._o

        if not self._in_speech:
            self._preroll.append(chunk)
            if p >= o.vad_threshold:
                self._in_speech = True
                self._start_s = begin_s
                self._speech_run_s = chunk_s
                self._last_speech_end_s = end_s
                self._chunks = list(self._preroll)
                self._preroll.clear()
            return None

        self._chunks.append(chunk)
        resumed = None
        if p >= o.vad_release:
            self._silence_s = 0.0
            if p >= o.vad_threshold or self._confirmed:
                self._last_speech_end_s = end_s
            self._speech_run_s += chunk_s
            if self._paused:
                self._paused = False
                resumed = SpeechResumed(at_s=end_s)
        else:
            self._silence_s += chunk_s
        if not self._confirmed:
            if self._speech_run_s >= o.min_speech_s:
                self._confirmed = True
                return SpeechStarted(start_s=self._start_s, at_s=end_s)
            if self._silence_s >= o.endpoint_silence_s or self._silence_s > 0.25:
                # A blip shorter than min_speech: drop it, keep its tail as pre-roll.
                tail = self._chunks[-self._preroll.maxlen :]
                self._reset()
                self._preroll.extend(tail)
            return None
        if self._silence_s >= o.endpoint_silence_s:
            return self._finish(end_s)
        if end_s - self._start_s >= o.max_utterance_s:
            return self._finish(end_s)
        if resumed is not None:
            return resumed
        every = o.prefill_every_s
        if every and self._silence_s == 0 and end_s - self._start_s >= self._so_far_s + every:
            self._so_far_s = end_s - self._start_s
            return SpeechSoFar(audio=np.concatenate(self._chunks), start_s=self._start_s,
                               at_s=end_s)
        # AudioOptions keeps speculate_s under the hangover, so the pause comes first.
        if o.speculate_s and not self._paused and self._silence_s >= o.speculate_s:
            self._paused = True
            return SpeechPaused(
                audio=self._trimmed_audio(),
                start_s=self._start_s,
                end_s=self._last_speech_end_s,
                at_s=end_s,
            )
        return None

    def _trimmed_audio(self) -> np.ndarray:
        audio = np.concatenate(self._chunks) if self._chunks else np.zeros(0, np.float32)
        # Keep SPEECH_TAIL_S after the last speech chunk (word tails), not the rest of the
        # hangover.
        # In whole samples: the same cut at the speculative pause and at the endpoint (float
        # seconds once made them differ by one sample).
        start = round(self._start_s * SAMPLE_RATE)
        preroll = len(audio) - (self._offset - start)
        speech = round(self._last_speech_end_s * SAMPLE_RATE) - start
        keep = preroll + speech + round(SPEECH_TAIL_S * SAMPLE_RATE)
        return audio[: max(0, keep)]

    def _finish(self, endpoint_s: float) -> Utterance:
        audio = self._trimmed_audio()
        vad = VADMetrics(
            model=self._model,
            started_at=self._started_at,
            ended_at=time.monotonic(),
            inference_s=self._vad_s,
            frames=self._frames,
        )
        utt = Utterance(
            audio=audio,
            start_s=self._start_s,
            end_s=self._last_speech_end_s,
            endpoint_s=endpoint_s,
            vad=vad,
        )
        self._reset()
        return utt
