"""The TTS stage interface: text in, mono float32 audio out, timing recorded."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from models.metrics import TTSMetrics
from models.scheduler import SCHEDULER


@dataclass(frozen=True)
class Speech:
    """Synthesised audio for one text chunk."""

    audio: np.ndarray
    sample_rate: int
    metrics: TTSMetrics


class TTS(ABC):
    """Text to speech, one chunk (clause or sentence) at a time."""

    model_name: str = ""
    voice: str = ""
    sample_rate: int = 24000

    def synthesize(self, text: str) -> Speech:
        """Speak ``text``; empty or unpronounceable text gives empty audio."""
        with SCHEDULER.job("tts"):
            started = time.monotonic()
            audio = self._synthesize_impl(text) if text.strip() else np.zeros(0, np.float32)
            ended = time.monotonic()
        audio = np.ascontiguousarray(audio, dtype=np.float32).reshape(-1)
        m = TTSMetrics(
            model=self.model_name,
            started_at=started,
            ended_at=ended,
            audio_s=len(audio) / self.sample_rate,
            chars=len(text),
            voice=self.voice,
        )
        return Speech(audio=audio, sample_rate=self.sample_rate, metrics=m)

    @abstractmethod
    def _synthesize_impl(self, text: str) -> np.ndarray:
        """Return audio at ``self.sample_rate``."""
