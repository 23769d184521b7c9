"""The post-call summaries of a serving process: found in the call log, made in the background.

One :class:`Summarizer` per process that answers calls (``serve``'s worker, each ``cluster``
worker), made only when a profile asks for notes (:func:`~agent.summary.notes.wants_notes`).
Its :meth:`~Summarizer.tee` sits in front of the call log: a ``CallEnded`` of such a profile's
call goes on marked ``summarize``, so the writer stores the call as ``pending`` in the same
transaction and holds its ``call.ended`` event back (:mod:`db.outbox`). The state lives in the
call row, so a pending summary survives a restart: its thread reads the pending calls this
process ran (:func:`db.summaries.pending`), oldest first, at start, at each call's end and
every ``poll_s``, and makes one at a time:

* only when the load allows it (:meth:`~agent.turn.load.LoadPolicy.may_summarize`): while
  calls are up under load it waits, and catches up once they are not;
* on a worker of the scheduler at background priority, so every one of its model steps waits
  for callers' work;
* given up (cancelled, tried again later) when the calls up would need the LLM context it
  holds (:meth:`~Summarizer._crowded`);
* claimed first (:func:`db.summaries.claim`): a try that kills the process counts, and after
  :data:`MAX_TRIES` the call's summary is recorded failed rather than tried forever.

Its outcome goes through the call log as a ``SummaryRecord`` (spooled with the rest while the
database is down), which releases ``call.ended`` with the notes; a call whose notes are not
settled ``summary_wait_s`` after its end has its event released without them.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from datetime import UTC, datetime

from sqlalchemy.exc import SQLAlchemyError

from agent import log
from agent.summary.job import Outcome, make_notes
from agent.summary.notes import wants_notes
from agent.turn.load import LoadPolicy
from db.migrate import make_engine
from db.records import CallEnded, CallLog, CallStarted, Record, SummaryRecord
from db.summaries import PendingCall, claim, conversation, pending, unclaim
from dialplan.profile import Profile
from models.llm.base import LLM
from models.priority import Cancel, JobCancelled, Priority

POLL_S = 2.0
"""How often the call log is read for pending summaries (a call's end reads it at once)."""
BUSY_POLL_S = 0.5
"""How often a postponed summary asks the load again."""
SETTLE_S = 0.3
"""After a call's end, how long before the call log is read: the writer has written it."""
PENDING_READ = 200
"""Pending calls read per look, oldest first."""
MAX_TRIES = 3
RETRY_S = 30.0
"""Wait before trying again after the LLM raised (a server down), times the tries so far."""


class Summarizer:
    """Makes the pending post-call summaries of this process's calls, one at a time.

    Args:
        db_url: the call log (read here; written through ``call_log``).
        call_log: where the outcomes go (the process's writer).
        profiles: the config's profiles by name (a pending call names its own).
        llm_for: the loaded LLM of a profile (the one its calls use).
        load: the process's load policy (its backlog knows the calls up).
        worker: this process's cluster worker id (None outside a cluster).
        host: this process's host name: with ``worker``, which pending calls are its own.
        poll_s: how often the call log is read.
        on_event: the structured logger.
    """

    def __init__(self, db_url: str, call_log: CallLog, profiles: Mapping[str, Profile],
                 llm_for: Callable[[Profile], LLM], load: LoadPolicy, worker: str | None,
                 host: str | None, *, poll_s: float = POLL_S,
                 on_event: Callable[..., None] = log.event):
        self.db_url = db_url
        self.call_log = call_log
        self.profiles = dict(profiles)
        self.llm_for = llm_for
        self.load = load
        self.worker, self.host = worker, host
        self.poll_s = poll_s
        self._event = on_event
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._cancel: Cancel | None = None  # the running try's
        self._thread: threading.Thread | None = None
        self._settled: set[str] = set()  # outcome sent, maybe not yet written
        self._released: set[str] = set()  # call.ended let go without the notes
        self._retry_at: dict[str, float] = {}
        self._postponed: set[str] = set()  # logged once per call
        self.stats = {"done": 0, "failed": 0, "postponed": 0, "cancelled": 0}

    # -- the call log's side

    def tee(self, call_log: CallLog) -> CallLog:
        """``call_log`` with the ``CallEnded`` of profiles that want notes marked, and a nudge."""
        return _MarkingLog(call_log, self)

    def nudge(self) -> None:
        """A call ended: read the pending calls now."""
        self._wake.set()

    # -- lifecycle

    def start(self) -> Summarizer:
        self._thread = threading.Thread(target=self._run, name="summaries", daemon=True)
        self._thread.start()
        return self

    def close(self, timeout: float = 5.0) -> None:
        """Stop; a try in flight is cancelled (its call stays pending for the next start)."""
        self._stop.set()
        self._wake.set()
        if self._cancel is not None:
            self._cancel.set()
        if self._thread is not None:
            self._thread.join(timeout)

    # -- the thread

    def _run(self) -> None:
        engine = make_engine(self.db_url)
        try:
            while not self._stop.is_set():
                try:
                    wait = self._round(engine)
                except SQLAlchemyError as e:  # the writer spools meanwhile; try again later
                    self._event("summary-db-unavailable", error=_first_line(e),
                                level=logging.WARNING)
                    wait = self.poll_s
                except Exception as e:  # noqa: BLE001 - the thread must outlive one bad call
                    self._event("summary-error", error=repr(e)[:300], level=logging.ERROR)
                    wait = self.poll_s
                if self._wake.wait(wait) and not self._stop.is_set():
                    self._stop.wait(SETTLE_S)  # a call ended: its record is on its way
                self._wake.clear()
        finally:
            engine.dispose()

    def _round(self, engine) -> float:
        """Settle what is due; the seconds until the next look."""
        rows = pending(engine, self.worker, self.host, limit=PENDING_READ)
        if len(rows) < PENDING_READ:  # all of them: what is not pending any more is written
            ids = {c.id for c in rows}
            self._settled &= ids
            self._released &= ids
        calls = [c for c in rows if c.id not in self._settled]
        now = datetime.now(UTC)
        for call in calls:
            self._release_if_due(call, now)
        for call in calls:
            if self._stop.is_set():
                return 0.0
            if self._retry_at.get(call.id, 0.0) > time.monotonic():
                continue
            profile = self.profiles.get(call.profile)
            if profile is None or not wants_notes(profile):
                self._settle(call, Outcome("failed", None, f"profile {call.profile!r} asks for "
                                           "no summary in this config"))
                continue
            if call.attempts >= MAX_TRIES:
                self._settle(call, Outcome("failed", None, f"given up after {call.attempts} "
                                           "tries that did not end (the process stopped)"))
                continue
            llm = self.llm_for(profile)
            if not self.load.may_summarize(llm.reads_in_short_steps, self._crowded(llm)):
                if call.id not in self._postponed:
                    self._postponed.add(call.id)
                    self.stats["postponed"] += 1
                    self._event("summary-postponed", call.id, calls_up=self.load.backlog.calls())
                return BUSY_POLL_S
            if not claim(engine, call):
                continue  # another process took this try
            self._try(engine, call, profile, llm)
        return self.poll_s

    def _try(self, engine, call: PendingCall, profile: Profile, llm: LLM) -> None:
        turns = conversation(engine, call.id)
        cancel = self._cancel = Cancel()
        future: Future = self.load.scheduler.submit(
            make_notes, llm, profile, turns, cancel, True, lambda: self.load.backlog.alone(None),
            stage="summary", priority=Priority.BACKGROUND, cancel=cancel)
        self._event("summary-started", call.id, profile=profile.name, turns=len(turns),
                    attempt=call.attempts + 1)
        try:
            while True:
                try:
                    outcome = future.result(timeout=0.2)
                    break
                except FutureTimeout:
                    if self._crowded(llm) or self._stop.is_set():
                        cancel.set()  # the calls up need the context it holds
        except JobCancelled:
            unclaim(engine, call)  # not a try that failed: it is made again, uncounted
            self.stats["cancelled"] += 1
            self._event("summary-cancelled", call.id, calls_up=self.load.backlog.calls())
            return
        except Exception as e:  # noqa: BLE001 - the LLM failed (a server down): try later
            tries = call.attempts + 1
            if tries >= MAX_TRIES:
                self._settle(call, Outcome("failed", None, f"the LLM failed {tries} times, "
                                           f"last: {repr(e)[:240]}"))
                return
            self._retry_at[call.id] = time.monotonic() + RETRY_S * tries
            self._event("summary-retry", call.id, error=repr(e)[:240], attempt=tries,
                        level=logging.WARNING)
            return
        finally:
            self._cancel = None
        self._settle(call, outcome)

    def _crowded(self, llm: LLM) -> bool:
        """The calls up would need every LLM context: a summary must not hold one."""
        contexts = getattr(llm.options, "contexts", 0) or 0
        return bool(contexts) and self.load.backlog.calls() >= contexts

    def _settle(self, call: PendingCall, outcome: Outcome) -> None:
        notes = outcome.notes
        self.call_log.put(SummaryRecord(
            call.id, datetime.now(UTC), outcome.state, summary=notes and notes.summary,
            extracted=notes and notes.extracted_json(), detail=outcome.detail,
            seconds=round(outcome.seconds, 3) if outcome.seconds else None))
        self._settled.add(call.id)
        self._retry_at.pop(call.id, None)
        self._postponed.discard(call.id)
        self.stats[outcome.state] += 1
        fields = {"fields": notes.extracted_json()} if notes and notes.fields else {}
        self._event(f"summary-{outcome.state}", call.id, seconds=round(outcome.seconds, 2),
                    tokens=outcome.tokens, **({"why": outcome.detail} if outcome.detail else {}),
                    level=logging.WARNING if outcome.state == "failed" else logging.INFO,
                    **fields)

    def _release_if_due(self, call: PendingCall, now: datetime) -> None:
        """Let ``call.ended`` go without the notes once the profile's wait has run out."""
        profile = self.profiles.get(call.profile)
        wait = profile.summary_wait_s if profile is not None else 0.0
        if call.id in self._released or call.ended_at is None:
            return
        if (now - call.ended_at).total_seconds() < wait:
            return
        self._released.add(call.id)
        self.call_log.put(SummaryRecord(call.id, now, "pending"))
        self._event("summary-call-ended-released", call.id, waited_s=wait)


class _MarkingLog:
    """A call log that marks the ``CallEnded`` of calls whose profile wants notes."""

    def __init__(self, inner: CallLog, owner: Summarizer):
        self._inner = inner
        self._owner = owner
        self._profiles: dict[str, str] = {}  # call id -> profile name, while the call is up

    def put(self, record: Record) -> None:
        ended = False
        try:
            if isinstance(record, CallStarted):
                self._profiles[record.call_id] = record.profile
            elif isinstance(record, CallEnded):
                profile = self._owner.profiles.get(self._profiles.pop(record.call_id, ""))
                if profile is not None and wants_notes(profile):
                    record = dataclasses.replace(record, summarize=True)
                    ended = True
        except Exception:  # noqa: BLE001 - put() must never raise into a call
            pass
        self._inner.put(record)
        if ended:
            self._owner.nudge()


def _first_line(e: BaseException) -> str:
    return (str(e).splitlines() or [repr(e)])[0][:200]


def summarizer_for(profiles: Mapping[str, Profile], db_url: str, call_log: CallLog,
                   llm_for: Callable[[Profile], LLM], load: LoadPolicy, worker: str | None,
                   host: str | None) -> Summarizer | None:
    """The process's summarizer (not started), or None when no profile asks for notes."""
    if not any(wants_notes(p) for p in profiles.values()):
        return None
    return Summarizer(db_url, call_log, profiles, llm_for, load, worker, host)
