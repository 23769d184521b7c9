"""Deadlines that wake a call's loop when no frame will (one thread for the whole process).

A call's loop wakes for every inbound frame (every 20 ms while media flows) and checks its
limits then. Before media and after the agent's BYE no frame may come: a deadline posted
here puts a message in the inbox at its time instead.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable


class Timers:
    """Calls ``fn()`` at a monotonic deadline, on the timer thread (``fn`` must not block)."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def at(self, deadline: float, fn: Callable[[], None]) -> None:
        with self._cond:
            heapq.heappush(self._heap, (deadline, next(self._seq), fn))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="timers", daemon=True)
                self._thread.start()
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._heap or self._heap[0][0] > time.monotonic():
                    self._cond.wait(self._heap[0][0] - time.monotonic() if self._heap else None)
                _, _, fn = heapq.heappop(self._heap)
            try:
                fn()
            except Exception:  # noqa: BLE001 - a closed call's inbox; nothing to tell
                pass


TIMERS = Timers()
"""The process's timer thread (started at the first deadline)."""
