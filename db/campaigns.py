"""A call campaign's state in the call log: its rows, their attempts, and what ``status`` shows.

Every write is its own committed transaction, made by the campaign's scheduler (never by a
call's loop), in the order that makes a restart safe: a row is ``dialing`` and its attempt
written before the call exists, the attempt gets the call's id before the INVITE is queued,
and the outcome comes after the call has ended. What a restart does with the ``dialing`` rows
it finds is decided by ``agent.campaign.outcome.resumed``; this module only reads them
(:func:`interrupted`) and writes the decision. Imports nothing from :mod:`agent` or
:mod:`models`.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import Engine, delete, func, insert, select, update

from db.schema import Call, Campaign, CampaignAttempt, CampaignRow, Turn

PENDING, DIALING, DONE = "pending", "dialing", "done"


class CampaignMismatch(ValueError):
    """A campaign of that name exists with another CSV or profile."""


@dataclass(frozen=True)
class DueRow:
    """A pending row, as the scheduler needs it."""

    id: int
    line: int
    uri: str
    tz: str
    variables: dict[str, str]
    attempts: int
    next_attempt_at: datetime | None
    """None: due at once."""


@dataclass(frozen=True)
class Interrupted:
    """A row found ``dialing`` at start: its attempt was under way when a process died."""

    row_id: int
    line: int
    attempt_id: int
    attempts: int
    call_id: str | None
    """None: the attempt never got its call id, so nothing was dialled."""
    call_found: bool = False
    """The call log has the call's row."""
    end_reason: str = ""
    """The call's end reason ("" while the row says it never ended)."""
    codec: str = ""
    turns: int = 0
    ended_at: datetime | None = None


@dataclass
class CampaignStatus:
    """One campaign's progress (``callagent campaign status``)."""

    name: str
    profile: str
    created_at: datetime
    finished_at: datetime | None
    rows: int = 0
    outcomes: Counter = field(default_factory=Counter)
    """Rows done, by outcome."""
    pending: int = 0
    dialing: int = 0
    attempts: int = 0
    next_attempts: list[tuple[int, str, datetime | None]] = field(default_factory=list)
    """The soonest pending rows: (CSV line, URI, due at; None = now)."""


def open_campaign(engine: Engine, name: str, source: str, sha256: str, profile: str,
                  rows: list, now: datetime) -> bool:
    """Create campaign ``name`` with its rows, or find it (a restart); True if created.

    Args:
        engine: the call log.
        name: the campaign's name.
        source: the CSV's path (shown in messages).
        sha256: the CSV's digest.
        profile: the profile every call uses.
        now: the wall clock, UTC.
        rows: :class:`dialplan.campaign.CampaignRow` values (only read when creating).

    Raises:
        CampaignMismatch: it exists with another CSV (by digest) or profile.
    """
    with engine.begin() as conn:
        found = conn.execute(select(Campaign).where(Campaign.name == name)).first()
        if found is not None:
            if found.source_sha256 != sha256 or found.profile != profile:
                raise CampaignMismatch(
                    f"campaign '{name}' exists with {found.source} (profile {found.profile}) "
                    "and that file or profile has changed since; name this one apart (--name)")
            return False
        conn.execute(insert(Campaign).values(name=name, created_at=now, source=source,
                                             source_sha256=sha256, profile=profile))
        conn.execute(insert(CampaignRow), [
            {"campaign": name, "line": r.index, "uri": r.uri, "tz": r.tz,
             "variables": json.dumps(r.variables), "status": PENDING, "outcome": "",
             "detail": "", "attempts": 0, "next_attempt_at": None} for r in rows])
    return True


def due_rows(engine: Engine, name: str) -> list[DueRow]:
    """The campaign's pending rows in CSV order."""
    with engine.connect() as conn:
        got = conn.execute(select(CampaignRow).where(
            CampaignRow.campaign == name, CampaignRow.status == PENDING).order_by(
            CampaignRow.line)).all()
    return [DueRow(r.id, r.line, r.uri, r.tz, json.loads(r.variables), r.attempts,
                   r.next_attempt_at) for r in got]


def begin_attempt(engine: Engine, row_id: int, now: datetime) -> tuple[int, int]:
    """Mark the row ``dialing`` and write its next attempt (no call yet).

    Returns:
        (attempt id, attempt number).
    """
    with engine.begin() as conn:
        number = conn.execute(select(CampaignRow.attempts).where(
            CampaignRow.id == row_id)).scalar_one() + 1
        conn.execute(update(CampaignRow).where(CampaignRow.id == row_id).values(
            status=DIALING, attempts=number))
        attempt_id = conn.execute(insert(CampaignAttempt).values(
            row_id=row_id, number=number, started_at=now, outcome="", detail="")
        ).inserted_primary_key[0]
    return int(attempt_id), number


def attach_call(engine: Engine, attempt_id: int, call_id: str) -> None:
    """Record the attempt's call id; committed before the INVITE goes out."""
    with engine.begin() as conn:
        conn.execute(update(CampaignAttempt).where(CampaignAttempt.id == attempt_id).values(
            call_id=call_id))


def end_attempt(engine: Engine, attempt_id: int, outcome: str, detail: str, now: datetime,
                retry_at: datetime | None = None) -> None:
    """Close the attempt with its outcome; its row is done, or pending again at ``retry_at``."""
    with engine.begin() as conn:
        row_id = conn.execute(select(CampaignAttempt.row_id).where(
            CampaignAttempt.id == attempt_id)).scalar_one()
        conn.execute(update(CampaignAttempt).where(CampaignAttempt.id == attempt_id).values(
            ended_at=now, outcome=outcome, detail=detail))
        conn.execute(update(CampaignRow).where(CampaignRow.id == row_id).values(
            status=PENDING if retry_at is not None else DONE, outcome=outcome, detail=detail,
            next_attempt_at=retry_at))


def release_attempt(engine: Engine, attempt_id: int) -> None:
    """Undo an attempt that never dialled (no call id): gone, its row pending as before."""
    with engine.begin() as conn:
        row_id = conn.execute(select(CampaignAttempt.row_id).where(
            CampaignAttempt.id == attempt_id)).scalar_one()
        conn.execute(delete(CampaignAttempt).where(CampaignAttempt.id == attempt_id))
        conn.execute(update(CampaignRow).where(CampaignRow.id == row_id).values(
            status=PENDING, attempts=CampaignRow.attempts - 1))


def interrupted(engine: Engine, name: str) -> list[Interrupted]:
    """The campaign's ``dialing`` rows, each with its open attempt and what the log has of it."""
    out = []
    with engine.connect() as conn:
        got = conn.execute(
            select(CampaignRow.id, CampaignRow.line, CampaignRow.attempts, CampaignAttempt.id,
                   CampaignAttempt.call_id)
            .join(CampaignAttempt, CampaignAttempt.row_id == CampaignRow.id)
            .where(CampaignRow.campaign == name, CampaignRow.status == DIALING,
                   CampaignAttempt.ended_at.is_(None))
            .order_by(CampaignRow.line)).all()
        for row_id, line, attempts, attempt_id, call_id in got:
            call = None if call_id is None else conn.execute(
                select(Call.end_reason, Call.codec, Call.ended_at).where(Call.id == call_id)
            ).first()
            turns = 0 if call is None else conn.execute(
                select(func.count()).select_from(Turn).where(Turn.call_id == call_id)).scalar()
            out.append(Interrupted(row_id, line, attempt_id, attempts, call_id, call is not None,
                                   *(call[:2] if call is not None else ("", "")), turns or 0,
                                   None if call is None else call[2]))
    return out


def finish_campaign(engine: Engine, name: str, now: datetime) -> None:
    """Stamp the campaign finished (every row done)."""
    with engine.begin() as conn:
        conn.execute(update(Campaign).where(Campaign.name == name).values(finished_at=now))


def campaign_status(engine: Engine, name: str | None = None,
                    next_rows: int = 5) -> list[CampaignStatus]:
    """Progress of one campaign, or of every one (newest first)."""
    with engine.connect() as conn:
        q = select(Campaign).order_by(Campaign.created_at.desc())
        if name is not None:
            q = q.where(Campaign.name == name)
        out = []
        for c in conn.execute(q).all():
            st = CampaignStatus(c.name, c.profile, c.created_at, c.finished_at)
            for status, outcome, attempts in conn.execute(
                    select(CampaignRow.status, CampaignRow.outcome, CampaignRow.attempts)
                    .where(CampaignRow.campaign == c.name)).all():
                st.rows += 1
                st.attempts += attempts
                if status == DONE:
                    st.outcomes[outcome] += 1
                elif status == DIALING:
                    st.dialing += 1
                else:
                    st.pending += 1
            st.next_attempts = [(r.line, r.uri, r.next_attempt_at) for r in conn.execute(
                select(CampaignRow).where(CampaignRow.campaign == c.name,
                                          CampaignRow.status == PENDING)
                .order_by(CampaignRow.next_attempt_at.is_not(None),
                          CampaignRow.next_attempt_at, CampaignRow.line)
                .limit(next_rows)).all()]
            out.append(st)
    return out


def attempts_of(engine: Engine, name: str) -> list[tuple[int, int, str | None, str, str]]:
    """Every attempt of the campaign: (CSV line, attempt number, call id, outcome, detail)."""
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(
            select(CampaignRow.line, CampaignAttempt.number, CampaignAttempt.call_id,
                   CampaignAttempt.outcome, CampaignAttempt.detail)
            .join(CampaignRow, CampaignAttempt.row_id == CampaignRow.id)
            .where(CampaignRow.campaign == name)
            .order_by(CampaignRow.line, CampaignAttempt.number)).all()]
