"""The post-call summaries in the call log: what the job reads and claims, what reports show.

A call whose profile asks for a summary is marked ``pending`` by its ``CallEnded`` record
(:mod:`db.rows`); the job (:mod:`agent.summary`) finds it with :func:`pending`, takes it with
:func:`claim` (a conditional update of ``summary_attempts``, so two processes never start
the same try, and a try that killed its process is counted), reads its words with
:func:`conversation`, and sends its outcome as a ``SummaryRecord`` through the call-log
writer. Imports nothing from :mod:`agent`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Engine, select, update
from sqlalchemy.orm import Session

from db.schema import Call, Turn


@dataclass(frozen=True)
class PendingCall:
    """A call whose summary is still to be made."""

    id: str
    profile: str
    ended_at: datetime | None
    attempts: int
    """Tries started so far (each one claimed)."""


@dataclass(frozen=True)
class SummaryRow:
    """A call's summary as the call log holds it, for ``report --call`` and the console."""

    state: str
    """``pending``, ``done`` or ``failed``."""
    summary: str | None
    fields: dict | None
    """The extracted fields (name -> string or None); None until done."""
    detail: str | None
    """Why it failed."""
    at: datetime | None
    seconds: float | None
    attempts: int


def pending(engine: Engine, worker: str | None, host: str | None,
            limit: int = 20) -> list[PendingCall]:
    """The pending summaries of calls this process (``worker`` on ``host``) ran, oldest first.

    Only its own: another live process may be making one of the others right now.
    """
    q = (select(Call.id, Call.profile, Call.ended_at, Call.summary_attempts)
         .where(Call.summary_state == "pending", Call.host == host,
                Call.worker.is_(None) if worker is None else Call.worker == worker)
         .order_by(Call.ended_at, Call.id).limit(limit))
    with engine.connect() as conn:
        return [PendingCall(cid, profile or "", ended, attempts or 0)
                for cid, profile, ended, attempts in conn.execute(q)]


def claim(engine: Engine, call: PendingCall) -> bool:
    """Count one more try of ``call``'s summary; False if someone else did first."""
    q = (update(Call).where(Call.id == call.id, Call.summary_state == "pending",
                            Call.summary_attempts == call.attempts)
         .values(summary_attempts=call.attempts + 1))
    with engine.begin() as conn:
        return conn.execute(q).rowcount == 1


def unclaim(engine: Engine, call: PendingCall) -> None:
    """Take back the try :func:`claim` counted: it was cancelled, not failed."""
    q = (update(Call).where(Call.id == call.id, Call.summary_state == "pending",
                            Call.summary_attempts == call.attempts + 1)
         .values(summary_attempts=call.attempts))
    with engine.begin() as conn:
        conn.execute(q)


def conversation(engine: Engine, call_id: str) -> list[tuple[str, str]]:
    """The call's turns in order: (what the caller said, what the agent replied)."""
    q = (select(Turn.transcript, Turn.reply_text).where(Turn.call_id == call_id)
         .order_by(Turn.index))
    with engine.connect() as conn:
        return [(said or "", reply or "") for said, reply in conn.execute(q)]


def summary_of(call: Call) -> SummaryRow | None:
    """The summary columns of a call row (None: its profile asked for none)."""
    if call.summary_state is None:
        return None
    fields = None
    if call.extracted:
        try:
            fields = json.loads(call.extracted)
        except ValueError:
            fields = {"": call.extracted}  # not written by the job: shown as it is
    return SummaryRow(call.summary_state, call.summary, fields, call.summary_detail,
                      call.summary_at, call.summary_s, call.summary_attempts or 0)


def call_summary(engine: Engine, call_id: str) -> SummaryRow | None:
    """One call's summary (None: no such call, or none asked for)."""
    with Session(engine) as s:
        call = s.get(Call, call_id)
        return None if call is None else summary_of(call)
