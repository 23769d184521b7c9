"""How each call-log record becomes rows: the one place records meet the schema.

Every write is idempotent and commutative per call (see :mod:`db.writer`): calls are upserted,
turns keyed by ``(call_id, index)``, and a turn or event whose call row is missing creates a
stub call that its ``CallStarted`` fills in later.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from db.records import (
    LOST,
    PENDING,
    CallEnded,
    CallStarted,
    EventRecord,
    MessageRecord,
    Record,
    SummaryRecord,
    ToolCallRecord,
    TurnRecord,
)
from db.schema import TURN_FIELDS, Call, CallerMessage, Event, ToolCall, Turn

_UNANSWERED_LEN = Turn.__table__.c.unanswered.type.length
_CALL_STARTED_FIELDS = (
    "started_at", "answered_at", "caller_uri", "called_extension", "profile", "asr_backend",
    "asr_model", "llm_model", "tts_voice", "codec", "source", "worker", "host", "direction",
)


def apply(s: Session, record: Record) -> None:
    """Map one record onto rows in an open session."""
    if isinstance(record, CallStarted):
        call = s.get(Call, record.call_id)
        if call is None:
            call = Call(id=record.call_id, turns=0, barge_ins=0, end_reason="")
            s.add(call)
        for name in _CALL_STARTED_FIELDS:
            setattr(call, name, getattr(record, name))
    elif isinstance(record, CallEnded):
        call = _call_for(s, record.call_id, record.ended_at)
        call.ended_at = record.ended_at
        call.end_reason = record.end_reason
        call.turns = record.turns
        call.barge_ins = record.barge_ins
        if record.codec:
            call.codec = record.codec
        if record.recording_path:
            call.recording_path = record.recording_path
            call.recording_s = record.recording_s
        if record.summarize and call.summary_state is None:  # a replay keeps the job's outcome
            call.summary_state = "pending"
    elif isinstance(record, TurnRecord):
        at = record.at or datetime.now(UTC)
        _call_for(s, record.call_id, at)
        turn = s.scalar(
            select(Turn).where(Turn.call_id == record.call_id, Turn.index == record.index)
        )
        if turn is None:
            turn = Turn()
            s.add(turn)
        for name in TURN_FIELDS:
            setattr(turn, name, getattr(record, name))
        # The reason is a short code; a None or a long free-text reason must not cost the turn
        # its row (PostgreSQL refuses text longer than the column).
        turn.unanswered = (record.unanswered or "")[:_UNANSWERED_LEN]
        turn.recorded_at = at
    elif isinstance(record, EventRecord):
        _call_for(s, record.call_id, record.at)
        s.add(Event(call_id=record.call_id, at=record.at, kind=record.kind, detail=record.detail))
    elif isinstance(record, ToolCallRecord):
        _call_for(s, record.call_id, record.at)
        _tool_call(s, record)
    elif isinstance(record, MessageRecord):
        _call_for(s, record.call_id, record.at)
        s.add(CallerMessage(call_id=record.call_id, at=record.at, caller_uri=record.caller_uri,
                            text=record.text, audio_path=record.audio_path,
                            duration_s=record.duration_s))
    elif isinstance(record, SummaryRecord):
        call = _call_for(s, record.call_id, record.at)
        if record.state != "pending":
            call.summary_state, call.summary, call.extracted = (record.state, record.summary,
                                                                record.extracted)
            call.summary_detail, call.summary_at = record.detail or None, record.at
            call.summary_s = record.seconds
    else:
        raise TypeError(f"not a call-log record: {type(record).__name__}")
    # Flush per record so a later record of the same batch finds this one's rows.
    s.flush()


def _tool_call(s: Session, record: ToolCallRecord) -> None:
    """Insert a tool call, or update a started action's row (``seq``) with later news of it.

    Later news wins whatever order records arrive in (a spool replayed after newer ones): an
    outcome beats ``pending``, and beats ``lost`` (the supervisor's guess when the process died,
    replaced by what the spool knew); among records of one rank the one latest into the
    action (``latency_s``) wins.
    """
    row = None if record.seq is None else s.scalar(
        select(ToolCall).where(ToolCall.call_id == record.call_id, ToolCall.seq == record.seq))
    if row is None:
        row = ToolCall(call_id=record.call_id, seq=record.seq)
        s.add(row)
    elif (_rank(record.outcome), record.latency_s or 0.0) < (_rank(row.outcome),
                                                               row.latency_s or 0.0):
        return
    row.at, row.turn_index, row.name = record.at, record.turn_index, record.name[:64]
    row.arguments, row.source, row.outcome = record.arguments, record.source, record.outcome[:32]
    row.detail, row.latency_s = record.detail, record.latency_s


def _rank(outcome: str) -> int:
    return {PENDING: 0, LOST: 1}.get(outcome, 2)


def _call_for(s: Session, call_id: str, at: datetime) -> Call:
    """The call row, or a stub (filled in by its CallStarted) so no turn or event is lost."""
    call = s.get(Call, call_id)
    if call is None:
        call = Call(id=call_id, started_at=at, source="", turns=0, barge_ins=0, end_reason="",
                    caller_uri="", called_extension="", profile="", asr_backend="",
                    asr_model="", llm_model="", tts_voice="", codec="")
        s.add(call)
        s.flush()
    return call
