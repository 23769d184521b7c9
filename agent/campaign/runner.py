"""Run a call campaign: dial its rows through one :class:`~agent.server.Server`, record outcomes.

:class:`CampaignRunner` is the campaign's scheduler, on the thread that calls :meth:`run` (the
CLI's main thread, as ``dial``'s loop is). It picks due rows (:class:`~agent.campaign.pacing.
Pacer`), places each call with :meth:`Server.dial`, cancels one still ringing after
``ring_timeout_s``, and when a call's session has ended stores its outcome and any retry. It
reads a session's end (``end_reason``, ``codec``) once the session's thread is over; it never
writes a call's state, and asks a call to end only by a message (``shutdown``).

Order of writes, so a kill at any point is safe (see :mod:`agent.campaign.outcome`): the row
is ``dialing`` and its attempt stored; the call id is stored (``before_invite``); the INVITE is
queued; the outcome is stored once the call is over.

The call cap: a campaign runs in a process of its own (its own SIP port, like ``dial``), but
its calls take the machine's ``sip.max_calls`` slots, the same set ``serve`` takes a slot of
for each caller (:mod:`agent.sip.slots`). The campaign holds at most ``min(concurrency,
sip.max_calls)`` calls; before each call it takes a free slot, and while there is none (the
callers of a ``serve`` hold them) it waits, logging ``campaign-waiting`` once per wait: a wait
is neither an attempt nor a failure. ``serve`` refuses callers (486) while the campaign's calls
and its own fill the set.

Imports the server, never pjsua2.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine

from agent import log
from agent.call.session import CallSession
from agent.campaign.outcome import RING_TIMEOUT, call_outcome, resumed
from agent.campaign.pacing import Pacer
from agent.server import Server
from agent.sip.slots import Slot
from db import campaigns as store
from dialplan import Profile
from dialplan.campaign import CampaignOptions, CampaignRow, fill

PER_PROCESS_CALLS = 4
"""pjsua2's compiled-in cap on one process's calls (docs: SIP.md)."""
POLL_S = 0.1
STOP_WAIT_S = 10.0
SLOT_POLL_S = 0.5
"""How often a campaign with no free call slot tries again (a slot frees when a call ends)."""
PREFETCH_ROWS = 2
"""Rows ahead whose greeting and voicemail message are synthesised before their turn: done
in the loop, a row's phrases took seconds of TTS and held up every call's reaping and ring
timeout (tests/test_sip_campaign.py)."""
"""The longest the loop waits for a SIP event before looking at its calls and clock again."""


def wall() -> datetime:
    """The wall clock, UTC (campaign times are wall-clock: windows, retry times)."""
    return datetime.now(UTC)


@dataclass
class _Active:
    row: store.DueRow
    attempt_id: int
    number: int
    session: CallSession
    dialled_at: float
    """Monotonic: the ring timeout counts from here."""
    cancelled: bool = False
    """Its ring timeout passed: asked to end (``ring-timeout``)."""
    stop_sent: bool = False


@dataclass
class Summary:
    """What one run of the campaign did."""

    calls: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    resumed: list[tuple[int, str]] = field(default_factory=list)
    """Rows a previous run left dialing: (CSV line, what the restart made of it)."""
    finished: bool = False


def row_profile(profile: Profile, row: store.DueRow | CampaignRow) -> Profile:
    """The profile with the row's variables in its greeting and voicemail message."""
    values = row.variables
    line = row.line if isinstance(row, store.DueRow) else row.index
    as_row = CampaignRow(line, "", "", "", values)
    return dataclasses.replace(
        profile, greeting=fill(profile.greeting, as_row, f"profiles.{profile.name}.greeting"),
        voicemail_message=fill(profile.voicemail_message, as_row,
                               f"profiles.{profile.name}.voicemail_message"))


class CampaignRunner:
    """Dial one campaign's pending rows until every row is done, or ``stop`` is set.

    Args:
        server: a started server (its SIP port open, the profile prepared).
        engine: the call log, migrated (campaign state is written here, synchronously).
        name: the campaign (created by :func:`db.campaigns.open_campaign`).
        profile: the agent's profile for every call.
        options: pacing, retries, ring timeout.
        stop: set to stop dialling; calls in progress are hung up.
        clock: the wall clock, UTC (a test's may run ahead).
        monotonic: the clock of ring timeouts and the stop's wait (a test's, with ``clock``).
    """

    def __init__(self, server: Server, engine: Engine, name: str, profile: Profile,
                 options: CampaignOptions, stop: threading.Event,
                 clock: Callable[[], datetime] = wall,
                 monotonic: Callable[[], float] = time.monotonic):
        self.server = server
        self.engine = engine
        self.name = name
        self.profile = profile
        self.options = options
        self.stop = stop
        self.clock = clock
        self.monotonic = monotonic
        self.pacer = Pacer(options)
        self.max_calls = server.config.sip.max_calls
        self.cap = min(options.concurrency, self.max_calls, PER_PROCESS_CALLS)
        self.active: dict[str, _Active] = {}
        self.summary = Summary()
        self._look_at: datetime | None = None  # when pending rows may next be due
        self._stop_by: float | None = None
        self._voice = ThreadPoolExecutor(1, thread_name_prefix="campaign-tts")
        self._phrases: dict[int, tuple[store.DueRow, Future]] = {}  # synthesised ahead, by id
        self._waiting_since: float | None = None  # monotonic: no free slot since then

    def resume(self) -> list[tuple[int, str]]:
        """Settle the rows a killed run left ``dialing`` (the rule in :mod:`.outcome`)."""
        now = self.clock()
        for it in store.interrupted(self.engine, self.name):
            got = resumed(it.call_id, it.ended_at is not None, it.end_reason, it.codec, it.turns)
            if got is None:
                store.release_attempt(self.engine, it.attempt_id)
                note = "not dialled: pending again"
            else:
                retry = (self.pacer.retry_at(got.outcome, it.attempts, now)
                         if got.detail != "interrupted" else None)
                store.end_attempt(self.engine, it.attempt_id, got.outcome, got.detail,
                                  it.ended_at or now, retry)
                note = f"{got.outcome} ({got.detail})" + (" retry later" if retry else "")
            log.event("campaign-resumed", it.call_id or "-", campaign=self.name, line=it.line,
                      outcome=note)
            self.summary.resumed.append((it.line, note))
        return self.summary.resumed

    def run(self) -> Summary:
        """Dial until every row is done or ``stop`` is set; returns what this run did."""
        self.resume()
        log.event("campaign-started", campaign=self.name, profile=self.profile.name,
                  concurrency=self.cap, max_calls=self.max_calls)
        while True:
            self.server.step(POLL_S)  # waits on the SIP event queue, at most POLL_S
            self._reap()
            if self.stop.is_set():
                if not self._stopping():
                    break
                continue
            self._cancel_ringing()
            if len(self.active) < self.cap and not self._next() and not self.active:
                self.summary.finished = True
                store.finish_campaign(self.engine, self.name, self.clock())
                break
        self._voice.shutdown(wait=False, cancel_futures=True)
        log.event("campaign-stopped", campaign=self.name, calls=self.summary.calls,
                  finished=self.summary.finished, **self.summary.outcomes)
        return self.summary

    # ---- one step ----------------------------------------------------------------------------

    def _next(self) -> bool:
        """Dial the next due row if there is one; False once no row is pending at all."""
        now = self.clock()
        if self._look_at is not None and now < self._look_at:
            return True
        rows = [r for r in store.due_rows(self.engine, self.name)
                if r.id not in {a.row.id for a in self.active.values()}]
        pick = self.pacer.pick(rows, now)
        if pick.row is None:
            self._look_at = pick.wake_at
            return pick.wake_at is not None
        self._prefetch([pick.row, *(r for r in rows if r is not pick.row)])
        if not self._phrases[pick.row.id][1].done():
            return True  # its greeting is being synthesised: dial once it is there
        slot = self.server.slots.take(pick.row.uri)
        if slot is None:  # the machine's calls (serve's callers with ours) hold every slot
            self._wait_for_slot(pick.row)
            self._look_at = now + timedelta(seconds=SLOT_POLL_S)
            return True
        waited = self._waiting_since
        self._waiting_since = None
        del self._phrases[pick.row.id]
        self._dial(pick.row, now, slot, None if waited is None else self.monotonic() - waited)
        self._look_at = None
        return True

    def _wait_for_slot(self, row: store.DueRow) -> None:
        """Note the start of a wait for a call slot (one log line per wait)."""
        if self._waiting_since is not None:
            return
        self._waiting_since = self.monotonic()
        log.event("campaign-waiting", campaign=self.name, line=row.line, reason="no-free-slot",
                  max_calls=self.max_calls, ours=len(self.active))

    def _prefetch(self, rows: Sequence[store.DueRow]) -> None:
        """Synthesise the phrases of the next rows on a thread of its own, off this loop.

        :meth:`Server.dial` then finds them in the profile's phrase cache. A failure shows in
        the dial, which records the row failed.
        """
        for row in rows[:PREFETCH_ROWS]:
            if row.id not in self._phrases:
                self._phrases[row.id] = (row, self._voice.submit(self._synthesise, row))

    def _synthesise(self, row: store.DueRow) -> None:
        profile = row_profile(self.profile, row)
        phrases = self.server.profiles.runner(profile)  # the profile's shared cache, by name
        phrases.speak(profile.greeting)
        if profile.amd:
            phrases.speak(profile.voicemail_message)

    def _forget(self, row: store.DueRow) -> None:
        """Drop the ended attempt's own phrases from the cache, unless another row says them.

        Each row's greeting and message are seconds of audio: kept, a long campaign's would grow
        without bound. A retry synthesises them again.
        """
        others = [a.row for a in self.active.values()] + [r for r, _ in self._phrases.values()]
        keep = {text for other in others for text in self._texts(other)}
        phrases = self.server.profiles.runner(self.profile)  # the shared one, by name
        for text in self._texts(row):
            if text not in keep:
                phrases.forget(text)

    def _texts(self, row: store.DueRow) -> set[str]:
        """The row's own phrases: those its variables changed (the others are every row's)."""
        said = row_profile(self.profile, row)
        return {said.greeting, said.voicemail_message} - {self.profile.greeting,
                                                          self.profile.voicemail_message}

    def _dial(self, row: store.DueRow, now: datetime, slot: Slot, waited_s: float | None) -> None:
        """Call ``row`` in ``slot`` (the call holds it; released if nothing is dialled)."""
        try:
            attempt_id, number = store.begin_attempt(self.engine, row.id, now)
        except BaseException:
            slot.release()
            raise
        attached: list[str] = []

        def before_invite(call_id: str) -> None:
            store.attach_call(self.engine, attempt_id, call_id)
            attached.append(call_id)

        self.pacer.started(now)
        try:
            profile = row_profile(self.profile, row)
            session = self.server.dial(row.uri, profile, profile.greeting, before_invite, slot)
        except Exception as e:  # a row's call must not end the campaign
            # No call id stored: nothing was dialled; with one, the INVITE was never queued.
            log.event("campaign-error", attached[0] if attached else "-", campaign=self.name,
                      line=row.line, error=repr(e), level=40)
            store.end_attempt(self.engine, attempt_id, "failed", f"error: {e!r}"[:500], now)
            return
        self.active[session.call_id] = _Active(row, attempt_id, number, session,
                                               self.monotonic())
        self.summary.calls += 1
        log.event("campaign-dial", session.call_id, campaign=self.name, line=row.line,
                  uri=row.uri, attempt=number,
                  **({} if waited_s is None else {"waited_s": round(waited_s, 2)}))

    def _cancel_ringing(self) -> None:
        now = self.monotonic()
        for a in self.active.values():
            if (not a.cancelled and not a.session.codec
                    and now - a.dialled_at > self.options.ring_timeout_s):
                a.cancelled = True
                a.session.shutdown(RING_TIMEOUT)

    def _reap(self) -> None:
        for call_id, a in list(self.active.items()):
            if not a.session.join(0):
                continue
            del self.active[call_id]
            now = self.clock()
            got = call_outcome(a.session.end_reason, bool(a.session.codec))
            retry = self.pacer.retry_at(got.outcome, a.number, now)
            store.end_attempt(self.engine, a.attempt_id, got.outcome, got.detail, now, retry)
            self.summary.outcomes[got.outcome] = self.summary.outcomes.get(got.outcome, 0) + 1
            self._look_at = None
            self._forget(a.row)
            log.event("campaign-outcome", call_id, campaign=self.name, line=a.row.line,
                      outcome=got.outcome, detail=got.detail, attempt=a.number,
                      retry_at=retry.isoformat(timespec="seconds") if retry else None)

    def _stopping(self) -> bool:
        """Hang up the calls in progress (once); True while some have not ended yet.

        A call whose end never comes (its BYE unanswered) is left after ``STOP_WAIT_S``: its
        row stays ``dialing``, and the next start settles it by the resume rule.
        """
        if self._stop_by is None:
            self._stop_by = self.monotonic() + STOP_WAIT_S
        for a in self.active.values():
            if not a.stop_sent:
                a.stop_sent = True
                a.session.shutdown()
        return bool(self.active) and self.monotonic() < self._stop_by
