"""One scheduler per process owns the CPU: every piece of model work is a job with a priority.

The process makes one :class:`Scheduler` from its config and hands it to every model it loads
(:class:`~models.registry.ModelCache`) and every call: there is no module-level instance.

On a machine of few cores, two heavy stages running at once (ASR of one call, TTS of another,
an LLM decode) each get part of it and all of them finish late, the ASR of an ended utterance
too (bench call, 4 at once). Here each model call
(an ASR pass, an LLM prefill or one decode step, a TTS chunk) first takes one of ``slots`` run
slots (1 by default: each model already uses every core it is given), and waiting jobs get the
slot in priority order, so the work a caller is waiting to hear goes first:

* ``END_OF_TURN``: reserved (the end-of-turn model, one thread for a short pass, runs beside the
  slots: :mod:`models.eot.base`);
* ``FIRST_AUDIO``: ASR of an ended utterance, the LLM up to the first clause, TTS of the
  first clause, and any reply whose queued audio is about to run out;
* ``SPECULATIVE``: work started before the endpoint (it may be thrown away);
* ``PLAYOUT``: the rest of a reply while enough of it is queued (it is spoken in real time);
* ``BACKGROUND``: priming a KV cache, warm-ups.

The priority of a job is read from the context the caller set (:mod:`models.priority`), and
may be a callable evaluated each time the slot is handed out, so a speculative ASR pass that
becomes the real one moves up.
A job may also name a cancel (``cancel_on``): if it is set while the job still waits, the
job leaves the queue at once (the cancel wakes it: nothing polls), never runs and raises
:class:`JobCancelled` (a speculative ASR pass queued behind other calls' work, whose caller
went on talking, costs nothing).
Within a level, a ``(level, deadline)`` priority orders jobs earliest deadline first: the turn
whose caller stopped speaking first finishes its first audio before the next turn's ASR starts
(bench call, 4 at once: FIFO within the level made a first clause wait behind three other
calls' ASR passes, one per token).
After a turn's urgent job the slot is held for that turn a moment (:data:`HANDOFF_S`): the
turn's next job (its LLM prompt after its ASR pass, its TTS after the first clause) is queued
a few ms after the last one ends, and a job of a lower level granted in that gap ran to its end
first (bench call, 4 at once). The
job's level is read again as it ends (a speculative pass whose caller has stopped is now the
real one), and a speculative turn keeps the slot from later speculative work too.
Two urgent jobs of different turns may share the cores, one each (a job that says
``narrow=True``; who may pair with whom is :mod:`models.pairing`'s). A job reads what it got
from :meth:`cores`. A job that would rather have both cores (``patient``: a prompt) still takes
one that a less urgent job left free rather than wait for that job's end.
Imports only :mod:`models.priority`, :mod:`models.pairing` and :mod:`models.workpool`: models
call it, the agent sets priorities.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass

from models.pairing import PAIR_LEVEL, Waiter, best_partner
from models.priority import (
    Cancellable,
    JobCancelled,
    Priority,
    PriorityLike,
    current_cancel,
    current_priority,
    rank_of,
    watching,
)
from models.workpool import WorkPool

HANDOFF_S = 0.03
"""How long after a turn's urgent job ends the slot waits for the turn's next one before a
less urgent job may take it (bench call, 4 at once: the turn's next job is queued well
within it)."""
RECHECK_S = 0.02
"""While one narrow job runs alone and jobs wait, how often their priorities are read again: a
job's rises without an event (a reply's audio runs low), and the free core is then its."""


@dataclass(frozen=True)
class SchedulerStats:
    """What the scheduler has seen since it started."""

    jobs: int
    running: int
    waiting: int
    """Jobs queued for a slot right now (the queue depth)."""
    waited_s: dict[str, float]
    """Total seconds jobs of each stage spent waiting for a slot."""
    max_waiting: int


@dataclass(frozen=True)
class JobTrace:
    """One job that ran, for an observer (:meth:`Scheduler.observe`)."""

    stage: str
    level: int
    """Its priority level when it was handed the slot."""
    waited_s: float
    ran_s: float
    thread: str
    """The thread that ran it (a call's turn, its prefill, the LLM engine)."""
    note: str = ""
    """What the job said of its work (:meth:`Scheduler.note`), e.g. an LLM step's tokens."""


class Scheduler:
    """Hands ``slots`` run slots to model jobs in priority order (FIFO within a priority).

    Model work reaches it in one of two ways. A call's loop never computes: it submits
    (:meth:`submit`) a function, which runs on one of the ``workers`` threads of its
    :class:`~models.workpool.WorkPool` and completes a future (the call turns the completion
    into a message of its inbox). The
    function's model calls, and those of an engine thread a backend owns (the batched LLM),
    each take a run slot with :meth:`job`.

    Args:
        slots: jobs that may compute at once (1: each model uses all cores it is given).
        pairs: a slot may run two ``narrow`` urgent jobs of different turns, one core each.
        workers: threads that run submitted work. Most of them wait for a slot or for an
            engine's next token at any moment: enough for every call's next piece of work.
    """

    def __init__(self, slots: int = 1, pairs: bool = True, workers: int = 8):
        self.slots = slots
        self.pairs = pairs
        self._narrow: list[Waiter] = []
        """Narrow jobs running now (two of them fill a slot)."""
        self._lock = threading.Lock()
        self._running = 0
        self._waiting: list[Waiter] = []
        self._seq = itertools.count()
        self._pool = WorkPool(workers, self._seq)
        self._jobs = 0
        self._max_waiting = 0
        self._waited: dict[str, float] = {}
        self._local = threading.local()  # re-entrant: a job inside a job runs at once
        self._recent: deque[tuple[float, int, float]] = deque(maxlen=2000)
        """(granted at, priority level, seconds waited) of recent jobs: the measured load."""
        self._urgent = 0  # jobs more urgent than background running now
        self._urgent_ended = 0.0
        self._held = (-HANDOFF_S, int(Priority.BACKGROUND), 0.0)
        """(when, level, deadline) of the last urgent job to end: its turn's next job follows."""
        self._regrant_at: float | None = None
        """When the timer thread grants again (a hand-off running out, a recheck)."""
        self._timer = threading.Condition(threading.Lock())
        self._timer_thread: threading.Thread | None = None
        self._observers: list[Callable[[JobTrace], None]] = []

    @property
    def workers(self) -> int:
        """Threads that run submitted work (its :class:`~models.workpool.WorkPool`'s)."""
        return self._pool.workers

    def submit(self, fn: Callable, *args, stage: str, priority: PriorityLike | None = None,
               cancel: Cancellable | None = None) -> Future:
        """Run ``fn(*args)`` on a worker thread, its model jobs at ``priority``; its future.

        The most urgent submitted work is started first when every worker is busy. If
        ``cancel`` is set before ``fn`` starts, or while one of its jobs waits for a slot,
        the future fails with :class:`JobCancelled` and no model work is done.
        """
        prio = priority if priority is not None else current_priority()
        return self._pool.submit(fn, args, stage, prio, cancel)

    def observe(self, observer: Callable[[JobTrace], None]) -> None:
        """Call ``observer`` after every job that ran (from the job's thread, slot released).

        Observing twice with the same function calls it once.
        """
        if observer not in self._observers:
            self._observers.append(observer)

    def unobserve(self, observer: Callable[[JobTrace], None]) -> None:
        """Stop calling ``observer`` (a test's, on the process-wide scheduler)."""
        if observer in self._observers:
            self._observers.remove(observer)

    @contextmanager
    def job(self, stage: str, priority: PriorityLike | None = None,
            narrow: bool = False, patient: bool = False) -> Iterator[None]:
        """Run the enclosed model work when a slot is free and no better job waits.

        Args:
            stage: for the statistics (asr, llm, tts, eot).
            priority: overrides the context's priority (see :func:`priority`).
            narrow: the work can run on one core (it asks :meth:`cores`), beside another
                turn's urgent job on the other.
            patient: with ``narrow``, it would rather wait for both cores (a prompt gains the
                most from its second core): it takes one only beside a less urgent job running
                alone, whose end it would otherwise wait for with that core idle.

        Raises:
            JobCancelled: the context's cancel (:func:`cancel_on`) was set before the job
                got a slot.
        """
        if getattr(self._local, "depth", 0):
            self._local.depth += 1
            try:
                yield
            finally:
                self._local.depth -= 1
            return
        prio = priority if priority is not None else current_priority()
        t0 = time.monotonic()
        with self._lock:
            self._jobs += 1
            waiter = Waiter(prio, next(self._seq), stage, current_cancel(), narrow, patient)
            self._waiting.append(waiter)
            self._max_waiting = max(self._max_waiting, len(self._waiting))
            self._grant_locked()
        self._wait(waiter)
        if waiter.cancelled:
            raise JobCancelled(stage)
        granted = time.monotonic()
        waited = granted - t0
        self._recent.append((granted, waiter.level, waited))
        urgent = waiter.level < Priority.BACKGROUND
        self._local.depth, self._local.note, self._local.cores = 1, "", waiter.cores
        try:
            yield
        finally:
            self._local.depth = 0
            with self._lock:
                self._waited[stage] = self._waited.get(stage, 0.0) + waited
                if waiter.cores:
                    self._narrow.remove(waiter)
                else:
                    self._running -= 1
                if urgent:
                    self._urgent -= 1
                    self._urgent_ended = time.monotonic()
                level, deadline = rank_of(waiter.priority)  # what the turn is now
                level = min(level, waiter.level)
                if level <= PAIR_LEVEL:
                    self._held = (time.monotonic(), level, deadline)
                self._grant_locked()
            if self._observers:
                note = self._local.note
                if waiter.cores:
                    note = f"{note} cores={waiter.cores}".strip()
                trace = JobTrace(stage, waiter.level, waited, time.monotonic() - granted,
                                 threading.current_thread().name, note)
                for observer in self._observers:
                    observer(trace)

    def _hand_off_later(self, delay: float) -> None:
        """Grant again after ``delay`` (a hand-off running out, a recheck; one at a time).

        On one timer thread for the scheduler's life, not a thread per wait.
        """
        with self._timer:
            if self._regrant_at is not None:
                return
            self._regrant_at = time.monotonic() + delay + 0.001
            if self._timer_thread is None:
                self._timer_thread = threading.Thread(target=self._regrant, daemon=True,
                                                      name="scheduler-timer")
                self._timer_thread.start()
            self._timer.notify()

    def _regrant(self) -> None:
        while True:
            with self._timer:
                while self._regrant_at is None or self._regrant_at > time.monotonic():
                    self._timer.wait(None if self._regrant_at is None
                                     else self._regrant_at - time.monotonic())
            with self._lock:
                with self._timer:
                    self._regrant_at = None
                self._grant_locked()

    def cores(self) -> int:
        """Cores the running job was handed: 1 when it runs beside another, else 0 (all)."""
        return getattr(self._local, "cores", 0) if self.in_job() else 0

    def in_job(self) -> bool:
        """This thread holds a slot (a job started here now runs at once)."""
        return bool(getattr(self._local, "depth", 0))

    def note(self, text: str) -> None:
        """Describe the running job's work for observers (ignored when none observe)."""
        if self._observers:
            self._local.note = text

    def _wait(self, waiter: Waiter) -> None:
        """Until ``waiter`` is granted a slot, or cancelled (then it leaves the queue).

        Its event is set by the grant, and by its cancel the moment that is set (a wake-up it
        watches with): nothing polls.
        """
        cancel = waiter.cancel
        if cancel is None:
            waiter.event.wait()
            return
        with watching(cancel, waiter.event.set):
            while True:
                waiter.event.wait()
                with self._lock:
                    if waiter not in self._waiting:  # granted (or cancelled as it was handed)
                        return
                    waiter.event.clear()  # before the look: a cancel set after it wakes again
                    if cancel.is_set():
                        self._waiting.remove(waiter)
                        waiter.cancelled = True
                        return
                    # else woken early by a group a member of which is still wanted (coalesce)

    def _grant_locked(self) -> None:
        while self._waiting:
            # seq is unique: the tuples never compare the waiters themselves
            rank, best = min((w.rank(), w) for w in self._waiting)
            held = self._held_for(rank)
            if held > 0:
                self._hand_off_later(held)
                return
            if len(self._narrow) % 2:  # a slot runs one narrow job: its other core is free
                # The best job's turn may have a job running there already: another turn's
                # takes the core, and the best one the next core that frees.
                running = None  # its rank now, or when granted if that was more urgent
                if len(self._narrow) == 1:
                    w = self._narrow[0]
                    running = min(rank_of(w.priority), (w.level, w.deadline))
                partner = best_partner(self._waiting, best, rank,
                                       {w.deadline for w in self._narrow}, self.pairs,
                                       running=running)
                if partner is None:
                    if any(w.narrow for w in self._waiting):  # no other job can take the core
                        self._hand_off_later(RECHECK_S)
                    return
                self._hand(*partner, cores=1)
                continue
            if self._running + len(self._narrow) // 2 >= self.slots:
                return
            partner = best_partner(self._waiting, best, rank, {rank[1]}, self.pairs,
                                   besides=best)
            if self._hand(best, rank, cores=1 if partner else 0) and partner:
                self._hand(*partner, cores=1)  # at once: a wide job ranked between waits

    def _held_for(self, rank: tuple[int, float, int]) -> float:
        """Seconds a job of ``rank`` still waits for the hand-off (0: it may go now).

        A less urgent level waits. So does a speculative job of a later turn after a
        speculative one: the first caller to stop keeps the slot between its ASR pass and its
        prompt (bench call, 4 at once: another's pass was granted in that gap). Not so between
        first-audio jobs: a caller waiting for an answer does not wait for another's (tried, bench
        call, 4 at once: the earliest callers' replies kept the slot and the slowest came later).
        """
        at, level, deadline = self._held
        left = at + HANDOFF_S - time.monotonic()
        if left <= 0 or rank[0] < level:
            return 0.0
        if rank[0] > level or (level == Priority.SPECULATIVE and rank[1] > deadline):
            return left
        return 0.0

    def _hand(self, job: Waiter, rank: tuple[int, float, int], cores: int) -> bool:
        """Give ``job`` a whole slot (``cores`` 0) or one core; False if it was cancelled."""
        self._waiting.remove(job)
        if job.cancel is not None and job.cancel.is_set():
            job.cancelled = True
            job.event.set()
            return False
        job.level, job.deadline, job.cores = rank[0], rank[1], cores
        if cores:
            self._narrow.append(job)
        else:
            self._running += 1
        if job.level < Priority.BACKGROUND:
            self._urgent += 1  # counted as it is handed the slot: quiet_for sees no gap
        job.event.set()
        return True

    def quiet_for(self, seconds: float) -> bool:
        """No work but background has run, or waited, for the last ``seconds``.

        For optional background work that would otherwise start in the gap between two jobs
        of a caller's turn and hold the CPU from the next one (a job is not preempted).
        """
        with self._lock:
            if self._urgent or any(w.rank()[0] < Priority.BACKGROUND for w in self._waiting):
                return False
            return time.monotonic() - self._urgent_ended >= seconds

    def recent_wait(self, level: int = Priority.FIRST_AUDIO, window_s: float = 60.0,
                    q: float = 90.0) -> float:
        """How long jobs at ``level`` or more urgent waited for a slot (``q`` percentile).

        Over the last ``window_s``; 0 when there were none (an idle agent is not overloaded).
        """
        since = time.monotonic() - window_s
        waits = sorted(w for at, lv, w in list(self._recent) if at >= since and lv <= level)
        if not waits:
            return 0.0
        return waits[min(len(waits) - 1, int(round(q / 100 * (len(waits) - 1))))]

    def stats(self) -> SchedulerStats:
        with self._lock:
            return SchedulerStats(jobs=self._jobs, running=self._running + len(self._narrow),
                                  waiting=len(self._waiting), waited_s=dict(self._waited),
                                  max_waiting=self._max_waiting)

