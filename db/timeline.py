"""The timeline of one turn: monotonic stamps, from which every stage duration is derived.

Stamps, not durations, are stored, so the stage durations add up to voice-to-voice exactly.
A stamp that is missing or out of order yields ``None`` for the stages that touch it, never a
made-up value.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

# Consecutive stamps; each stage is the difference between a stamp and the one before it.
STAMPS = (
    "speech_end_at",
    "endpoint_at",
    "asr_done_at",
    "llm_first_token_at",
    "first_chunk_text_at",
    "tts_first_audio_at",
    "first_frame_out_at",
)
STAGES = ("endpoint", "asr", "llm_ttft", "first_chunk", "tts_first_audio", "playout")


@dataclass
class TurnTimeline:
    """Monotonic stamps (``time.monotonic()``) of one turn's milestones."""

    speech_start_at: float | None = None
    """VAD start of caller speech."""
    speech_end_at: float | None = None
    """VAD end of caller speech (last speech chunk)."""
    endpoint_at: float | None = None
    """Hangover elapsed: the turn is over."""
    asr_done_at: float | None = None
    llm_first_token_at: float | None = None
    first_chunk_text_at: float | None = None
    """First clause/sentence of the reply ready for TTS."""
    tts_first_audio_at: float | None = None
    first_frame_out_at: float | None = None
    """First reply frame handed to the line (or to the output, in simulation)."""
    llm_done_at: float | None = None
    tts_done_at: float | None = None

    def stage_s(self, stage: str) -> float | None:
        """Duration of one stage in seconds, or None if its stamps are missing or reversed."""
        i = STAGES.index(stage)
        a, b = getattr(self, STAMPS[i]), getattr(self, STAMPS[i + 1])
        if a is None or b is None or b < a:
            return None
        return b - a

    def stages_ms(self) -> dict[str, float | None]:
        """Every stage in milliseconds."""
        return {s: _ms(self.stage_s(s)) for s in STAGES}

    @property
    def voice_to_voice_s(self) -> float | None:
        """End of caller speech to first reply audio on the line."""
        if any(self.stage_s(s) is None for s in STAGES):
            return None
        return self.first_frame_out_at - self.speech_end_at  # type: ignore[operator]

    def settle(self) -> None:
        """Clamp stamps after the endpoint to it.

        Work done speculatively before the endpoint cost the caller nothing, so its stages
        count 0 ms on the critical path.
        """
        if self.endpoint_at is None:
            return
        for name in STAMPS[2:]:
            value = getattr(self, name)
            if value is not None and value < self.endpoint_at:
                setattr(self, name, self.endpoint_at)

    def record_fields(self) -> dict[str, float | None]:
        """The call log's per-stage ms columns (``TurnRecord`` field names) and voice-to-voice."""
        ms = self.stages_ms()
        v2v = self.voice_to_voice_s
        return {
            "endpoint_ms": ms["endpoint"],
            "asr_ms": ms["asr"],
            "llm_ttft_ms": ms["llm_ttft"],
            "first_chunk_ms": ms["first_chunk"],
            "tts_first_audio_ms": ms["tts_first_audio"],
            "playout_ms": ms["playout"],
            "voice_to_voice_ms": _ms(v2v),
        }

    def as_dict(self) -> dict[str, float | None]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _ms(s: float | None) -> float | None:
    return None if s is None else s * 1000.0
