"""Latency reports over the call log: query functions that return dataclasses, no formatting.

Owns what the numbers mean: percentiles are computed in Python from the rows with
:mod:`db.stats` (linear interpolation, as PostgreSQL's ``percentile_cont``), so SQLite and
PostgreSQL give identical answers. A ``None`` stage (missing stamp) is left out of that stage's
percentiles, never counted as zero. Voice-to-voice counts answered turns only: it is the wait
for a reply the caller heard, so a turn with an ``unanswered`` reason is counted as unanswered
instead, whatever got stamped. Other stages keep every turn that measured them: a slow ASR that
made the caller hang up belongs in the ASR tail. Time filters apply to ``calls.started_at``.
Every duration here is in seconds, as stored; the CLI (:mod:`agent.cli.report`) and the HTML
page (:mod:`db.html`) only format these, and show ms. Tool calls and callers' messages are
queried in :mod:`db.actions`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Literal

from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from db import actions
from db.schema import Call, Event, Turn
from db.stages import METRICS, STAGES, column
from db.stats import Percentiles
from db.summaries import SummaryRow, summary_of

GroupBy = Literal["backend", "profile", "model"]
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def _rate(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def _reasons(reasons: Iterable[str]) -> dict[str, int]:
    """Count per unanswered reason, by name; answered turns ("") are not counted."""
    return dict(sorted(Counter(r for r in reasons if r).items()))


@dataclass
class StageGroup:
    """Per-stage latency percentiles (s) of the turns sharing one backend/profile/model."""

    key: str
    calls: int
    turns: int
    """Every turn of the group, answered or not."""
    stages: dict[str, Percentiles]
    """Keyed by :data:`METRICS`; ``voice_to_voice`` over the answered turns only."""
    unanswered: int = 0
    """Turns the caller heard no reply to."""
    unanswered_reasons: dict[str, int] = field(default_factory=dict)
    unanswered_rate: float | None = field(default=None, init=False)
    """``unanswered / turns``; None when there are no turns."""

    def __post_init__(self) -> None:
        self.unanswered_rate = _rate(self.unanswered, self.turns)


@dataclass
class RTFRow:
    """Real-time factors (processing s / audio s) of one ASR backend and model."""

    backend: str
    model: str
    asr: Percentiles
    tts: Percentiles


@dataclass
class Totals:
    """Counts over the report window."""

    calls: int
    turns: int
    barge_ins: int
    open_calls: int
    end_reasons: dict[str, int] = field(default_factory=dict)
    unanswered: int = 0
    """Turns the caller heard no reply to."""
    unanswered_reasons: dict[str, int] = field(default_factory=dict)
    """Unanswered turns per reason (``no-words``, ``hangup``, ``barge-in``...)."""
    unanswered_rate: float | None = field(default=None, init=False)
    """``unanswered / turns``; None when there are no turns."""

    def __post_init__(self) -> None:
        self.unanswered_rate = _rate(self.unanswered, self.turns)


@dataclass
class TurnRow:
    """One turn with its call's context, as the reports and charts need it."""

    call_id: str
    index: int
    recorded_at: datetime | None
    profile: str
    asr_backend: str
    asr_model: str
    stages: dict[str, float | None]
    """Seconds, keyed by :data:`METRICS`."""
    asr_rtf: float | None = None
    tts_rtf: float | None = None
    speech_start_s: float | None = None
    speech_end_s: float | None = None
    audio_out_s: float | None = None
    llm_tokens: int | None = None
    barge_in: bool = False
    transcript: str = ""
    reply_text: str = ""
    unanswered: str = ""
    """Why the caller heard no reply ("" = answered)."""

    @property
    def voice_to_voice_s(self) -> float | None:
        """As recorded; aggregates take it from answered turns only (:func:`answered_v2v`)."""
        return self.stages["voice_to_voice"]

    @property
    def answered(self) -> bool:
        return not self.unanswered


@dataclass
class CallSummary:
    """One call's row plus its voice-to-voice summary."""

    id: str
    started_at: datetime
    ended_at: datetime | None
    profile: str
    asr_backend: str
    asr_model: str
    llm_model: str
    caller_uri: str
    end_reason: str
    turns: int
    barge_ins: int
    voice_to_voice: Percentiles
    """Over the call's answered turns."""
    unanswered: int = 0
    """Turns of the call that got no reply the caller heard."""
    answered_at: datetime | None = None
    direction: str = "inbound"
    recording_path: str | None = None
    """The call's stereo WAV (caller left, agent right), if it was recorded (and not purged)."""
    recording_s: float | None = None


@dataclass
class EventRow:
    at: datetime
    kind: str
    detail: str


@dataclass
class CallTimeline:
    """One call turn by turn."""

    call: CallSummary
    turns: list[TurnRow]
    events: list[EventRow]
    tool_calls: list[actions.ToolCallRow] = field(default_factory=list)
    messages: list[actions.MessageRow] = field(default_factory=list)
    summary: SummaryRow | None = None
    """The post-call summary and fields (None: the profile asks for none)."""


@dataclass
class Report:
    """Everything ``callagent report`` shows, for one time window."""

    generated_at: datetime
    since: datetime | None
    by: GroupBy
    totals: Totals
    groups: list[StageGroup]
    rtf: list[RTFRow]
    slowest: list[TurnRow]
    recent_calls: list[CallSummary]
    tool_outcomes: list[actions.ToolOutcome] = field(default_factory=list)


def parse_since(text: str | None) -> timedelta | None:
    """Parse a window such as ``30m``, ``24h``, ``7d`` or ``2w`` (``s`` for seconds).

    Args:
        text: The window, or None/empty for "all time".

    Returns:
        The window length, or None for all time.

    Raises:
        ValueError: The text is not a number followed by one of s, m, h, d, w.
    """
    if not text:
        return None
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*", text.lower())
    if not m:
        raise ValueError(f"bad --since {text!r}: use a number and s/m/h/d/w, e.g. 24h or 7d")
    return timedelta(seconds=float(m.group(1)) * _UNITS[m.group(2)])


def load_turns(engine: Engine, since: timedelta | None = None, now: datetime | None = None,
               call_id: str | None = None) -> list[TurnRow]:
    """Turns of the calls started in the window, oldest call first, in turn order.

    Args:
        engine: Call-log engine.
        since: Window length back from ``now``; None = all time.
        now: End of the window (default: the current time).
        call_id: Only this call's turns.

    Returns:
        One :class:`TurnRow` per turn.
    """
    q = (select(Turn, Call.profile, Call.asr_backend, Call.asr_model)
         .join(Call, Call.id == Turn.call_id)
         .order_by(Call.started_at, Turn.call_id, Turn.index))
    if since is not None:
        q = q.where(Call.started_at >= (now or datetime.now(UTC)) - since)
    if call_id is not None:
        q = q.where(Turn.call_id == call_id)
    with Session(engine) as s:
        rows = s.execute(q).all()
    return [_turn_row(t, profile, backend, model) for t, profile, backend, model in rows]


def _turn_row(t: Turn, profile: str, call_backend: str, call_model: str) -> TurnRow:
    stages = {m: getattr(t, column(m)) for m in METRICS}
    return TurnRow(
        call_id=t.call_id, index=t.index, recorded_at=t.recorded_at, profile=profile or "",
        # A turn records the backend that transcribed it; older rows fall back to the call's.
        asr_backend=t.asr_backend or call_backend or "", asr_model=t.asr_model or call_model or "",
        stages=stages, asr_rtf=t.asr_rtf, tts_rtf=t.tts_rtf, speech_start_s=t.speech_start_s,
        speech_end_s=t.speech_end_s, audio_out_s=t.audio_out_s, llm_tokens=t.llm_tokens,
        barge_in=bool(t.barge_in), transcript=t.transcript or "", reply_text=t.reply_text or "",
        unanswered=t.unanswered or "",
    )


def answered_v2v(turns: Iterable[TurnRow]) -> list[float | None]:
    """Voice-to-voice of the turns the caller heard a reply to (a missing stamp stays None)."""
    return [t.voice_to_voice_s for t in turns if t.answered]


def group_key(turn: TurnRow, by: GroupBy) -> str:
    """The value a turn is grouped under (``(none)`` when unrecorded)."""
    value = {"backend": turn.asr_backend, "profile": turn.profile, "model": turn.asr_model}[by]
    return value or "(none)"


def stage_groups(turns: Sequence[TurnRow], by: GroupBy = "backend") -> list[StageGroup]:
    """Per-stage percentiles for each group, groups sorted by name.

    Args:
        turns: Rows from :func:`load_turns`.
        by: ``backend`` (ASR backend), ``profile`` or ``model`` (ASR model).

    Returns:
        One :class:`StageGroup` per distinct key.
    """
    if by not in ("backend", "profile", "model"):
        raise ValueError(f"bad group {by!r}: use backend, profile or model")
    buckets: dict[str, list[TurnRow]] = {}
    for t in turns:
        buckets.setdefault(group_key(t, by), []).append(t)
    groups = []
    for key, rows in sorted(buckets.items()):
        stages = {m: Percentiles.of(t.stages[m] for t in rows) for m in STAGES}
        stages["voice_to_voice"] = Percentiles.of(answered_v2v(rows))
        groups.append(StageGroup(
            key=key, calls=len({t.call_id for t in rows}), turns=len(rows), stages=stages,
            unanswered=sum(not t.answered for t in rows),
            unanswered_reasons=_reasons(t.unanswered for t in rows)))
    return groups


def rtf_by_backend(turns: Sequence[TurnRow]) -> list[RTFRow]:
    """ASR and TTS real-time factors per (ASR backend, ASR model)."""
    buckets: dict[tuple[str, str], list[TurnRow]] = {}
    for t in turns:
        buckets.setdefault((t.asr_backend or "(none)", t.asr_model or "(none)"), []).append(t)
    return [RTFRow(backend=b, model=m, asr=Percentiles.of(t.asr_rtf for t in rows),
                   tts=Percentiles.of(t.tts_rtf for t in rows))
            for (b, m), rows in sorted(buckets.items())]


def slowest_turns(turns: Sequence[TurnRow], n: int = 5) -> list[TurnRow]:
    """The ``n`` answered turns with the longest voice-to-voice, slowest first."""
    timed = [t for t in turns if t.answered and t.voice_to_voice_s is not None]
    return sorted(timed, key=lambda t: t.voice_to_voice_s, reverse=True)[:max(0, n)]


def totals(engine: Engine, since: timedelta | None = None, now: datetime | None = None) -> Totals:
    """Call, turn, barge-in and unanswered counts, end and unanswered reasons, in the window."""
    where = [] if since is None else [Call.started_at >= (now or datetime.now(UTC)) - since]
    with engine.connect() as conn:
        calls, barge_ins, open_calls = conn.execute(
            select(func.count(), func.coalesce(func.sum(Call.barge_ins), 0),
                   func.count() - func.count(Call.ended_at)).where(*where)).one()
        turns = conn.execute(select(func.count()).select_from(Turn)
                             .join(Call, Call.id == Turn.call_id).where(*where)).scalar_one()
        reasons = conn.execute(select(Call.end_reason, func.count()).where(
            *where, Call.ended_at.is_not(None)).group_by(Call.end_reason)).all()
        unanswered = dict(conn.execute(
            select(Turn.unanswered, func.count()).join(Call, Call.id == Turn.call_id)
            .where(*where, Turn.unanswered != "").group_by(Turn.unanswered)).all())
    return Totals(calls=calls, turns=turns, barge_ins=int(barge_ins), open_calls=open_calls,
                  end_reasons={r or "(none)": n for r, n in sorted(reasons)},
                  unanswered=sum(unanswered.values()),
                  unanswered_reasons=dict(sorted(unanswered.items())))


def recent_calls(engine: Engine, n: int = 10, since: timedelta | None = None,
                 now: datetime | None = None) -> list[CallSummary]:
    """The ``n`` most recently started calls in the window, newest first."""
    q = select(Call).order_by(Call.started_at.desc(), Call.id).limit(max(0, n))
    if since is not None:
        q = q.where(Call.started_at >= (now or datetime.now(UTC)) - since)
    with Session(engine) as s:
        calls = list(s.scalars(q)) if n else []
        v2v: dict[str, list[float | None]] = {}
        unanswered: Counter[str] = Counter()
        if calls:
            for cid, sec, reason in s.execute(
                    select(Turn.call_id, Turn.voice_to_voice_s, Turn.unanswered).where(
                        Turn.call_id.in_([c.id for c in calls]))):
                if reason:
                    unanswered[cid] += 1
                else:
                    v2v.setdefault(cid, []).append(sec)
        return [_summary(c, v2v.get(c.id, []), unanswered[c.id]) for c in calls]


def _summary(c: Call, v2v: Iterable[float | None], unanswered: int) -> CallSummary:
    return CallSummary(
        id=c.id, started_at=c.started_at, ended_at=c.ended_at, profile=c.profile,
        asr_backend=c.asr_backend, asr_model=c.asr_model, llm_model=c.llm_model,
        caller_uri=c.caller_uri, end_reason=c.end_reason, turns=c.turns, barge_ins=c.barge_ins,
        voice_to_voice=Percentiles.of(v2v), unanswered=unanswered, answered_at=c.answered_at,
        direction=c.direction or "inbound", recording_path=c.recording_path,
        recording_s=c.recording_s,
    )


def call_timeline(engine: Engine, call_id: str) -> CallTimeline | None:
    """One call turn by turn, with its events, tool calls and messages.

    Args:
        engine: Call-log engine.
        call_id: The call's id.

    Returns:
        The timeline, or None if there is no such call.
    """
    turns = load_turns(engine, call_id=call_id)
    with Session(engine) as s:
        call = s.get(Call, call_id)
        if call is None:
            return None
        events = [EventRow(at=e.at, kind=e.kind, detail=e.detail) for e in s.scalars(
            select(Event).where(Event.call_id == call_id).order_by(Event.at, Event.id))]
        summary = _summary(call, answered_v2v(turns), sum(not t.answered for t in turns))
        t0 = call.answered_at or call.started_at
        return CallTimeline(call=summary, turns=turns, events=events,
                            tool_calls=actions.call_tool_calls(s, call_id, t0),
                            messages=actions.call_messages(s, call_id, t0),
                            summary=summary_of(call))


def build_report(engine: Engine, since: timedelta | None = None, by: GroupBy = "backend",
                 calls: int = 10, slowest: int = 5, now: datetime | None = None) -> Report:
    """Everything ``callagent report`` shows, from one read of the window's turns.

    Args:
        engine: Call-log engine.
        since: Window length; None = all time.
        by: Grouping of the stage table.
        calls: How many recent calls to list.
        slowest: How many of the slowest turns to list.
        now: End of the window (default: the current time).

    Returns:
        The report.
    """
    now = now or datetime.now(UTC)
    turns = load_turns(engine, since, now)
    return Report(
        generated_at=now, since=None if since is None else now - since, by=by,
        totals=totals(engine, since, now), groups=stage_groups(turns, by),
        rtf=rtf_by_backend(turns), slowest=slowest_turns(turns, slowest),
        recent_calls=recent_calls(engine, calls, since, now),
        tool_outcomes=actions.tool_outcomes(engine, since, now),
    )

