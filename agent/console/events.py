"""What the console shows live, as immutable events, and how they cross between processes.

A worker turns each call-log record into a :class:`LiveEvent` (:func:`of_record`) and adds the
call's turns as they happen (``heard``: the caller's words once their turn ended; ``reply``:
the agent's words once they are heard, again when the reply is whole). Each crosses to the
console process as one JSON datagram (:func:`encode`, :func:`decode`); the console's hub keeps
the calls that are up from them. Kinds::

    call.started  caller, extension, profile, direction, worker, answered_at
    state         state (the call's new state), old
    heard         turn, text (dropped: the caller went on, the words join the next turn)
    reply         turn, text, final
    turn          index, transcript, reply, voice_to_voice_s, unanswered (the turn's record)
    tool          name, outcome, source, detail, latency_s
    message       text
    event         kind, detail (the call log's other events: dtmf, barge-in, error...)
    call.ended    end_reason, turns
    alive         calls (a worker's heartbeat: the ids of its calls that are up)

Imports db's plain records only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from db.records import (
    PENDING,
    CallEnded,
    CallStarted,
    EventRecord,
    MessageRecord,
    Record,
    ToolCallRecord,
    TurnRecord,
)

MAX_TEXT = 2000
"""Longest text an event carries (a datagram has a size limit; a page shows no more)."""
VERSION = 1


def _frozen(data: dict[str, Any]) -> MappingProxyType:
    return MappingProxyType(dict(data))


@dataclass(frozen=True)
class LiveEvent:
    """One thing that happened to a call that is up (or a worker's heartbeat).

    Frozen, and its ``data`` a read-only mapping of plain values: one event goes to many
    browsers, and none of them may change what another sees.
    """

    kind: str
    call_id: str
    at: float
    """Unix time in the worker when it happened."""
    data: MappingProxyType = field(default_factory=lambda: _frozen({}))
    source: str = ""
    """The worker that sent it (its id in a cluster, else its pid)."""
    seq: int = 0
    """The hub's number for it (0 until the hub has it): a browser's ``Last-Event-ID``."""

    def as_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "kind": self.kind, "call_id": self.call_id, "at": self.at,
                "source": self.source, "data": dict(self.data)}


def make(kind: str, call_id: str, at: float, data: dict[str, Any], source: str = "") -> LiveEvent:
    """A :class:`LiveEvent` with its texts cut to :data:`MAX_TEXT`."""
    clean = {k: (v[:MAX_TEXT] if isinstance(v, str) else v) for k, v in data.items()}
    return LiveEvent(kind, call_id, at, _frozen(clean), source)


def encode(ev: LiveEvent) -> bytes:
    """The datagram of one event."""
    return json.dumps({"v": VERSION, "kind": ev.kind, "call_id": ev.call_id, "at": ev.at,
                       "source": ev.source, "data": dict(ev.data)},
                      separators=(",", ":"), ensure_ascii=False, default=str).encode()


def decode(datagram: bytes) -> LiveEvent | None:
    """The event of a datagram; None for anything else (another version, not JSON)."""
    try:
        d = json.loads(datagram)
        if d.get("v") != VERSION or not isinstance(d.get("data"), dict):
            return None
        return make(str(d["kind"]), str(d["call_id"]), float(d["at"]), d["data"],
                    str(d.get("source", "")))
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def of_record(record: Record) -> tuple[str, dict[str, Any]] | None:
    """The live event (kind, data) of a call-log record; None for one the console skips."""
    if isinstance(record, CallStarted):
        return "call.started", {
            "caller": record.caller_uri, "extension": record.called_extension,
            "profile": record.profile, "direction": record.direction,
            "worker": record.worker or "",
            "answered_at": (record.answered_at or record.started_at).timestamp()}
    if isinstance(record, EventRecord):
        if record.kind == "state":
            old, _, new = record.detail.partition("->")
            return "state", {"state": new, "old": old}
        return "event", {"kind": record.kind, "detail": record.detail}
    if isinstance(record, TurnRecord):
        return "turn", {"index": record.index, "transcript": record.transcript,
                        "reply": record.reply_text, "unanswered": record.unanswered,
                        "voice_to_voice_s": record.voice_to_voice_s}
    if isinstance(record, ToolCallRecord):
        return "tool", {"name": record.name, "outcome": record.outcome or PENDING,
                        "source": record.source, "detail": record.detail,
                        "latency_s": record.latency_s}
    if isinstance(record, MessageRecord):
        return "message", {"text": record.text}
    if isinstance(record, CallEnded):
        return "call.ended", {"end_reason": record.end_reason, "turns": record.turns}
    return None
