"""Call-log tables as SQLAlchemy 2 typed mappings.

``calls``, ``turns``, ``events``, ``tool_calls``, ``messages``, ``webhook_outbox`` and the call
campaigns' ``campaigns``, ``campaign_rows`` and ``campaign_attempts``.

Owns the schema only: no engine, no sessions, no queries (see :mod:`db.migrate`,
:mod:`db.writer`, :mod:`db.reports`). A change here needs a new revision in
``db/migrations/versions``; the tests compare this metadata with the migrated database.
Imports nothing from :mod:`agent` or :mod:`models`.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import (
    Boolean,
    DateTime,
    Double,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC datetime on every backend.

    PostgreSQL stores ``timestamptz``; SQLite has no time zones, so the value is stored as naive
    UTC text and comes back tagged UTC. Naive inputs are taken to be UTC already.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value, dialect):  # noqa: D102
        if value is None:
            return None
        value = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        # SQLite compares stamps as text: one zone and no offset suffix keep the order right.
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value, dialect):  # noqa: D102
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Base(DeclarativeBase):
    """Declarative base of the call log."""


class Call(Base):
    """One SIP (or simulated) call; the id is the agent's call id."""

    __tablename__ = "calls"

    id: Mapped[str] = mapped_column(String(128), primary_key=True)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime())
    answered_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    caller_uri: Mapped[str] = mapped_column(String(255), default="")
    called_extension: Mapped[str] = mapped_column(String(64), default="")
    profile: Mapped[str] = mapped_column(String(64), default="")
    asr_backend: Mapped[str] = mapped_column(String(64), default="")
    asr_model: Mapped[str] = mapped_column(String(255), default="")
    llm_model: Mapped[str] = mapped_column(String(255), default="")
    tts_voice: Mapped[str] = mapped_column(String(64), default="")
    end_reason: Mapped[str] = mapped_column(String(32), default="")
    codec: Mapped[str] = mapped_column(String(32), default="")
    source: Mapped[str] = mapped_column(String(16), default="sip")
    turns: Mapped[int] = mapped_column(Integer, default=0)
    barge_ins: Mapped[int] = mapped_column(Integer, default=0)
    # Where the call ran (revision 0004): the cluster worker id and the host, None for calls
    # logged before, and the worker None for a serve outside a cluster.
    worker: Mapped[str | None] = mapped_column(String(64))
    host: Mapped[str | None] = mapped_column(String(255))
    # Revision 0005: who placed the call (``inbound``: a caller rang us; ``outbound``:
    # ``callagent dial``), and the call's stereo recording where its profile records.
    direction: Mapped[str] = mapped_column(String(16), default="inbound",
                                           server_default="inbound")
    recording_path: Mapped[str | None] = mapped_column(String(1024))
    recording_s: Mapped[float | None] = mapped_column(Double)
    # Revision 0009: the post-call summary and extraction (a background job after the hang-up).
    # ``summary_state`` None: none asked; ``pending`` (kept across a restart), ``done`` or
    # ``failed`` (why in ``summary_detail``). ``extracted`` is a JSON object as text.
    summary_state: Mapped[str | None] = mapped_column(String(16))
    summary: Mapped[str | None] = mapped_column(Text)
    extracted: Mapped[str | None] = mapped_column(Text)
    summary_detail: Mapped[str | None] = mapped_column(Text)
    summary_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    summary_s: Mapped[float | None] = mapped_column(Double)
    summary_attempts: Mapped[int] = mapped_column(Integer, default=0, server_default="0")

    turn_rows: Mapped[list[Turn]] = relationship(
        back_populates="call", order_by="Turn.index", passive_deletes=True
    )

    __table_args__ = (Index("ix_calls_started_at", "started_at"),
                      Index("ix_calls_summary_state", "summary_state"))


class Turn(Base):
    """One caller utterance and the agent's reply; columns mirror ``TurnRecord``.

    Durations are seconds (``<metric>_s``, see :data:`db.stages.TIMING_COLUMNS`).
    """

    __tablename__ = "turns"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    call_id: Mapped[str] = mapped_column(ForeignKey("calls.id", ondelete="CASCADE"))
    index: Mapped[int] = mapped_column(Integer)
    speech_start_s: Mapped[float | None] = mapped_column(Double)
    speech_end_s: Mapped[float | None] = mapped_column(Double)
    transcript: Mapped[str] = mapped_column(Text, default="")
    reply_text: Mapped[str] = mapped_column(Text, default="")
    endpoint_s: Mapped[float | None] = mapped_column(Double)
    asr_s: Mapped[float | None] = mapped_column(Double)
    llm_ttft_s: Mapped[float | None] = mapped_column(Double)
    first_chunk_s: Mapped[float | None] = mapped_column(Double)
    tts_first_audio_s: Mapped[float | None] = mapped_column(Double)
    playout_s: Mapped[float | None] = mapped_column(Double)
    voice_to_voice_s: Mapped[float | None] = mapped_column(Double)
    llm_total_s: Mapped[float | None] = mapped_column(Double)
    llm_tokens: Mapped[int | None] = mapped_column(Integer)
    tts_total_s: Mapped[float | None] = mapped_column(Double)
    audio_in_s: Mapped[float | None] = mapped_column(Double)
    audio_out_s: Mapped[float | None] = mapped_column(Double)
    asr_rtf: Mapped[float | None] = mapped_column(Double)
    tts_rtf: Mapped[float | None] = mapped_column(Double)
    asr_backend: Mapped[str] = mapped_column(String(64), default="")
    asr_model: Mapped[str] = mapped_column(String(255), default="")
    barge_in: Mapped[bool] = mapped_column(Boolean, default=False)
    # Why the caller heard no reply ("" = answered). The server default makes rows written
    # before revision 0003 read as answered, as they were.
    unanswered: Mapped[str] = mapped_column(String(32), default="", server_default="")
    recorded_at: Mapped[datetime | None] = mapped_column(UTCDateTime())

    call: Mapped[Call] = relationship(back_populates="turn_rows")

    # (call_id, index) is the turn's natural key: replaying a spool batch twice updates the
    # same row instead of duplicating it.
    __table_args__ = (
        UniqueConstraint("call_id", "index", name="uq_turns_call_id_index"),
        Index("ix_turns_call_id", "call_id"),
    )


class Event(Base):
    """Something that happened in a call (dtmf, barge-in, error, state change...)."""

    __tablename__ = "events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    call_id: Mapped[str] = mapped_column(ForeignKey("calls.id", ondelete="CASCADE"))
    at: Mapped[datetime] = mapped_column(UTCDateTime())
    kind: Mapped[str] = mapped_column(String(32))
    detail: Mapped[str] = mapped_column(Text, default="")

    __table_args__ = (Index("ix_events_call_id", "call_id"),)


class ToolCall(Base):
    """An action the agent took or tried: a tool the LLM called, or a keypad mapping.

    ``outcome`` is ``ok`` or why not (``failed``, ``timeout``, ``http-500``, ``bad-json``,
    ``unknown-target``, ``caller-gone``...); ``latency_s`` is from the request to its outcome.
    A transfer's row is written when its REFER goes out, ``pending``, and updated by its
    NOTIFYs and its outcome (``seq``, revision 0007); ``lost`` if its agent process died first.
    """

    __tablename__ = "tool_calls"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    call_id: Mapped[str] = mapped_column(ForeignKey("calls.id", ondelete="CASCADE"))
    at: Mapped[datetime] = mapped_column(UTCDateTime())
    turn_index: Mapped[int | None] = mapped_column(Integer)
    name: Mapped[str] = mapped_column(String(64))
    arguments: Mapped[str] = mapped_column(Text, default="")
    source: Mapped[str] = mapped_column(String(16), default="llm")
    outcome: Mapped[str] = mapped_column(String(32), default="")
    detail: Mapped[str] = mapped_column(Text, default="")
    latency_s: Mapped[float | None] = mapped_column(Double)
    # Revision 0007: the action's number in its call, for a row that later records update
    # (None: written once, as every row before). NULLs never collide in a unique index.
    seq: Mapped[int | None] = mapped_column(Integer)

    __table_args__ = (Index("ix_tool_calls_call_id", "call_id"),
                      Index("uq_tool_calls_call_id_seq", "call_id", "seq", unique=True))


class CallerMessage(Base):
    """A message a caller left (``take_message``): what they said, and its audio."""

    __tablename__ = "messages"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    call_id: Mapped[str] = mapped_column(ForeignKey("calls.id", ondelete="CASCADE"))
    at: Mapped[datetime] = mapped_column(UTCDateTime())
    caller_uri: Mapped[str] = mapped_column(String(255), default="")
    text: Mapped[str] = mapped_column(Text, default="")
    audio_path: Mapped[str | None] = mapped_column(String(1024))
    duration_s: Mapped[float | None] = mapped_column(Double)
    # Revision 0010: when an operator marked it handled in the console (None: not yet).
    handled_at: Mapped[datetime | None] = mapped_column(UTCDateTime())

    __table_args__ = (Index("ix_messages_call_id", "call_id"),)


class WebhookDelivery(Base):
    """One event waiting for, or done with, one webhook receiver (the outbox, revision 0006).

    Written in the transaction of the record the event is about (:mod:`db.outbox`), so an event
    exists exactly when its record does; the delivery worker (:mod:`agent.webhooks`) POSTs
    ``body`` as is on every try, so a retry is byte for byte the first attempt. No foreign key:
    a delivery outlives nothing it needs, and ``call_id`` only lists a call's deliveries.
    """

    __tablename__ = "webhook_outbox"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    event_id: Mapped[str] = mapped_column(String(64))
    url: Mapped[str] = mapped_column(String(1024))
    type: Mapped[str] = mapped_column(String(32))
    call_id: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    """When the event was queued: its age counts from here (``max_age_s``)."""
    body: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(16), default="pending")
    """pending | delivered | failed."""
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(UTCDateTime())
    """When it is due; a delivery in flight holds it a lease ahead (see :mod:`db.outbox`)."""
    last_status: Mapped[int | None] = mapped_column(Integer)
    """The receiver's last HTTP status (None: no answer)."""
    last_error: Mapped[str] = mapped_column(String(255), default="")
    delivered_at: Mapped[datetime | None] = mapped_column(UTCDateTime())

    # (event_id, url): a record replayed from the spool, or written twice, queues nothing new.
    __table_args__ = (
        UniqueConstraint("event_id", "url", name="uq_webhook_outbox_event_id_url"),
        Index("ix_webhook_outbox_due", "url", "status", "next_attempt_at"),
        Index("ix_webhook_outbox_call_id", "call_id"),
    )


class Campaign(Base):
    """A call campaign (``callagent campaign FILE.csv``, revision 0008), by name."""

    __tablename__ = "campaigns"

    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    source: Mapped[str] = mapped_column(String(1024), default="")
    """The CSV it was read from."""
    source_sha256: Mapped[str] = mapped_column(String(64), default="")
    """The CSV's digest: a restart with a changed file is refused, not mixed in."""
    profile: Mapped[str] = mapped_column(String(64), default="")
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


class CampaignRow(Base):
    """One number of a campaign: its state, its outcome and when it is due next.

    ``status`` is ``pending`` (due at ``next_attempt_at``), ``dialing`` (an attempt is under way
    or was when its process died) or ``done`` (``outcome`` set: answered, voicemail,
    no-answer, busy, failed, refused).
    """

    __tablename__ = "campaign_rows"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    campaign: Mapped[str] = mapped_column(ForeignKey("campaigns.name", ondelete="CASCADE"))
    line: Mapped[int] = mapped_column(Integer)
    """Its line in the CSV (the header is line 1)."""
    uri: Mapped[str] = mapped_column(String(255))
    tz: Mapped[str] = mapped_column(String(64), default="UTC")
    variables: Mapped[str] = mapped_column(Text, default="{}")
    """Its other columns, JSON."""
    status: Mapped[str] = mapped_column(String(16), default="pending")
    outcome: Mapped[str] = mapped_column(String(32), default="")
    detail: Mapped[str] = mapped_column(Text, default="")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime())

    __table_args__ = (UniqueConstraint("campaign", "line", name="uq_campaign_rows_line"),
                      Index("ix_campaign_rows_due", "campaign", "status", "next_attempt_at"))


class CampaignAttempt(Base):
    """One call a campaign placed, or was about to place, for one row.

    Written before the INVITE: first without ``call_id``, then with it (still before the
    INVITE), so an attempt with no ``call_id`` was never dialled. No foreign key to ``calls``:
    the call's own row comes later, through the call log's writer, and may never come at all.
    """

    __tablename__ = "campaign_attempts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    row_id: Mapped[int] = mapped_column(ForeignKey("campaign_rows.id", ondelete="CASCADE"))
    number: Mapped[int] = mapped_column(Integer)
    """1 for the first call of the row, 2 for its first retry..."""
    call_id: Mapped[str | None] = mapped_column(String(128))
    started_at: Mapped[datetime] = mapped_column(UTCDateTime())
    ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    outcome: Mapped[str] = mapped_column(String(32), default="")
    detail: Mapped[str] = mapped_column(Text, default="")

    __table_args__ = (Index("ix_campaign_attempts_row_id", "row_id"),
                      Index("ix_campaign_attempts_call_id", "call_id"))


# The TurnRecord fields copied one-to-one into ``turns`` columns (``at`` goes to
# ``recorded_at``); tests check that these are exactly the record's fields.
TURN_FIELDS = tuple(
    c.key for c in Turn.__table__.columns if c.key not in ("id", "recorded_at")
)
