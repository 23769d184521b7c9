"""Helpers shared by tests that wait on background threads and processes."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


def wait_until(cond: Callable[[], object], timeout: float = 10.0, every: float = 0.02) -> bool:
    """Poll ``cond`` until it is truthy (True) or ``timeout`` seconds pass (False)."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(every)
    return True


def hold_the_slot(scheduler, hold_s: float = 10.0) -> threading.Event:
    """Another call's job holds ``scheduler``'s slot until the returned event is set."""
    release, held = threading.Event(), threading.Event()

    def other_call_work():
        with scheduler.job("llm"):
            held.set()
            release.wait(hold_s)

    threading.Thread(target=other_call_work, daemon=True).start()
    assert held.wait(5)
    return release
