"""Cross-call micro-batching: requests from several threads within a short window share one call.

Owns :class:`MicroBatcher`, a collector thread and one condition variable. Each call's session
thread calls :meth:`MicroBatcher.submit` and blocks; the collector takes the first waiting request,
waits up to ``window_s`` for more (up to ``max_batch``), runs the batch function once and hands
each caller its own result (or the batch's exception). Pure stdlib: no model code here.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


@dataclass
class _Request(Generic[T]):
    item: T
    arrived_at: float
    done: threading.Event = field(default_factory=threading.Event)
    result: Any = None
    error: BaseException | None = None


class MicroBatcher(Generic[T, R]):
    """Group concurrent single-item requests into batches for one function.

    Args:
        fn: Batch function: a list of items in, a list of results (same order, same length) out.
        window_s: How long the first request of a batch waits for company.
        max_batch: Largest batch handed to ``fn``; a full batch runs at once.
        name: Thread name, for debugging.
    """

    def __init__(
        self, fn: Callable[[list[T]], list[R]], window_s: float, max_batch: int,
        name: str = "micro-batcher",
    ) -> None:
        self._fn = fn
        self._window_s = max(0.0, window_s)
        self._max_batch = max(1, max_batch)
        self._queue: deque[_Request[T]] = deque()
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, item: T) -> R:
        """Queue ``item``, block until its batch ran, and return its own result.

        Raises:
            RuntimeError: The batcher is closed.
            Exception: Whatever ``fn`` raised for the batch this item was in.
        """
        req: _Request[T] = _Request(item=item, arrived_at=time.monotonic())
        with self._cond:
            if self._closed:
                raise RuntimeError("MicroBatcher is closed")
            self._queue.append(req)
            self._cond.notify_all()
        req.done.wait()
        if req.error is not None:
            raise req.error
        return req.result

    def close(self, timeout: float | None = 10.0) -> None:
        """Stop accepting requests, finish the queued ones, and join the collector thread."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def _take_batch(self) -> list[_Request[T]] | None:
        with self._cond:
            while not self._queue and not self._closed:
                self._cond.wait()
            if not self._queue:
                return None  # closed and drained
            # The window starts when the oldest request arrived, so a request never waits
            # longer than window_s for others, however long the previous batch took.
            deadline = self._queue[0].arrived_at + self._window_s
            while len(self._queue) < self._max_batch and not self._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            n = min(self._max_batch, len(self._queue))
            return [self._queue.popleft() for _ in range(n)]

    def _run(self) -> None:
        while True:
            batch = self._take_batch()
            if batch is None:
                return
            try:
                results = self._fn([r.item for r in batch])
                if len(results) != len(batch):
                    raise RuntimeError(f"batch fn returned {len(results)} for {len(batch)}")
                for req, res in zip(batch, results, strict=True):
                    req.result = res
            except BaseException as exc:  # noqa: BLE001 - handed to every waiting caller
                for req in batch:
                    req.error = exc
            finally:
                for req in batch:
                    req.done.set()
