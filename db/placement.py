"""Where calls ran, for a call log shared by several agent processes and machines.

Owns three things that the columns ``calls.worker`` and ``calls.host`` (revision 0004) make
possible: :func:`this_host`, the host name every agent records; :func:`close_lost_calls_of`,
which closes as ``lost`` only the open calls of one agent process (a dead cluster worker must
not take its neighbours' live calls with it, as :func:`db.migrate.close_lost_calls`, which
closes every open call, would); and :func:`build_place_report`, the latency report grouped by
worker or host (``callagent report --by worker|host``), from the same query functions as
:func:`db.reports.build_report`. Imports nothing from :mod:`agent`.
"""

from __future__ import annotations

import socket
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Literal

from sqlalchemy import Engine, or_, select

from db.migrate import close_lost_calls
from db.reports import (
    Report,
    StageGroup,
    TurnRow,
    answered_v2v,
    load_turns,
    recent_calls,
    rtf_by_backend,
    slowest_turns,
    totals,
)
from db.schema import Call
from db.stages import STAGES
from db.stats import Percentiles

PlaceBy = Literal["worker", "host"]
PLACES: tuple[str, ...] = ("worker", "host")


def this_host() -> str:
    """The name this machine records in ``calls.host`` (its hostname)."""
    return socket.gethostname()


def close_lost_calls_of(engine: Engine, worker: str | None, host: str | None,
                        detail: str = "") -> int:
    """Close the calls one agent process left open (it crashed or was killed) as ``lost``.

    A call belongs to the process if its ``worker`` is ``worker`` (no worker: a ``serve``
    outside a cluster, a simulation, or a call logged before revision 0004) and its ``host`` is
    ``host`` or unknown. As in :func:`db.migrate.close_lost_calls`, the end time is the last
    thing known about the call (its latest turn or event, else its start), and a later
    ``CallEnded`` for the call overwrites it.

    Args:
        engine: Engine of a migrated call-log database.
        worker: The process's worker id, or None.
        host: Its host name; None = any host.
        detail: If given, recorded on each closed call as a ``lost`` event (the signal its
            process died of, and which worker that was).

    Returns:
        How many calls were closed.
    """
    owner = [Call.worker == worker] if worker is not None else [Call.worker.is_(None)]
    if host is not None:
        owner.append(or_(Call.host == host, Call.host.is_(None)))
    return close_lost_calls(engine, detail, *owner)




def place_key(worker: str | None, host: str | None, by: PlaceBy) -> str:
    """The group a call's turns go to.

    By worker ``w1@host`` (worker ids repeat across hosts), by host the host; ``(none)`` for
    what was not recorded.
    """
    if by == "host":
        return host or "(none)"
    return f"{worker or '(none)'}@{host}" if host else (worker or "(none)")


def call_places(engine: Engine, since: timedelta | None = None,
                now: datetime | None = None) -> dict[str, tuple[str | None, str | None]]:
    """``call id -> (worker, host)`` for the calls started in the window."""
    q = select(Call.id, Call.worker, Call.host)
    if since is not None:
        q = q.where(Call.started_at >= (now or datetime.now(UTC)) - since)
    with engine.connect() as conn:
        return {cid: (worker, host) for cid, worker, host in conn.execute(q)}


def place_groups(turns: Sequence[TurnRow], places: dict[str, tuple[str | None, str | None]],
                 by: PlaceBy) -> list[StageGroup]:
    """Per-stage percentiles of the turns of each worker (or host), groups sorted by name.

    The same numbers as :func:`db.reports.stage_groups`: voice-to-voice over answered turns
    only, a missing stage left out, unanswered turns counted per reason.

    Args:
        turns: Rows from :func:`db.reports.load_turns`.
        places: From :func:`call_places`.
        by: ``worker`` or ``host``.

    Returns:
        One :class:`~db.reports.StageGroup` per distinct key.
    """
    if by not in PLACES:
        raise ValueError(f"bad group {by!r}: use worker or host")
    buckets: dict[str, list[TurnRow]] = {}
    for t in turns:
        buckets.setdefault(place_key(*places.get(t.call_id, (None, None)), by), []).append(t)
    groups = []
    for key, rows in sorted(buckets.items()):
        stages = {m: Percentiles.of(t.stages[m] for t in rows) for m in STAGES}
        stages["voice_to_voice"] = Percentiles.of(answered_v2v(rows))
        reasons = Counter(t.unanswered for t in rows if t.unanswered)
        groups.append(StageGroup(
            key=key, calls=len({t.call_id for t in rows}), turns=len(rows), stages=stages,
            unanswered=sum(reasons.values()), unanswered_reasons=dict(sorted(reasons.items()))))
    return groups


def build_place_report(engine: Engine, since: timedelta | None = None, by: PlaceBy = "worker",
                       calls: int = 10, slowest: int = 5, now: datetime | None = None) -> Report:
    """:func:`db.reports.build_report`, with the stage table grouped by worker or host.

    Args:
        engine: Call-log engine.
        since: Window length; None = all time.
        by: ``worker`` or ``host``.
        calls: How many recent calls to list.
        slowest: How many of the slowest turns to list.
        now: End of the window (default: the current time).

    Returns:
        The report; its ``by`` is ``worker`` or ``host``.
    """
    now = now or datetime.now(UTC)
    turns = load_turns(engine, since, now)
    return Report(
        generated_at=now, since=None if since is None else now - since, by=by,  # type: ignore[arg-type]
        totals=totals(engine, since, now),
        groups=place_groups(turns, call_places(engine, since, now), by),
        rtf=rtf_by_backend(turns), slowest=slowest_turns(turns, slowest),
        recent_calls=recent_calls(engine, calls, since, now),
    )
