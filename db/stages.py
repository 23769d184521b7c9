"""The one table that names the stages of a reply, as the call log stores them.

A turn keeps stamps (:class:`agent.turn.timeline.TurnTimeline`); the call log keeps the
durations between consecutive stamps, so the stages add up to voice-to-voice exactly.
Durations are seconds everywhere in records and the database; only what people read (tables,
charts, log lines) shows ms.

Every list of stages elsewhere (record fields, ``turns`` columns, report metrics, table columns,
chart colours) is derived from :data:`STAGES`, :data:`METRICS` and :func:`column` here, so a
stage is named once.
"""

from __future__ import annotations

# The critical path of a reply, in order: each stage with the stamp that ends it. The first
# stage starts at the end of caller speech; each later one where the one before it ended.
_STAGE_ENDS = (
    ("endpoint", "endpoint_at"),
    ("asr", "asr_done_at"),
    ("llm_ttft", "llm_first_token_at"),
    ("first_chunk", "first_chunk_text_at"),
    ("tts_first_audio", "tts_first_audio_at"),
    ("playout", "first_frame_out_at"),
)
STAGES = tuple(stage for stage, _ in _STAGE_ENDS)
STAMPS = ("speech_end_at", *(stamp for _, stamp in _STAGE_ENDS))
"""Consecutive stamps; each stage is the difference between a stamp and the one before it."""
METRICS = (*STAGES, "voice_to_voice")
"""Every stage in timeline order, then their sum."""
TOTALS = ("llm_total", "tts_total")
"""Whole-model durations that overlap the critical path (LLM to its last token, all TTS)."""
LABELS = {
    "endpoint": "endpoint",
    "asr": "ASR",
    "llm_ttft": "LLM first token",
    "first_chunk": "first clause",
    "tts_first_audio": "TTS first audio",
    "playout": "playout",
    "voice_to_voice": "voice-to-voice",
    "llm_total": "LLM total",
    "tts_total": "TTS total",
}
"""How people read each metric name, in tables and charts."""


def column(metric: str) -> str:
    """The ``TurnRecord`` field and ``turns`` column holding a metric: seconds, ``<metric>_s``."""
    return f"{metric}_s"


TIMING_COLUMNS = tuple(column(m) for m in (*METRICS, *TOTALS))
"""Every duration column of a turn, in seconds."""
