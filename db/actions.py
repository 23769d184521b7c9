"""What the agent did in calls besides talking, for the reports: tool calls and callers' messages.

Query functions over ``tool_calls`` and ``messages`` (revision 0005) that return dataclasses,
no formatting, like :mod:`db.reports` (which puts them into a call's timeline and the report).
Times are wall-clock UTC as stored, plus ``offset_s``: seconds since the call was answered, the
clock of the turns' ``speech_start_s`` and, near enough, of the call's recording, so a row can
be found in it. Imports nothing from :mod:`agent`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from db.schema import Call, CallerMessage, ToolCall
from db.stats import Percentiles


@dataclass
class ToolCallRow:
    """One tool call or keypad action of a call."""

    at: datetime
    offset_s: float | None
    """Seconds since the call was answered."""
    turn_index: int | None
    name: str
    arguments: str
    """As JSON."""
    source: str
    """llm | keypad."""
    outcome: str
    """ok, or why not (failed, timeout, http-500...)."""
    detail: str
    latency_s: float | None


@dataclass
class MessageRow:
    """A message a caller left."""

    at: datetime
    offset_s: float | None
    text: str
    audio_path: str | None
    duration_s: float | None
    caller_uri: str = ""


@dataclass
class ToolOutcome:
    """How often one tool ended one way in the report window, and how long it took."""

    name: str
    outcome: str
    count: int
    latency: Percentiles
    """Seconds, request to outcome."""


def _offset(at: datetime, t0: datetime | None) -> float | None:
    return None if t0 is None else round((at - t0).total_seconds(), 3)


def call_tool_calls(s: Session, call_id: str, t0: datetime | None) -> list[ToolCallRow]:
    """A call's tool calls in time order (``t0``: when it was answered, for the offsets)."""
    rows = s.scalars(select(ToolCall).where(ToolCall.call_id == call_id)
                     .order_by(ToolCall.at, ToolCall.id))
    return [ToolCallRow(at=t.at, offset_s=_offset(t.at, t0), turn_index=t.turn_index,
                        name=t.name, arguments=t.arguments or "", source=t.source or "",
                        outcome=t.outcome or "", detail=t.detail or "", latency_s=t.latency_s)
            for t in rows]


def call_messages(s: Session, call_id: str, t0: datetime | None) -> list[MessageRow]:
    """The messages a call's caller left, in time order."""
    rows = s.scalars(select(CallerMessage).where(CallerMessage.call_id == call_id)
                     .order_by(CallerMessage.at, CallerMessage.id))
    return [MessageRow(at=m.at, offset_s=_offset(m.at, t0), text=m.text or "",
                       audio_path=m.audio_path, duration_s=m.duration_s,
                       caller_uri=m.caller_uri or "") for m in rows]


def tool_outcomes(engine: Engine, since: timedelta | None = None,
                  now: datetime | None = None) -> list[ToolOutcome]:
    """Tool calls per (name, outcome) of the calls started in the window, by name then outcome.

    Transfers are the ``transfer`` rows: how many went through (``ok``) and why the others
    did not.
    """
    q = select(ToolCall.name, ToolCall.outcome, ToolCall.latency_s).join(
        Call, Call.id == ToolCall.call_id)
    if since is not None:
        q = q.where(Call.started_at >= (now or datetime.now(UTC)) - since)
    buckets: dict[tuple[str, str], list[float | None]] = {}
    with engine.connect() as conn:
        for name, outcome, latency in conn.execute(q):
            buckets.setdefault((name, outcome or ""), []).append(latency)
    return [ToolOutcome(name=n, outcome=o, count=len(v), latency=Percentiles.of(v))
            for (n, o), v in sorted(buckets.items())]



def recent_messages(engine: Engine, since: timedelta | None = None,
                    now: datetime | None = None) -> list[tuple[str, MessageRow]]:
    """Messages callers left in the window, newest first, each with its call id."""
    q = select(CallerMessage).order_by(CallerMessage.at.desc(), CallerMessage.id.desc())
    if since is not None:
        q = q.where(CallerMessage.at >= (now or datetime.now(UTC)) - since)
    with Session(engine) as s:
        return [(m.call_id, MessageRow(at=m.at, offset_s=None, text=m.text or "",
                                       audio_path=m.audio_path, duration_s=m.duration_s,
                                       caller_uri=m.caller_uri or ""))
                for m in s.scalars(q)]
