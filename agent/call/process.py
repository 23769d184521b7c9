"""Process-wide settings for a process that runs call sessions.

``serve``'s worker, ``simulate`` and ``bench pipeline`` call :func:`tune` before their first
call, so the figures the tools measure are taken under the interpreter and allocator settings
calls get.
"""

from __future__ import annotations

import ctypes
import os
import sys
from dataclasses import dataclass

SWITCH_INTERVAL_S = 0.001
"""The GIL switch interval for call sessions (Python's default is 5 ms)."""


@dataclass(frozen=True)
class Tuning:
    switch_interval_ms: float
    malloc_arenas: int  # 0: not glibc, or left as it was


def tune() -> Tuning:
    """Set the switch interval and cap glibc's malloc arenas; what was set."""
    # A thread back from native model work (a decode step, an ASR pass) waits for the GIL up to
    # the switch interval while the calls' audio threads hold it: 1 ms instead of 5. bench call,
    # 4 at once, two pairs back to back: p50 7.27 / 7.26 s against 7.69 / 7.57 s.
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    return Tuning(switch_interval_ms=sys.getswitchinterval() * 1000,
                  malloc_arenas=_limit_malloc_arenas())


def _limit_malloc_arenas() -> int:
    """Cap glibc's malloc arenas (``MALLOC_ARENA_MAX``, 2 unless set); the cap, 0 if not glibc.

    Every call starts threads (turn workers, priming), and glibc gives threads that contend
    their own arena (up to 8 per core), each keeping what was freed into it. Measured, 150
    calls 4 at once, side by side: worker RSS +158 MB over the first 95 calls and still rising
    with the default, +47 MB and flat after ~25 with 2 arenas.
    """
    m_arena_max = -8  # <malloc.h>
    try:
        arenas = int(os.environ.get("MALLOC_ARENA_MAX", "2"))
        libc = ctypes.CDLL("libc.so.6")
        return arenas if arenas > 0 and libc.mallopt(m_arena_max, arenas) == 1 else 0
    except (OSError, AttributeError, ValueError):
        return 0
