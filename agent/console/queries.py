"""What the console reads from (and writes to) the call log: history, one call, messages.

Plain dictionaries of JSON values, for the API and the pages alike (times as ISO 8601 UTC,
durations in seconds). One call's timeline is :func:`db.reports.call_timeline`'s, the webhook
deliveries :mod:`db.outbox`'s (their URLs as :func:`agent.webhooks.safe_url` logs them); this
module adds the history's filters and the messages' ``handled_at`` (revision 0010). Imports
db, and agent.webhooks for that one function.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Engine, exists, func, or_, select, update
from sqlalchemy.orm import Session

from agent.webhooks import safe_url
from db import outbox
from db.reports import call_timeline
from db.schema import Call, CallerMessage, Turn
from db.stages import METRICS


def iso(at: datetime | None) -> str | None:
    if at is None:
        return None
    return (at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)).isoformat()


@dataclass(frozen=True)
class HistoryFilter:
    """The history page's filters (each empty one filters nothing)."""

    since: timedelta | None = None
    """Calls started this long ago or later."""
    start: datetime | None = None
    """Calls started at or after this time."""
    end: datetime | None = None
    """Calls started before this time."""
    profile: str = ""
    end_reason: str = ""
    text: str = ""
    """Words of a turn (caller's or agent's), the caller's URI or the call id, any case."""
    limit: int = 50
    offset: int = 0


def _call_row(c: Call) -> dict[str, Any]:
    began = c.answered_at or c.started_at
    return {"id": c.id, "started_at": iso(c.started_at), "answered_at": iso(c.answered_at),
            "ended_at": iso(c.ended_at), "caller": c.caller_uri, "extension": c.called_extension,
            "profile": c.profile, "direction": c.direction, "end_reason": c.end_reason,
            "turns": c.turns, "barge_ins": c.barge_ins, "worker": c.worker, "codec": c.codec,
            "duration_s": round((c.ended_at - began).total_seconds(), 3)
            if c.ended_at and began else None,
            "recording_s": c.recording_s, "recorded": bool(c.recording_path),
            "summary": getattr(c, "summary", None)}


def history(engine: Engine, f: HistoryFilter, now: datetime | None = None
            ) -> tuple[list[dict[str, Any]], int]:
    """The calls that match ``f``, newest first, and how many match in all."""
    where = []
    if f.since is not None:
        where.append(Call.started_at >= (now or datetime.now(UTC)) - f.since)
    if f.start is not None:
        where.append(Call.started_at >= f.start)
    if f.end is not None:
        where.append(Call.started_at < f.end)
    if f.profile:
        where.append(Call.profile == f.profile)
    if f.end_reason:
        where.append(Call.end_reason == f.end_reason)
    if f.text.strip():
        words = f.text.strip().lower()

        def has(col):
            return func.lower(col).contains(words, autoescape=True)

        spoken = exists().where(Turn.call_id == Call.id,
                                or_(has(Turn.transcript), has(Turn.reply_text)))
        where.append(or_(spoken, has(Call.caller_uri), has(Call.id)))
    q = select(Call).where(*where)
    with Session(engine) as s:
        total = s.scalar(select(func.count()).select_from(q.subquery()))
        calls = s.scalars(q.order_by(Call.started_at.desc(), Call.id)
                          .limit(max(1, min(f.limit, 500))).offset(max(0, f.offset)))
        return [_call_row(c) for c in calls], int(total or 0)


def choices(engine: Engine) -> dict[str, list[str]]:
    """The profiles and end reasons in the log, for the history's filter menus."""
    with Session(engine) as s:
        profiles = s.scalars(select(Call.profile).distinct().order_by(Call.profile))
        reasons = s.scalars(select(Call.end_reason).distinct().order_by(Call.end_reason))
        return {"profiles": [p for p in profiles if p], "end_reasons": [r for r in reasons if r]}


def call(engine: Engine, call_id: str) -> dict[str, Any] | None:
    """One call: its row, turns (stages in seconds), events, tool calls and messages."""
    tl = call_timeline(engine, call_id)
    if tl is None:
        return None
    with Session(engine) as s:
        row = _call_row(s.get(Call, call_id))
    row["turn_rows"] = [{"index": t.index, "transcript": t.transcript, "reply": t.reply_text,
                         "unanswered": t.unanswered, "barge_in": t.barge_in,
                         "speech_start_s": t.speech_start_s, "speech_end_s": t.speech_end_s,
                         "audio_out_s": t.audio_out_s, "llm_tokens": t.llm_tokens,
                         "stages": {m: t.stages[m] for m in METRICS}} for t in tl.turns]
    row["events"] = [{"at": iso(e.at), "kind": e.kind, "detail": e.detail} for e in tl.events]
    row["tool_calls"] = [{**dataclasses.asdict(a), "at": iso(a.at)} for a in tl.tool_calls]
    row["messages"] = [{**dataclasses.asdict(m), "at": iso(m.at)} for m in tl.messages]
    return row


def recording(engine: Engine, call_id: str) -> str | None:
    """The path of a call's recording, or None."""
    with Session(engine) as s:
        c = s.get(Call, call_id)
        return c.recording_path if c is not None else None


def messages(engine: Engine, handled: bool | None = None, limit: int = 200
             ) -> list[dict[str, Any]]:
    """Callers' messages, newest first; ``handled`` False: only those not dealt with yet."""
    q = select(CallerMessage).order_by(CallerMessage.at.desc(), CallerMessage.id.desc())
    if handled is not None:
        q = q.where(CallerMessage.handled_at.is_not(None) if handled
                    else CallerMessage.handled_at.is_(None))
    with Session(engine) as s:
        return [{"id": m.id, "call_id": m.call_id, "at": iso(m.at), "caller": m.caller_uri,
                 "text": m.text, "duration_s": m.duration_s, "audio": bool(m.audio_path),
                 "handled_at": iso(m.handled_at)}
                for m in s.scalars(q.limit(max(1, min(limit, 1000))))]


def mark_handled(engine: Engine, message_id: int, handled: bool = True,
                 now: datetime | None = None) -> dict[str, Any] | None:
    """Mark a message handled (now) or not; its new ``handled_at``, or None if no such message."""
    at = (now or datetime.now(UTC)) if handled else None
    with engine.begin() as conn:
        done = conn.execute(update(CallerMessage).where(CallerMessage.id == message_id)
                            .values(handled_at=at)).rowcount
    return {"id": message_id, "handled_at": iso(at)} if done else None


def message_audio(engine: Engine, message_id: int) -> str | None:
    with Session(engine) as s:
        m = s.get(CallerMessage, message_id)
        return m.audio_path if m is not None else None


def deliveries(engine: Engine, status: str | None = None, call_id: str | None = None,
               limit: int = 100) -> dict[str, Any]:
    """The webhooks' outbox: its newest rows and each receiver's count per status."""
    rows = outbox.deliveries(engine, status or None, call_id or None, max(1, min(limit, 1000)))
    # The URLs without user info or query: either may hold a token.
    return {"counts": {safe_url(u): n for u, n in outbox.status_counts(engine).items()},
            "deliveries": [{**dataclasses.asdict(r), "url": safe_url(r.url),
                            "created_at": iso(r.created_at),
                            "next_attempt_at": iso(r.next_attempt_at),
                            "delivered_at": iso(r.delivered_at)} for r in rows]}
