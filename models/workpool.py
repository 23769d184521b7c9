"""The threads that run a process's submitted model work, most urgent first.

A call's loop never computes: it submits a function (:meth:`WorkPool.submit`), which runs on
one of a fixed set of worker threads and completes a future. The function's model calls then
each wait for a run slot of the :class:`~models.scheduler.Scheduler`, which owns this pool; the
pool only decides which submitted function a free worker starts next (the most urgent, FIFO
among equals) and keeps a cancelled one from starting at all.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future

from models.priority import (
    Cancellable,
    JobCancelled,
    PriorityLike,
    cancel_on,
    priority,
    rank_of,
)


class _Task:
    __slots__ = ("args", "cancel", "fn", "future", "priority", "seq", "stage")

    def __init__(self, fn: Callable, args: tuple, stage: str, priority: PriorityLike,
                 cancel: Cancellable | None, seq: int):
        self.fn, self.args, self.stage, self.priority = fn, args, stage, priority
        self.cancel, self.seq = cancel, seq
        self.future: Future = Future()

    def rank(self) -> tuple[int, float, int]:
        return (*rank_of(self.priority), self.seq)


class WorkPool:
    """``workers`` threads, started with the first submission, that run submitted functions.

    ``seq`` numbers the tasks in submission order (shared with the scheduler's jobs, so one
    counter orders both).
    """

    def __init__(self, workers: int, seq: Iterator[int]):
        self.workers = workers
        self._seq = seq
        self._tasks: list[_Task] = []
        self._cond = threading.Condition()
        self._threads: list[threading.Thread] = []

    def submit(self, fn: Callable, args: tuple, stage: str, prio: PriorityLike,
               cancel: Cancellable | None) -> Future:
        """Run ``fn(*args)`` at ``prio`` (and ``cancel``) on a worker; its future."""
        task = _Task(fn, args, stage, prio, cancel, next(self._seq))
        with self._cond:
            if not self._threads:
                self._start()
            self._tasks.append(task)
            self._cond.notify()
        return task.future

    def _start(self) -> None:
        for i in range(self.workers):
            t = threading.Thread(target=self._work, name=f"model-{i}", daemon=True)
            self._threads.append(t)
            t.start()

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._tasks:
                    self._cond.wait()
                _, task = min((t.rank(), t) for t in self._tasks)
                self._tasks.remove(task)
            if not task.future.set_running_or_notify_cancel():
                continue
            try:
                if task.cancel is not None and task.cancel.is_set():
                    raise JobCancelled(task.stage)
                if task.cancel is not None:
                    with priority(task.priority), cancel_on(task.cancel):
                        result = task.fn(*task.args)
                else:
                    with priority(task.priority):
                        result = task.fn(*task.args)
            except BaseException as e:  # noqa: BLE001 - handed to whoever waits on the future
                task.future.set_exception(e)
            else:
                task.future.set_result(result)
            del task  # drop the result's references before waiting again
