"""What one turn produced: transcript, reply and per-stage metrics (no logic)."""

from __future__ import annotations

from dataclasses import dataclass, field

from models.metrics import ASRMetrics, LLMMetrics, TTSMetrics


@dataclass
class TurnResult:
    """What happened in one turn."""

    transcript: str = ""
    reply_text: str = ""
    """Reply as generated (all of it, or up to the barge-in)."""
    asr: ASRMetrics | None = None
    llm: LLMMetrics | None = None
    tts: list[TTSMetrics] = field(default_factory=list)
    audio_in_s: float = 0.0
    audio_out_s: float = 0.0
    cancelled: bool = False
    asked_to_repeat: str = ""
    """Why the agent asked the caller to repeat instead of answering ("" = it answered)."""

    @property
    def no_words(self) -> bool:
        """ASR ran and heard nothing (a cancelled turn's ASR may never have run)."""
        return not self.transcript and not self.cancelled
