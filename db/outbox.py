"""The webhooks' outbox: events made from call-log records, and each one's delivery state.

The call-log writer calls :func:`enqueue` right after it writes a record (:mod:`db.rows`), in
the same transaction: a record and its events are committed together, spooled together while
the database is down (the spool holds the record; its events are made when it is replayed),
and nothing on a call's loop waits for either. Each event gets one ``webhook_outbox`` row per
receiver whose ``events`` name it (:class:`dialplan.webhooks.WebhookOptions`).

An event's id is a UUID5 of what the event is about (the call and ``call.ended``, the call and
the turn's index, the call and a tool call's time and name...), so a record written twice (a
spool batch replayed after a crash) makes the same id, which the ``(event_id, url)`` key
refuses: no duplicate in the outbox, and the receiver dedupes the rest by the id. The body is
fixed when the event is queued and sent as is on every try::

    {"id": "<uuid>", "type": "turn", "time": "<ISO 8601 UTC>", "call_id": "...", "data": {...}}

The delivery side (:mod:`agent.webhooks`) reads due rows with :func:`due`, takes one with
:func:`claim` (a conditional update, so two delivery workers on one database never send the
same row at once) and records the try with :func:`settle`. Imports nothing from :mod:`agent`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Engine, func, select, update
from sqlalchemy.orm import Session

from db.records import (
    PENDING,
    CallEnded,
    CallStarted,
    MessageRecord,
    Record,
    SummaryRecord,
    ToolCallRecord,
    TurnRecord,
)
from db.schema import Call, CallerMessage, WebhookDelivery
from db.stages import METRICS, column
from dialplan.webhooks import WebhookOptions

NAMESPACE = uuid.UUID("5d0c6c0e-4f43-4c7a-9a39-0c2b8a7e6a51")
"""UUID5 namespace of event ids (fixed: an id must not change across versions)."""
STATUSES = ("pending", "delivered", "failed")


@dataclass(frozen=True)
class Event:
    """One webhook event, as its receivers get it."""

    id: str
    type: str
    time: datetime
    call_id: str
    data: dict

    def body(self) -> str:
        """The JSON body POSTed on every try."""
        return json.dumps({"id": self.id, "type": self.type, "time": _iso(self.time),
                           "call_id": self.call_id, "data": self.data},
                          separators=(",", ":"), ensure_ascii=False)


def event_type(record: Record) -> str | None:
    """The event a record makes (None: it makes none, e.g. an ``EventRecord``)."""
    if isinstance(record, ToolCallRecord):
        if record.outcome == PENDING:
            # An action that has begun and ends later (a transfer waiting for its NOTIFY): its
            # event goes with the record of its outcome, which keeps the start's ``at``.
            return None
        return "transfer" if record.name == "transfer" else "tool"
    if isinstance(record, CallEnded) and record.summarize:
        return None  # sent with its summary (:class:`SummaryRecord`), once that is settled
    return {CallStarted: "call.started", CallEnded: "call.ended", TurnRecord: "turn",
            MessageRecord: "message", SummaryRecord: "call.ended"}.get(type(record))


def event_of(s: Session, record: Record) -> Event | None:
    """The event of a record already applied in ``s`` (``call.ended`` reads its call row)."""
    kind = event_type(record)
    if kind is None:
        return None
    cid = record.call_id
    if isinstance(record, CallStarted):
        data = {k: getattr(record, k) for k in (
            "caller_uri", "called_extension", "profile", "direction", "source", "asr_model",
            "llm_model", "tts_voice", "worker", "host")}
        data |= {"started_at": _iso(record.started_at), "answered_at": _iso(record.answered_at)}
        return _event(kind, (cid, kind), record.answered_at or record.started_at, cid, data)
    if isinstance(record, CallEnded | SummaryRecord):
        # Both from the call row the record was applied to: a summary's record carries none
        # of the call's own fields.
        call = s.get(Call, cid)
        ended = (call and call.ended_at) or getattr(record, "ended_at", None) or record.at
        began = call and (call.answered_at or call.started_at)
        messages = s.scalar(select(func.count()).select_from(CallerMessage)
                            .where(CallerMessage.call_id == cid))
        data = {"end_reason": call.end_reason if call else "",
                "turns": call.turns if call else 0,
                "barge_ins": call.barge_ins if call else 0, "messages": messages,
                "codec": call.codec if call else "",
                "duration_s": round((ended - began).total_seconds(), 3) if began else None,
                "started_at": _iso(call and call.started_at),
                "answered_at": _iso(call and call.answered_at),
                "caller_uri": call.caller_uri if call else "",
                "called_extension": call.called_extension if call else "",
                "profile": call.profile if call else "",
                "direction": call.direction if call else "",
                "recording_path": call.recording_path if call else None,
                "recording_s": call.recording_s if call else None,
                **summary_fields(call)}
        return _event(kind, (cid, kind), ended, cid, data)
    if isinstance(record, TurnRecord):
        data = {"index": record.index, "transcript": record.transcript,
                "reply": record.reply_text, "unanswered": record.unanswered,
                "barge_in": record.barge_in, "speech_start_s": record.speech_start_s,
                "speech_end_s": record.speech_end_s,
                "timings": {column(m): getattr(record, column(m)) for m in METRICS},
                "llm_tokens": record.llm_tokens, "asr_model": record.asr_model}
        return _event(kind, (cid, kind, record.index), record.at or datetime.now(UTC), cid,
                      data)
    if isinstance(record, ToolCallRecord):
        arguments = _json_or_text(record.arguments)
        data = {"name": record.name, "arguments": arguments, "source": record.source,
                "outcome": record.outcome, "detail": record.detail,
                "latency_s": record.latency_s, "turn_index": record.turn_index}
        if kind == "transfer":
            data["target"] = arguments.get("target") if isinstance(arguments, dict) else None
        # A call's tool calls have no index: the time (to the microsecond, kept by the spool)
        # and the name tell them apart.
        return _event(kind, (cid, "tool", _iso(record.at), record.name), record.at, cid, data)
    assert isinstance(record, MessageRecord)
    data = {"text": record.text, "caller_uri": record.caller_uri,
            "audio_path": record.audio_path, "duration_s": record.duration_s}
    return _event(kind, (cid, kind, _iso(record.at)), record.at, cid, data)


def enqueue(s: Session, record: Record, hooks: Sequence[WebhookOptions],
            now: datetime | None = None) -> int:
    """Queue a record's event for every receiver that wants it, in the record's transaction.

    Args:
        s: The session the record was just applied in.
        record: Any call-log record.
        hooks: The configured receivers.
        now: When it is queued (default: now).

    Returns:
        How many rows were added (0 for a record whose event is already queued).
    """
    kind = event_type(record)
    urls = [h.url for h in hooks if kind in h.events]
    if not urls:
        return 0
    event = event_of(s, record)
    assert event is not None
    queued = set(s.scalars(select(WebhookDelivery.url)
                           .where(WebhookDelivery.event_id == event.id)))
    at = now or datetime.now(UTC)
    body = event.body()
    added = [WebhookDelivery(event_id=event.id, url=url, type=event.type, call_id=event.call_id,
                             created_at=at, body=body, status="pending", attempts=0,
                             next_attempt_at=at, last_error="")
             for url in urls if url not in queued]
    s.add_all(added)
    return len(added)


@dataclass(frozen=True)
class Due:
    """A row due for a try, as :func:`due` read it (``claim`` needs its ``next_attempt_at``)."""

    id: int
    event_id: str
    body: str
    attempts: int
    created_at: datetime
    next_attempt_at: datetime


def due(engine: Engine, url: str, now: datetime, limit: int = 50) -> list[Due]:
    """The receiver's pending rows due by ``now``, oldest first."""
    q = (select(WebhookDelivery).where(WebhookDelivery.url == url,
                                       WebhookDelivery.status == "pending",
                                       WebhookDelivery.next_attempt_at <= now)
         .order_by(WebhookDelivery.id).limit(limit))
    with Session(engine) as s:
        return [Due(r.id, r.event_id, r.body, r.attempts, r.created_at, r.next_attempt_at)
                for r in s.scalars(q)]


def claim(engine: Engine, row: Due, until: datetime) -> bool:
    """Take a row for one try: push its due time to ``until`` if nobody else did first.

    A worker that dies mid-try leaves the row due again at ``until`` (at least once).
    """
    q = (update(WebhookDelivery)
         .where(WebhookDelivery.id == row.id, WebhookDelivery.status == "pending",
                WebhookDelivery.next_attempt_at == row.next_attempt_at)
         .values(next_attempt_at=until))
    with engine.begin() as conn:
        return conn.execute(q).rowcount == 1


def settle(engine: Engine, row: Due, status: str, http_status: int | None, error: str,
           now: datetime, next_at: datetime | None = None) -> None:
    """Record a try: ``delivered``, ``failed`` (given up), or ``pending`` again at ``next_at``."""
    values = {"status": status, "attempts": row.attempts + 1, "last_status": http_status,
              "last_error": error[:255]}
    if status == "delivered":
        values["delivered_at"] = now
    if next_at is not None:
        values["next_attempt_at"] = next_at
    with engine.begin() as conn:
        conn.execute(update(WebhookDelivery).where(WebhookDelivery.id == row.id).values(values))


@dataclass(frozen=True)
class DeliveryRow:
    """One event and receiver, for ``callagent webhooks``."""

    event_id: str
    type: str
    call_id: str
    url: str
    status: str
    attempts: int
    last_status: int | None
    last_error: str
    created_at: datetime
    next_attempt_at: datetime
    delivered_at: datetime | None


def deliveries(engine: Engine, status: str | None = None, call_id: str | None = None,
               limit: int = 50) -> list[DeliveryRow]:
    """The newest deliveries first, optionally of one status or one call."""
    q = select(WebhookDelivery).order_by(WebhookDelivery.id.desc()).limit(limit)
    if status is not None:
        q = q.where(WebhookDelivery.status == status)
    if call_id is not None:
        q = q.where(WebhookDelivery.call_id == call_id)
    with Session(engine) as s:
        return [DeliveryRow(r.event_id, r.type, r.call_id, r.url, r.status, r.attempts,
                            r.last_status, r.last_error or "", r.created_at, r.next_attempt_at,
                            r.delivered_at) for r in s.scalars(q)]


def status_counts(engine: Engine) -> dict[str, dict[str, int]]:
    """``url -> status -> rows``, every status present (0 where none)."""
    q = select(WebhookDelivery.url, WebhookDelivery.status, func.count()).group_by(
        WebhookDelivery.url, WebhookDelivery.status)
    out: dict[str, dict[str, int]] = {}
    with engine.connect() as conn:
        for url, status, n in conn.execute(q):
            out.setdefault(url, dict.fromkeys(STATUSES, 0))[status] = n
    return dict(sorted(out.items()))


def summary_fields(call: Call | None) -> dict:
    """What ``call.ended`` says of the post-call summary (all None: none was asked for).

    ``summary_state``: ``done``, ``failed`` (why in ``summary_detail``) or ``pending`` (the
    event's wait ran out first: the summary reaches the call log alone); ``extracted``: the
    profile's fields, each a string or null.
    """
    state = call.summary_state if call else None
    return {"summary_state": state, "summary": call.summary if call else None,
            "extracted": _json_or_text(call.extracted) if call and call.extracted else None,
            "summary_detail": call.summary_detail if call else None}


def _event(kind: str, key: tuple, at: datetime, call_id: str, data: dict) -> Event:
    eid = str(uuid.uuid5(NAMESPACE, "/".join(map(str, key))))
    return Event(id=eid, type=kind, time=at, call_id=call_id, data=data)


def _iso(at: datetime | None) -> str | None:
    if at is None:
        return None
    return (at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)).isoformat()


def _json_or_text(text: str):
    try:
        return json.loads(text) if text else {}
    except ValueError:
        return text
