"""Requests for one model that wait for the scheduler's slot together run as one batch.

With several callers on 2 cores the slot is busy most of the time, so their ASR passes queue
behind each other's work. :class:`Coalescer` puts the passes that wait at the same time into
one group with one scheduler job: when the slot is handed to it, the whole group runs as one
batch (CTranslate2 encodes and decodes four Whisper passes in one go). Nothing waits for
company: a request alone when the slot frees runs alone, and a batch forms only of requests
that were queued anyway (unlike the window of :class:`~models.asr.voxtral_batcher.MicroBatcher`).

A group's job has the most urgent of its members' priorities, evaluated whenever the slot is
handed out. A request joins only a group of its own priority level (and key, if one is given),
so a speculative pass does not slow a caller's first-audio pass by riding with it. A member
whose cancel is set before the batch runs is left out of it
(:class:`~models.priority.JobCancelled` in its own thread); the group's job is cancelled only
when every member is.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from models.priority import (
    Cancellable,
    JobCancelled,
    PriorityLike,
    cancel_on,
    current_cancel,
    current_priority,
    priority,
    rank_of,
)
from models.scheduler import Scheduler

T = TypeVar("T")
R = TypeVar("R")


@dataclass(eq=False)
class _Request(Generic[T]):
    item: T
    priority: PriorityLike
    cancel: Cancellable | None
    done: threading.Event = field(default_factory=threading.Event)
    result: Any = None
    error: BaseException | None = None

    @property
    def cancelled(self) -> bool:
        return self.cancel is not None and self.cancel.is_set()


class _Group:
    """Requests sharing one scheduler job; its priority and its cancel for the scheduler.

    As a cancel (:class:`~models.priority.Cancellable`) it is set while every member's is, and
    it wakes the scheduler's wait when the last of them is set (each member's cancel is
    watched while the group's job lasts, a member that joins later's too).
    """

    def __init__(self, members: list[_Request]):
        self.members: list[_Request] = []
        self._lock = threading.Lock()
        self._wakes: list[Callable[[], None]] = []  # the scheduler's, while its job waits
        self._unwatch: list[Callable[[], None]] = []
        for r in members:
            self.add(r)

    def add(self, req: _Request) -> None:
        self.members.append(req)
        if req.cancel is not None:
            self._unwatch.append(req.cancel.watch(self._member_cancelled))

    def rank(self) -> tuple[int, float]:
        return min(rank_of(r.priority) for r in list(self.members))

    def is_set(self) -> bool:  # the scheduler's cancel: every member gave up
        return all(r.cancelled for r in list(self.members))

    def watch(self, wake: Callable[[], None]) -> Callable[[], None]:
        with self._lock:
            self._wakes.append(wake)
        if self.is_set():
            wake()
        return lambda: self._drop(wake)

    def _drop(self, wake: Callable[[], None]) -> None:
        with self._lock:
            if wake in self._wakes:
                self._wakes.remove(wake)

    def _member_cancelled(self) -> None:
        # On the setter's thread. A member joining meanwhile may make the wake-up early: the
        # scheduler looks at is_set again as it wakes.
        if self.is_set():
            with self._lock:
                wakes = list(self._wakes)
            for wake in wakes:
                wake()

    def end(self) -> None:
        """The group's job is over: its members' cancels no longer wake anyone for it."""
        for unwatch in self._unwatch:
            unwatch()


class Coalescer(Generic[T, R]):
    """One scheduler job for the requests of a model that wait for the slot together.

    Args:
        run: the batch function: items in, one result each (same order) out. It runs inside
            the group's scheduler job.
        stage: the job's stage name (asr, tts...).
        max_batch: the largest group; a request finding its level's group full starts another.
        scheduler: whose slot the groups wait for (the model's, :mod:`models.scheduled`).
        narrow: a batch may run on one core beside another turn's job (:meth:`Scheduler.job`).
        key: requests join only a group of their own key (e.g. what can share one pass);
            with ``narrow``, groups of different keys are jobs the scheduler may run side by
            side, instead of one job running them one after another.
    """

    def __init__(self, run: Callable[[list[T]], list[R]], stage: str, max_batch: int, *,
                 scheduler: Scheduler, narrow: bool = False,
                 key: Callable[[T], object] = lambda item: None):
        self._run = run
        self._stage = stage
        self._narrow = narrow
        self._key = key
        self._max = max(1, max_batch)
        self._scheduler = scheduler
        self._lock = threading.Lock()
        self._open: dict[tuple[int, object], _Group] = {}
        """Per priority level and key, the group whose job still waits for the slot."""

    def submit(self, item: T) -> R:
        """Run ``item`` in the next batch of its priority level; its own result.

        Raises:
            JobCancelled: this context's cancel was set before the batch ran.
            Exception: whatever the batch function raised for the batch.
        """
        if self._scheduler.in_job():
            # This thread holds the slot: a group waiting for it would wait forever.
            return self._run([item])[0]
        req = _Request(item, current_priority(), current_cancel())
        where = (rank_of(req.priority)[0], self._key(item))
        with self._lock:
            group = self._open.get(where)
            if group is not None and len(group.members) < self._max:
                group.add(req)
                group = None  # its leader runs it
            else:
                group = self._open[where] = _Group([req])
        if group is not None:
            self._lead(group, where)
        req.done.wait()
        if req.error is not None:
            raise req.error
        return req.result

    def _lead(self, group: _Group, where: tuple[int, object] | None) -> None:
        """Take the slot for ``group`` and run it (on the thread of its first request)."""
        retry: list[_Request] = []
        # The group can give up only if its first member can; if not, the scheduler need not
        # watch a cancel that never fires.
        cancel = cancel_on(group) if group.members[0].cancel is not None else nullcontext()
        try:
            with priority(group.rank), cancel, self._scheduler.job(self._stage,
                                                                   narrow=self._narrow):
                batch = self._close(group, where)
                for r in group.members:
                    if r not in batch:
                        r.error = JobCancelled(self._stage)
                if batch:
                    results = self._run([r.item for r in batch])
                    if len(results) != len(batch):
                        raise RuntimeError(f"{self._stage}: {len(results)} results for "
                                           f"{len(batch)} requests")
                    for r, res in zip(batch, results, strict=True):
                        r.result = res
        except JobCancelled as e:
            # Every member had given up when the scheduler looked; one that joined since
            # then has not: it goes again, alone with any others like it.
            self._close(group, where)
            for r in group.members:
                if r.cancelled:
                    r.error = e
                else:
                    retry.append(r)
        except BaseException as e:  # noqa: BLE001 - handed to every member
            self._close(group, where)
            for r in group.members:
                r.error = r.error or e
        finally:
            group.end()
            for r in group.members:
                if r not in retry:
                    r.done.set()
        if retry:
            self._lead(_Group(retry), None)

    def _close(self, group: _Group, where: tuple[int, object] | None) -> list[_Request]:
        """No more members for ``group``; the ones still wanting a result."""
        with self._lock:
            if where is not None and self._open.get(where) is group:
                del self._open[where]
            return [r for r in group.members if not r.cancelled]
