"""The one clock of a call: monotonic seconds that a simulation may fast-forward.

Every stamp a call takes (frame arrival, turn timeline, playout) comes from one :class:`Clock`,
so stage durations stay differences of one clock. On a real line the clock is
``time.monotonic()``. ``simulate --fast`` skips it ahead while nothing is computing (silence
and caller speech that no turn is working on yet cost no wall time), never while model work is
in flight, so every stage a turn records is still measured in real seconds.
"""

from __future__ import annotations

import time


class Clock:
    """Monotonic time plus the seconds skipped so far (0 on a real line)."""

    def __init__(self) -> None:
        self._skipped = 0.0

    def now(self) -> float:
        """Seconds, comparable with every other stamp of this clock."""
        return time.monotonic() + self._skipped

    def skip(self, seconds: float) -> None:
        """Jump ahead without waiting (a simulation with nothing in flight)."""
        if seconds > 0:
            self._skipped += seconds

    @property
    def skipped_s(self) -> float:
        """Total seconds jumped over."""
        return self._skipped


REAL_TIME = Clock()
"""The clock of real calls: never skipped."""
