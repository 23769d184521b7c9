"""Polling helper shared by tests that wait on background threads and processes."""

from __future__ import annotations

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
