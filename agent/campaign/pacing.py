"""When a campaign may place its next call: the calling window, calls per minute, retries.

:class:`Pacer` answers, for the rows still pending and a wall-clock ``now`` (UTC, passed in, so
tests drive it with a made-up clock), which row to dial now, or when to look again. It holds
only the times of its own last starts; the rows and their due times come from the call log.
Pure: no database, no SIP, no sleeping.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from typing import Protocol

from agent.campaign.outcome import RETRIED
from dialplan.campaign import CampaignOptions, parse_window, zone


class Due(Protocol):
    """What the pacer reads of a pending row (``db.campaigns.DueRow``)."""

    tz: str
    attempts: int
    next_attempt_at: datetime | None


@dataclass(frozen=True)
class Pick:
    """The pacer's answer: a row to dial now, or when something may become due."""

    row: Due | None
    wake_at: datetime | None
    """When to ask again (None with no row: nothing is pending)."""


def in_window(window: tuple[time, time], local: datetime) -> bool:
    """Whether the local time of day lies in ``[start, end)``.

    An end before the start spans midnight (22:00-06:00).
    """
    start, end = window
    t = local.time().replace(tzinfo=None)
    return start <= t < end if start < end else (t >= start or t < end)


def window_opens(window: tuple[time, time] | None, tz: str, now: datetime) -> datetime:
    """``now`` if calls may start now in zone ``tz``, else when the window next opens (UTC)."""
    if window is None:
        return now
    local = now.astimezone(zone(tz))
    if in_window(window, local):
        return now
    opens = local.replace(hour=window[0].hour, minute=window[0].minute, second=0,
                          microsecond=0)
    if opens <= local:
        opens += timedelta(days=1)  # wall-clock day: 09:00 tomorrow across a DST change too
    return opens.astimezone(UTC)


class Pacer:
    """Picks the next row to dial under ``[campaigns]``'s window and calls-per-minute limit.

    Args:
        options: the campaign's options.
    """

    def __init__(self, options: CampaignOptions):
        self.options = options
        self.window = parse_window(options.window) if options.window else None
        self._last_start: datetime | None = None

    @property
    def spacing_s(self) -> float:
        """Seconds between two call starts: ``calls_per_minute`` spread evenly (0 = none)."""
        cpm = self.options.calls_per_minute
        return 60.0 / cpm if cpm > 0 else 0.0

    def started(self, at: datetime) -> None:
        """A call was started at ``at`` (counts against the calls-per-minute limit)."""
        self._last_start = at

    def due_at(self, row: Due, now: datetime) -> datetime:
        """When ``row`` may be dialled: its retry time, then its window's next opening."""
        at = max(now, row.next_attempt_at or now)
        return window_opens(self.window, row.tz, at)

    def pick(self, rows: Sequence[Due], now: datetime) -> Pick:
        """The first row (in CSV order) due now, if the rate allows a start now.

        Args:
            rows: the pending rows, in CSV order.
            now: the wall clock, UTC.
        """
        if not rows:
            return Pick(None, None)
        due = [(self.due_at(r, now), r) for r in rows]
        ready = [r for at, r in due if at <= now]
        if self._last_start is not None and self.spacing_s:
            allowed = self._last_start + timedelta(seconds=self.spacing_s)
            if allowed > now:
                soonest = min(at for at, _ in due)
                return Pick(None, max(allowed, soonest))
        if ready:
            return Pick(ready[0], now)
        return Pick(None, min(at for at, _ in due))

    def retry_at(self, outcome: str, attempts: int, now: datetime) -> datetime | None:
        """When to call a row again after ``outcome`` on its ``attempts``-th call (None: done)."""
        if outcome not in RETRIED or attempts > self.options.retries:
            return None
        return now + timedelta(seconds=self.options.retry_delay_s)
