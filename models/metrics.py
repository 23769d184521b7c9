"""One metrics record per stage (VAD, end of turn, ASR, LLM, TTS), stamped on the monotonic clock.

Stage base classes fill these in, so no backend can skip them. Durations are seconds with an
``_s`` suffix; stamps end in ``_at`` and come from :func:`time.monotonic`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class ASRMetrics:
    """One utterance transcribed."""

    model: str
    started_at: float
    ended_at: float
    audio_s: float
    """Seconds of audio transcribed."""
    backend: str = ""
    """ASR backend name (faster-whisper, voxtral)."""
    batch_size: int = 1
    """Utterances that shared the forward pass (Voxtral batching)."""
    stage: Literal["asr"] = "asr"

    @property
    def duration_s(self) -> float:
        return self.ended_at - self.started_at

    @property
    def rtf(self) -> float:
        """Real-time factor: processing seconds per audio second."""
        return self.duration_s / self.audio_s if self.audio_s > 0 else 0.0


@dataclass(frozen=True)
class LLMMetrics:
    """One streamed reply."""

    model: str
    started_at: float
    ended_at: float
    first_token_at: float | None
    """When the first text token arrived (None: no token)."""
    tokens: int
    prompt_tokens: int = 0
    """Tokens in the prompt, of which ``cached_tokens`` were reused from the KV cache."""
    cached_tokens: int = 0
    stage: Literal["llm"] = "llm"

    @property
    def duration_s(self) -> float:
        return self.ended_at - self.started_at

    @property
    def ttft_s(self) -> float | None:
        return None if self.first_token_at is None else self.first_token_at - self.started_at

    @property
    def tokens_per_s(self) -> float:
        span = self.ended_at - (self.first_token_at or self.started_at)
        return (self.tokens - 1) / span if self.tokens > 1 and span > 0 else 0.0


@dataclass(frozen=True)
class TTSMetrics:
    """One text chunk synthesised."""

    model: str
    started_at: float
    ended_at: float
    audio_s: float
    chars: int
    voice: str = ""
    stage: Literal["tts"] = "tts"

    @property
    def duration_s(self) -> float:
        return self.ended_at - self.started_at

    @property
    def rtf(self) -> float:
        return self.duration_s / self.audio_s if self.audio_s > 0 else 0.0


@dataclass(frozen=True)
class VADMetrics:
    """VAD work over one utterance."""

    model: str
    started_at: float
    ended_at: float
    inference_s: float
    """Seconds spent inside the VAD model for this utterance."""
    frames: int
    stage: Literal["vad"] = "vad"


@dataclass(frozen=True)
class EOTMetrics:
    """One end-of-turn decision."""

    model: str
    started_at: float
    ended_at: float
    audio_s: float
    """Seconds of turn audio scored (the model sees at most its window)."""
    probability: float
    """The model's probability that the turn was complete."""
    stage: Literal["eot"] = "eot"

    @property
    def duration_s(self) -> float:
        return self.ended_at - self.started_at


StageMetrics = ASRMetrics | LLMMetrics | TTSMetrics | VADMetrics | EOTMetrics
