"""The timeline of one turn: monotonic stamps of its milestones, owned by the turn.

Stamps, not durations, are kept, so the stage durations (named in :mod:`db.stages`) add up to
voice-to-voice exactly. A stamp that is missing or out of order yields ``None`` for the stages
that touch it, never a made-up value.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from db.stages import STAGES, STAMPS, column


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

    def stages_s(self) -> dict[str, float | None]:
        """Every stage in seconds."""
        return {s: self.stage_s(s) for s in STAGES}

    @property
    def voice_to_voice_s(self) -> float | None:
        """End of caller speech to first reply audio on the line."""
        if any(self.stage_s(s) is None for s in STAGES):
            return None
        return self.first_frame_out_at - self.speech_end_at  # type: ignore[operator]

    def settle(self) -> None:
        """Clamp stamps after the endpoint to it.

        Work done speculatively before the endpoint cost the caller nothing, so its stages
        cost nothing on the critical path.
        """
        if self.endpoint_at is None:
            return
        for name in STAMPS[2:]:
            value = getattr(self, name)
            if value is not None and value < self.endpoint_at:
                setattr(self, name, self.endpoint_at)

    def record_fields(self) -> dict[str, float | None]:
        """The call log's per-stage columns and voice-to-voice (``TurnRecord`` fields), in s."""
        out = {column(s): v for s, v in self.stages_s().items()}
        out[column("voice_to_voice")] = self.voice_to_voice_s
        return out

    def as_dict(self) -> dict[str, float | None]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

