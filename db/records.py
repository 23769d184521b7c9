"""Plain records the agent hands to the call log; the writer maps them to tables.

No SQLAlchemy here: :mod:`agent` builds these without touching the database, and the spool
serialises them as JSON while the database is down.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Protocol

from db.stages import TIMING_COLUMNS

PENDING = "pending"
"""``tool_calls.outcome`` of an action started and not over yet."""
LOST = "lost"
"""``tool_calls.outcome`` of a pending action whose agent process died (and ``end_reason``)."""


@dataclass
class CallStarted:
    """A call was offered (and maybe answered)."""

    call_id: str
    started_at: datetime
    """Wall clock, UTC (the only wall-clock stamp in the log)."""
    caller_uri: str = ""
    called_extension: str = ""
    profile: str = ""
    asr_backend: str = ""
    asr_model: str = ""
    llm_model: str = ""
    tts_voice: str = ""
    codec: str = ""
    source: str = "sip"
    """sip | simulate | bench."""
    answered_at: datetime | None = None
    worker: str | None = None
    """The cluster worker that answered (``w1``...); None outside a cluster."""
    host: str | None = None
    """The machine the agent ran on (its hostname)."""
    direction: str = "inbound"
    """inbound (a caller rang the agent) | outbound (``callagent dial``)."""


@dataclass
class CallEnded:
    """A call is over."""

    call_id: str
    ended_at: datetime
    end_reason: str
    """caller-bye, agent-hangup, timeout, silence, error, shutdown, lost."""
    turns: int = 0
    barge_ins: int = 0
    codec: str = ""
    recording_path: str | None = None
    """The call's stereo WAV (caller left, agent right), if its profile records."""
    recording_s: float | None = None
    summarize: bool = False
    """Its profile asks for a post-call summary: the call is marked ``pending`` for the job,
    and its ``call.ended`` event waits for a :class:`SummaryRecord`."""


@dataclass
class TurnRecord:
    """One caller utterance and the agent's reply, with per-stage timings in seconds.

    ``endpoint_s + asr_s + llm_ttft_s + first_chunk_s + tts_first_audio_s + playout_s``
    equals ``voice_to_voice_s`` (stamps on one monotonic clock; the stages are
    :data:`db.stages.STAGES`).
    """

    call_id: str
    index: int
    speech_start_s: float | None = None
    """Caller speech start, seconds since the call was answered."""
    speech_end_s: float | None = None
    transcript: str = ""
    reply_text: str = ""
    endpoint_s: float | None = None
    asr_s: float | None = None
    llm_ttft_s: float | None = None
    first_chunk_s: float | None = None
    """First token to first speakable clause."""
    tts_first_audio_s: float | None = None
    playout_s: float | None = None
    """First audio ready to first frame on the line."""
    voice_to_voice_s: float | None = None
    llm_total_s: float | None = None
    llm_tokens: int | None = None
    tts_total_s: float | None = None
    audio_in_s: float | None = None
    audio_out_s: float | None = None
    asr_rtf: float | None = None
    tts_rtf: float | None = None
    asr_backend: str = ""
    asr_model: str = ""
    barge_in: bool = False
    unanswered: str = ""
    """Why the caller heard no reply to this turn ("" = answered): ``no-words`` (ASR heard
    nothing), ``hangup`` (the call ended first), ``barge-in`` (cut before its first audio),
    ``error``, ``cancelled``, ``shutdown``, ``rtp-timeout``..."""
    at: datetime | None = None
    """Wall-clock time the turn was recorded (UTC)."""


@dataclass
class EventRecord:
    """Something that happened in a call: dtmf, barge-in, error, state change..."""

    call_id: str
    at: datetime
    kind: str
    detail: str = ""


@dataclass
class ToolCallRecord:
    """An action the agent took or tried (a tool the LLM called, a keypad mapping)."""

    call_id: str
    at: datetime
    name: str
    arguments: str = ""
    """The arguments as JSON."""
    source: str = "llm"
    """llm | keypad."""
    outcome: str = ""
    """ok, or why not (failed, timeout, http-500, bad-json, unknown-target, caller-gone...);
    ``pending`` while a started action (a transfer) has no outcome yet."""
    detail: str = ""
    latency_s: float | None = None
    """Request to outcome (to the latest news of it, while ``pending``)."""
    turn_index: int | None = None
    seq: int | None = None
    """The action's number in its call, for an action whose row is written when it starts and
    then updated: later records with the same ``(call_id, seq)`` (a NOTIFY's status, then the
    outcome) update that row, and ``at`` stays when it started. None: a row written once."""


@dataclass
class MessageRecord:
    """A message the caller left (``take_message``)."""

    call_id: str
    at: datetime
    text: str
    caller_uri: str = ""
    audio_path: str | None = None
    duration_s: float | None = None


@dataclass
class SummaryRecord:
    """The post-call summary job's outcome (or ``call.ended`` let go without it)."""

    call_id: str
    at: datetime
    state: str
    """``done``, ``failed`` (why in ``detail``), or ``pending``: still to come, and the
    call's ``call.ended`` event goes now without it (its wait ran out)."""
    summary: str | None = None
    extracted: str | None = None
    """The fields as a JSON object (text)."""
    detail: str = ""
    seconds: float | None = None
    """How long the LLM took."""


Record = (CallStarted | CallEnded | TurnRecord | EventRecord | ToolCallRecord | MessageRecord
          | SummaryRecord)
RECORD_TYPES = {cls.__name__: cls for cls in (CallStarted, CallEnded, TurnRecord, EventRecord,
                                              ToolCallRecord, MessageRecord, SummaryRecord)}


def to_json_dict(record: Record) -> dict:
    """Serialise a record for the spool (datetimes as ISO strings)."""
    d = {k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in asdict(record).items()}
    return {"type": type(record).__name__, "data": d}


_LEGACY_MS = {f"{name.removesuffix('_s')}_ms": name for name in TIMING_COLUMNS}
"""Old ``*_ms`` TurnRecord field -> its ``*_s`` successor."""


def from_json_dict(d: dict) -> Record:
    """Inverse of :func:`to_json_dict`; also reads records spooled before the unit change."""
    cls = RECORD_TYPES[d["type"]]
    data = dict(d["data"])
    for k, v in data.items():
        if isinstance(v, str) and v and (k == "at" or k.endswith("_at")):
            data[k] = datetime.fromisoformat(v)
    if cls is TurnRecord:
        # A spool written by an older agent (durations in ms, revision 0001) is replayed by
        # this one after an upgrade: convert, or its turns would be rejected.
        for k in [k for k in data if k in _LEGACY_MS]:
            v = data.pop(k)
            data[_LEGACY_MS[k]] = None if v is None else v / 1000.0
    return cls(**data)


class CallLog(Protocol):
    """Where the agent sends records; ``db.writer.CallLogWriter`` is the real one."""

    def put(self, record: Record) -> None:
        """Queue a record; must never block the caller."""
