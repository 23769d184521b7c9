"""One call's model work in the process scheduler, and its completions back in the call's inbox.

The call's loop never computes and never waits for a model: it submits a function with the
continuation that takes its result; the scheduler runs the function on one of its workers, and
the completed future comes back as a :class:`~agent.call.messages.JobDone` message that the
loop handles in order with the call's frames and SIP events. So every piece of call and turn
state is touched by the loop's thread alone. An engine that pushes what it makes (the LLM's
pieces, as it decodes them) is a :meth:`CallJobs.feed`: each piece comes back as a message too,
with no job and no thread waiting for it.
"""

from __future__ import annotations

import concurrent.futures
import queue
import time
from collections.abc import Callable
from concurrent.futures import Future

from agent.call.messages import JobDone, Message, TurnDone
from models.priority import PriorityLike
from models.scheduler import Scheduler


class CallJobs:
    """Submits model work for one call; tracks what is still in flight.

    Args:
        scheduler: the process's scheduler.
        post: puts a message in the call's inbox (any thread).
    """

    def __init__(self, scheduler: Scheduler, post: Callable[[Message], None]):
        self.scheduler = scheduler
        self._post = post
        self._in_flight: set[Future] = set()

    def submit(self, fn: Callable, *args, stage: str, priority: PriorityLike,
               then: Callable[[Future], None], cancel=None) -> Future:
        """Run ``fn(*args)`` in the scheduler; ``then(future)`` runs on the call's loop after."""
        future = self.scheduler.submit(fn, *args, stage=stage, priority=priority, cancel=cancel)
        self._in_flight.add(future)
        future.add_done_callback(lambda f: self._post(JobDone(f, then)))
        return future

    def feed(self, start: Callable[[Callable[[object], None], Callable], None],
             then: Callable[[Future], None]) -> None:
        """Items another thread pushes, each to ``then(future)`` on the loop, in order.

        ``start(put, end)`` begins them: ``put(item)`` posts an item (the future's result),
        ``end(error)`` the last, once (its future's result None, or ``error`` raised). Until
        the end the feed is in flight, as a job is.
        """
        last: Future = Future()
        self._in_flight.add(last)
        last.add_done_callback(lambda f: self._post(JobDone(f, then)))

        def put(item: object) -> None:
            f: Future = Future()
            f.set_result(item)
            self._post(JobDone(f, then))

        def end(error: BaseException | None) -> None:
            if error is None:
                last.set_result(None)
            else:
                last.set_exception(error)
        start(put, end)

    def done(self, msg: JobDone) -> None:
        """A job's completion reached the loop: run its continuation."""
        self._in_flight.discard(msg.future)
        msg.then(msg.future)

    @property
    def busy(self) -> bool:
        return bool(self._in_flight)

    def wait(self, timeout: float) -> bool:
        """Block until every job in flight has completed (the call is ending); True if so."""
        _, pending = concurrent.futures.wait(list(self._in_flight), timeout)
        return not pending

    def drain(self, inbox: queue.SimpleQueue[Message], turn_done: Callable[[TurnDone], None],
              timeout: float) -> None:
        """The call has ended: run its jobs' completions until none is in flight.

        Takes them (and the turns they finish) from ``inbox`` for ``timeout`` seconds at most;
        other messages are dropped.
        """
        deadline = time.monotonic() + timeout
        while True:
            while True:
                try:
                    msg = inbox.get_nowait()
                except queue.Empty:
                    break
                if isinstance(msg, JobDone):
                    self.done(msg)
                elif isinstance(msg, TurnDone):
                    turn_done(msg)
            left = deadline - time.monotonic()
            if not self.busy or left <= 0:
                return
            self.wait(left)
