"""What one call writes: call-log records (``CallLog.put``) and structured log lines.

Split from :mod:`agent.call.session` so the state machine reads as decisions, not bookkeeping.
Imports no SIP and no database code: records are plain dataclasses from :mod:`db.records`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import UTC, datetime

from agent import log
from agent.call.playout import PlayoutMetrics
from agent.call.turn import Turn
from agent.turn.result import TurnResult
from agent.turn.runner import Stages, turn_record
from db.records import (
    PENDING,
    CallEnded,
    CallLog,
    CallStarted,
    EventRecord,
    MessageRecord,
    ToolCallRecord,
    TurnRecord,
)
from dialplan.profile import Profile


@dataclass
class CallInfo:
    """What the SIP side knows about the call when the session is created."""

    extension: str = ""
    caller_uri: str = ""
    sip_call_id: str = ""
    offered_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    source: str = "sip"
    worker: str | None = None
    """The cluster worker answering the call (None outside a cluster)."""
    host: str | None = None
    """The machine answering it."""
    direction: str = "inbound"
    """inbound, or outbound for a call the agent placed (``callagent dial``)."""


class CallRecorder:
    """Writes one call's records and log lines; ``put`` never blocks, so neither does this."""

    def __init__(self, call_log: CallLog, call_id: str):
        self._log = call_log
        self.call_id = call_id
        self.turns = 0
        self.pending: list[Turn] = []
        """Finished turns waiting for their reply to play out (the record needs its stamps)."""
        self._seq = 0
        self._open: dict[int, ToolCallRecord] = {}  # started actions without an outcome

    def started(self, info: CallInfo, profile: Profile, stages: Stages) -> None:
        self._log.put(CallStarted(
            call_id=self.call_id, started_at=info.offered_at, answered_at=datetime.now(UTC),
            caller_uri=info.caller_uri, called_extension=info.extension, profile=profile.name,
            asr_backend=stages.asr.backend, asr_model=stages.asr.model_name,
            llm_model=stages.llm.model_name, tts_voice=profile.tts.voice, source=info.source,
            worker=info.worker, host=info.host, direction=info.direction))
        log.event("call-answered", self.call_id, extension=info.extension,
                  caller=info.caller_uri, sip_call_id=info.sip_call_id, profile=profile.name)

    def leg(self, call_id: str) -> CallRecorder:
        """The records of another call this one placed (an attended transfer's consult leg)."""
        return CallRecorder(self._log, call_id)

    def event(self, kind: str, detail: str) -> None:
        """An EventRecord (dtmf, barge-in, error, state...)."""
        self._log.put(EventRecord(self.call_id, datetime.now(UTC), kind, detail))

    def tool(self, name: str, arguments: str, source: str, outcome: str, detail: str = "",
             latency_s: float | None = None, turn_index: int | None = None) -> None:
        """A ToolCallRecord and its log line: an action taken or tried, and how it ended."""
        self._log.put(ToolCallRecord(self.call_id, datetime.now(UTC), name, arguments, source,
                                     outcome, detail, latency_s, turn_index))
        log.event("tool", self.call_id, tool=name, source=source, outcome=outcome,
                  arguments=arguments)

    def action_started(self, name: str, arguments: str, source: str,
                       turn_index: int | None, detail: str = "") -> int:
        """A ``pending`` row for an action that has begun and ends later (a transfer).

        Returns:
            The action's number (``seq``) for :meth:`action_news`; whatever the call's end,
            :meth:`ended` closes it if nothing else did.
        """
        self._seq += 1
        rec = ToolCallRecord(self.call_id, datetime.now(UTC), name, arguments, source, PENDING,
                             detail, 0.0, turn_index, seq=self._seq)
        self._open[self._seq] = rec
        self._log.put(rec)
        return self._seq

    def action_news(self, seq: int, outcome: str, detail: str,
                    latency_s: float | None) -> None:
        """Update a started action's row: still ``pending``, or its outcome (which closes it)."""
        rec = dataclasses.replace(self._open[seq], outcome=outcome, detail=detail,
                                  latency_s=latency_s)
        self._log.put(rec)
        if outcome == PENDING:
            self._open[seq] = rec
            return
        del self._open[seq]
        log.event("tool", self.call_id, tool=rec.name, source=rec.source, outcome=outcome,
                  arguments=rec.arguments)

    def message(self, text: str, caller: str, audio_path: str | None,
                duration_s: float) -> None:
        """A MessageRecord: what a caller asked to be passed on."""
        self._log.put(MessageRecord(self.call_id, datetime.now(UTC), text, caller, audio_path,
                                    duration_s))

    def queue(self, turn: Turn) -> None:
        """Record ``turn`` once its reply has played out (or was cut, or silent): :meth:`flush`."""
        self.pending.append(turn)

    def unqueue(self, turn: Turn) -> None:
        """``turn`` is not recorded on its own after all (merged into the next one)."""
        if turn in self.pending:
            self.pending.remove(turn)

    def flush(self, playout_busy: bool, call_t0: float, end_reason: str = "",
              final: bool = False) -> None:
        """Record pending turns once their reply has played out, or was cut or silent.

        Args:
            playout_busy: reply audio is still queued or playing.
            call_t0: the call's start on its clock (records hold offsets from it).
            end_reason: why the call is ending (the reason a turn still pending went unheard).
            final: the call is over: record everything pending.
        """
        for turn in list(self.pending):
            if (final or not turn.audible or turn.cancel.is_set()
                    or (turn.timeline.first_frame_out_at is not None and not playout_busy)):
                self.pending.remove(turn)
                self.turn(turn, call_t0, end_reason if final else "")

    def turn(self, turn: Turn, call_t0: float, end_reason: str = "") -> TurnRecord:
        """Record a finished turn (its timeline and the stages' metrics) as the next index."""
        result = turn.result or TurnResult(audio_in_s=turn.utterance.duration_s)
        index, self.turns = self.turns, self.turns + 1
        why = unanswered_reason(turn, end_reason)
        rec = turn_record(self.call_id, index, turn.timeline, result, call_t0,
                          barge_in=turn.barge_in, unanswered=why)
        self._log.put(rec)
        for use in result.tools:
            self.tool(use.name, use.arguments, use.source, use.outcome, use.detail,
                      use.latency_s, index)
        if result.tool_error:
            self.event("error", f"turn {index}: tool {result.tool_error}")
        if result.unfounded:
            self.event("unfounded", f"turn {index}: not said: {result.unfounded}")
        if result.asked_to_repeat:
            self.event("asked-to-repeat", f"turn {index}: {result.asked_to_repeat}")
        if turn.under_load:
            self.event("under-load", f"turn {index}: answered by profile {turn.under_load}")
        log.event("turn", self.call_id, index=index, transcript=result.transcript,
                  reply=result.reply_text, v2v_ms=log.ms(rec.voice_to_voice_s),
                  endpoint_ms=log.ms(rec.endpoint_s), asr_ms=log.ms(rec.asr_s),
                  llm_ttft_ms=log.ms(rec.llm_ttft_s), tts_first_ms=log.ms(rec.tts_first_audio_s),
                  barge_in=turn.barge_in, unanswered=why or None)
        return rec

    def ended(self, reason: str, barge_ins: int, codec: str, playout: PlayoutMetrics,
              duration_s: float, recording: tuple[str, float] | None = None) -> None:
        for seq, rec in list(self._open.items()):  # no action outlives its call's record
            self.action_news(seq, ended_outcome(reason), f"the call ended ({reason}) first; "
                             f"last: {rec.detail}", rec.latency_s)
        turns = self.turns
        path, seconds = recording or (None, None)
        self._log.put(CallEnded(call_id=self.call_id, ended_at=datetime.now(UTC),
                                end_reason=reason, turns=turns, barge_ins=barge_ins,
                                codec=codec, recording_path=path, recording_s=seconds))
        log.event("call-ended", self.call_id, reason=reason, turns=turns, barge_ins=barge_ins,
                  gap_p50_ms=log.ms(playout.gap_p50_s), gap_p99_ms=log.ms(playout.gap_p99_s),
                  underruns=playout.underruns, duration_s=round(duration_s, 1))


CALLER_ENDED = ("caller-bye", "rtp-timeout")
"""End reasons by which the caller left (a BYE, or a line gone dead)."""


def ended_outcome(end_reason: str) -> str:
    """The outcome of an action the call's end cut short.

    ``caller-gone`` if the caller left (:data:`CALLER_ENDED`), else ``ended-REASON``
    (``ended-shutdown``, ``ended-error``...).
    """
    return "caller-gone" if end_reason in CALLER_ENDED else f"ended-{end_reason or 'error'}"


def unanswered_reason(turn: Turn, end_reason: str = "") -> str:
    """Why the caller heard nothing of this turn's reply ("" when they heard some of it)."""
    if turn.error:  # whatever was heard (the apology, part of a reply) was not the answer
        return "error"
    if turn.timeline.first_frame_out_at is not None:
        return ""
    if turn.result is not None and turn.result.kept:
        return turn.result.kept
    if turn.result is not None and turn.result.no_words:
        return "no-words"
    if turn.barge_in:
        return "barge-in"
    if end_reason:
        return "hangup" if end_reason == "caller-bye" else end_reason
    return "cancelled"
