"""What the process owes callers right now: turns of every call not yet heard answered.

The scheduler's measured waits (:meth:`models.scheduler.Scheduler.recent_wait`) say how loaded
the CPU *was*. Four callers who stop talking in the same second meet a quiet history, all four
start on the profile's full models, and the last of them hears its answer after four turns'
worth of compute, with the rest of the replies competing (bench call, 4 at once). A turn
that starts behind others still
waiting for their first audio will wait for them: that is known the moment it starts, and is
what ``limits.under_load_ahead`` compares against.

A burst starts before any turn does: four callers asking at once are all still speaking when
the first of them stops, so the first turn met an empty backlog, ran on the full models, and
decoded apart from the three turns on the cheaper ones (bench call, 4 at once, with an
under-load profile: the first turn of each round had the slowest first clauses). Calls whose
caller is speaking now are counted too (:meth:`busy_others`).

It also knows which calls are up: a call that is alone may speak a reply's opening word on its
own (:mod:`agent.turn.textsplit`), since nothing else will want the CPU while the rest of the
reply decodes.

One backlog per process, in its :class:`~agent.turn.load.LoadPolicy`, shared by every call
(``serve``, ``simulate``, ``bench pipeline``).
Imports nothing from the project.
"""

from __future__ import annotations

import itertools
import threading
import weakref


class Backlog:
    """Turns being answered that the caller has not heard yet, by the call they belong to."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seq = itertools.count()
        self._open: dict[int, object] = {}  # ticket -> owner (a call)
        # Calls up now (a call's worker that is collected has ended too)
        self._calls: weakref.WeakSet = weakref.WeakSet()
        self._speaking: weakref.WeakSet = weakref.WeakSet()  # calls whose caller speaks now

    def join(self, owner: object) -> None:
        """A call is up: its callers will want answers, so others are not alone."""
        with self._lock:
            self._calls.add(owner)

    def part(self, owner: object) -> None:
        """The call ended; idempotent."""
        with self._lock:
            self._calls.discard(owner)
            self._speaking.discard(owner)

    def speaking(self, owner: object, now: bool) -> None:
        """``owner``'s caller is inside an utterance (``now``), or not; cheap, every frame."""
        with self._lock:
            if now:
                self._speaking.add(owner)
            else:
                self._speaking.discard(owner)

    def busy_others(self, owner: object) -> int:
        """Other calls that will want the CPU for a turn soon: theirs is open or being spoken."""
        with self._lock:
            busy = {id(o) for o in self._open.values() if o is not owner}
            busy |= {id(o) for o in self._speaking if o is not owner}
            return len(busy)

    def alone(self, owner: object) -> bool:
        """No call but ``owner`` is up: nothing else will want the CPU soon."""
        with self._lock:
            return not any(o is not owner for o in self._calls)

    def calls(self) -> int:
        """Calls up now."""
        with self._lock:
            return len(self._calls)

    def enter(self, owner: object) -> tuple[int, int]:
        """Count a turn of ``owner`` in; returns (its ticket, other calls' turns ahead of it)."""
        with self._lock:
            ahead = sum(1 for o in self._open.values() if o is not owner)
            ticket = next(self._seq)
            self._open[ticket] = owner
            return ticket, ahead

    def leave(self, ticket: int) -> None:
        """The turn is heard (first audio queued), cancelled or done; idempotent."""
        with self._lock:
            self._open.pop(ticket, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._open)

