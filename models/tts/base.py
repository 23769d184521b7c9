"""The TTS stage interface: text in, mono float32 audio out, timing recorded."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from models.audio import SILENCE_PEAK
from models.metrics import TTSMetrics
from models.scheduled import Scheduled

ONSET_KEEP_S = 0.005
"""Kept before the first sound, so the onset itself is never cut."""


@dataclass(frozen=True)
class Speech:
    """Synthesised audio for one text chunk."""

    audio: np.ndarray
    sample_rate: int
    metrics: TTSMetrics


def cpu_session(path: str, threads: int):
    """An onnxruntime CPU session for a TTS model.

    ``threads`` intra-op threads (Kokoro runs much faster on 2 than on 1: bench tts), one
    inter-op, and no spinning between runs: the LLM is generating on the same cores meanwhile.
    """
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    # Memory patterns are planned per input shape, and every chunk of text has its own: with
    # them, Piper's RSS grew over its first chunks far more than without, at the same speed.
    so.enable_mem_pattern = False
    return ort.InferenceSession(str(path), sess_options=so, providers=["CPUExecutionProvider"])


class TTS(Scheduled, ABC):
    """Text to speech, one chunk (clause or sentence) at a time."""

    model_name: str = ""
    voice: str = ""
    sample_rate: int = 24000
    narrow: bool = False
    """A chunk may be spoken on one core beside another turn's job (the backend asks
    ``self.scheduler.cores()`` which it got)."""

    lead: TTS | None = None
    """Speaks a reply's first clause instead (``tts.lead``): a voice as alike and much faster."""
    synth_s_per_char: float = 0.0
    """Seconds this voice took per character of text, averaged over its recent chunks (0 until
    it has spoken): how long the next chunk will take, so a reply can tell whether it would be
    ready before the audio ahead of it runs out."""

    def synthesize(self, text: str, first: bool = False) -> Speech:
        """Speak ``text``; empty or unpronounceable text gives empty audio.

        ``first``: a clause the caller would otherwise wait for (a reply's first): the lead
        voice speaks it, where there is one.
        """
        if first and self.lead is not None:
            return self.lead.synthesize(text)
        with self.scheduler.job("tts", narrow=self.narrow):
            started = time.monotonic()
            audio = self._synthesize_impl(text) if text.strip() else np.zeros(0, np.float32)
            ended = time.monotonic()
        audio = trim_onset(np.ascontiguousarray(audio, dtype=np.float32).reshape(-1),
                           self.sample_rate)
        if text.strip():
            rate = (ended - started) / len(text)
            self.synth_s_per_char = (rate if not self.synth_s_per_char
                                     else 0.7 * self.synth_s_per_char + 0.3 * rate)
        m = TTSMetrics(
            model=self.model_name,
            started_at=started,
            ended_at=ended,
            audio_s=len(audio) / self.sample_rate,
            chars=len(text),
            voice=self.voice,
        )
        return Speech(audio=audio, sample_rate=self.sample_rate, metrics=m)

    def warm_up(self, text: str) -> None:
        """Speak ``text`` once (first-run cost; a runtime's memory arena grows to it)."""
        self.synthesize(text)

    @abstractmethod
    def _synthesize_impl(self, text: str) -> np.ndarray:
        """Return audio at ``self.sample_rate``."""


def trim_onset(audio: np.ndarray, rate: int) -> np.ndarray:
    """``audio`` from ``ONSET_KEEP_S`` before its first sound (all of it if it has none).

    The silence before it would be waited through on the path to a reply's first audio: Piper
    (joe) opens every chunk with some.
    """
    loud = np.flatnonzero(np.abs(audio) > SILENCE_PEAK)
    if not len(loud):
        return audio
    return audio[max(0, loud[0] - int(ONSET_KEEP_S * rate)):]
