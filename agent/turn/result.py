"""What one turn produced: transcript, reply and per-stage metrics (no logic)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from models.metrics import ASRMetrics, LLMMetrics, TTSMetrics


@dataclass(frozen=True)
class ToolUse:
    """A tool the turn ran (or refused) and how it went, for the call log."""

    name: str
    arguments: str
    """As JSON."""
    outcome: str
    """ok, invalid, malformed, timeout, http-500, bad-json, unreachable, error."""
    latency_s: float
    detail: str = ""
    source: str = "llm"
    """Who chose it: ``llm``, or ``words`` (the caller's words matched a look-up's
    description: :mod:`agent.turn.routing`)."""


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
    action: Any = None
    """A :class:`~agent.turn.tools.ToolCall` the call carries out once this reply is heard
    (end, transfer, take a message, collect digits)."""
    tools: list[ToolUse] = field(default_factory=list)
    """Tools run (or refused) in this turn."""
    hold: bool = False
    """The caller asked the agent to wait (:func:`agent.turn.intent.asks_to_wait`): the reply
    was the profile's ``hold_ack``, and the call waits for them up to ``limits.hold_s``."""
    kept: str = ""
    """Not for the LLM: ``message`` (part of a message the caller left) or ``transferring``
    (said while a transfer ran)."""
    tool_error: str = ""
    """The tool that failed and why; the caller heard the profile's ``tool_error``."""
    unfounded: str = ""
    """A clause not said because it stated numbers no fact holds (the caller heard the
    profile's ``dont_know`` instead)."""

    @property
    def no_words(self) -> bool:
        """ASR ran and heard nothing (a cancelled turn's ASR may never have run)."""
        return not self.transcript and not self.cancelled
