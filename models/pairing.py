"""A job waiting for the scheduler's CPU, and which waiting jobs may share a slot's two cores.

The :class:`~models.scheduler.Scheduler` grants; this module says who may run beside whom. Two
urgent jobs of different turns may each take one core of a slot: a model gains far less than
twice from a second thread, so two callers' jobs side by side get more done than the same jobs
one after another (bench call, 4 at once, with pairing on and off). Pure logic over the
waiting jobs; the scheduler holds its lock while it asks. Imports only :mod:`models.priority`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from models.priority import Cancellable, Priority, PriorityLike, rank_of

PAIR_LEVEL = Priority.SPECULATIVE
"""Jobs at this level or more urgent may run side by side on a core each: what callers wait
for. Less urgent work (the rest of a reply, priming) keeps both cores and the old order."""


class Waiter:
    """One model job from the moment it asks for the CPU until it is granted or cancelled."""

    __slots__ = ("cancel", "cancelled", "cores", "deadline", "event", "level", "narrow",
                 "patient", "priority", "seq", "stage")

    def __init__(self, priority: PriorityLike, seq: int, stage: str,
                 cancel: Cancellable | None, narrow: bool = False, patient: bool = False):
        self.priority = priority
        self.seq = seq
        self.stage = stage
        self.cancel = cancel
        self.narrow = narrow
        self.patient = patient
        self.cores = 0
        """Cores it was handed (0: all of them, a whole slot)."""
        self.deadline = 0.0
        self.cancelled = False
        self.level = int(Priority.BACKGROUND)
        """Its priority level when it was handed the slot."""
        self.event = threading.Event()

    def rank(self) -> tuple[int, float, int]:
        """(level, deadline, arrival): the smallest goes first; read anew at every grant."""
        return (*rank_of(self.priority), self.seq)


def pairable(job: Waiter, rank: tuple[int, float, int], pairs: bool,
             running: tuple[int, float] | None = None) -> bool:
    """Whether ``job`` (ranked ``rank`` now) may run on one core beside another turn's job."""
    if not (pairs and job.narrow and rank[0] <= PAIR_LEVEL):
        return False
    if not job.patient:
        return True
    # Else first-audio prompts and steps waited beside another caller's speculative pass,
    # one core idle (bench call, 4 at once).
    return running is not None and rank[:2] < running


def best_partner(waiting: Iterable[Waiter], best: Waiter, rank: tuple[int, float, int],
                 taken: set[float], pairs: bool, besides: Waiter | None = None,
                 running: tuple[int, float] | None = None) -> tuple[Waiter, tuple] | None:
    """The most urgent waiting job to run on one core beside the turns of ``taken``.

    Those are deadlines of turns with a job running or being handed a core; ``running`` is
    the rank of a narrow job running alone on the other core. None if there is none, or if
    ``best`` (the most urgent job of all, ranked ``rank``) may not pair: it then waits for a
    whole slot.

    Both narrow and urgent, and of different turns: a turn's own jobs follow one another,
    and its first clause's speech must not run at half speed beside the rest of its reply.
    """
    if not pairable(best, rank, pairs, running):
        return None
    for r, w in sorted((w.rank(), w) for w in waiting if w is not besides):
        if pairable(w, r, pairs, running) and r[1] not in taken:
            return w, r
    return None
