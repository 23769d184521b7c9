"""How many INVITEs each source may send: a token bucket per address (``sip.invite_rate``).

An INVITE costs a token; a source's bucket holds ``burst`` tokens and refills at ``rate`` per
second, so a phone that redials or a proxy that forwards a few calls at once passes, and a
scanner or a flood is refused (503 with ``Retry-After``) before it costs a pjsua2 call slot
for longer than the refusal, an RTP port, or a log line each. Refusals are logged at most once
a second per source, each line counting those it stood for.

Buckets are kept per source in least-recently-used order, at most :data:`MAX_SOURCES` of
them: a flood from many (spoofed) addresses forgets the quietest sources first, which then
start again with a full bucket. Pure Python, no I/O; one thread (the ``sip`` thread) uses it.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

MAX_SOURCES = 10_000
"""Sources tracked at once (each a few dozen bytes)."""
LOG_EVERY_S = 1.0
"""A refused source gets at most one log line per this many seconds."""


@dataclass
class _Bucket:
    tokens: float
    at: float
    """When ``tokens`` was last brought up to date."""
    refused: int = 0
    """Refusals since the last logged one."""
    logged_at: float = -math.inf


@dataclass(frozen=True)
class Limited:
    """An INVITE refused for its source's rate."""

    retry_after_s: int
    """Whole seconds until the source has a token again (at least 1): the ``Retry-After``."""
    log: bool
    """Whether this refusal gets a log line (the first in :data:`LOG_EVERY_S` for its source)."""
    refused: int
    """Refusals this line stands for: this one and those not logged since the last line."""


class InviteLimiter:
    """A token bucket per source address.

    Args:
        rate: tokens added per second (INVITEs per second sustained); 0 = no limit.
        burst: bucket size (INVITEs at once after a quiet spell); at least 1.
        clock: monotonic seconds (injectable for tests).
    """

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic):
        self.rate = rate
        self.burst = max(1, burst)
        self._clock = clock
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()

    def take(self, source: str) -> Limited | None:
        """Spend one of ``source``'s tokens; None if it had one, else why not."""
        if self.rate <= 0:
            return None
        now = self._clock()
        b = self._buckets.pop(source, None)
        if b is None:
            b = _Bucket(float(self.burst), now)
        else:
            b.tokens = min(float(self.burst), b.tokens + (now - b.at) * self.rate)
            b.at = now
        self._buckets[source] = b  # most recently used last
        while len(self._buckets) > MAX_SOURCES:
            self._buckets.popitem(last=False)
        if b.tokens >= 1.0:
            b.tokens -= 1.0
            return None
        b.refused += 1
        retry = max(1, math.ceil((1.0 - b.tokens) / self.rate))
        if now - b.logged_at < LOG_EVERY_S:
            return Limited(retry, False, b.refused)
        refused, b.refused, b.logged_at = b.refused, 0, now
        return Limited(retry, True, refused)

    def __len__(self) -> int:
        return len(self._buckets)
