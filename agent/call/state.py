"""The call's states, the record of one transition, and the one place a state changes.

``ringing`` (answered, no media yet) -> (``screening``: an outbound call's answering-machine
detection, :mod:`agent.call.amd`) -> ``greeting`` -> ``listening`` <-> ``thinking`` ->
``speaking`` -> ``listening`` ... -> ``ended``. The session and its turn-taking share one
:class:`CallState`; :meth:`CallState.set` is the only transition, and it refuses one that
:data:`TRANSITIONS` does not list. The names are what the call log's ``state`` events and the
reports read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from agent.turn.reply_state import check

State = Literal["ringing", "screening", "greeting", "listening", "thinking", "speaking", "ended"]

TRANSITIONS: dict[str, frozenset[str]] = {
    "ringing": frozenset({"screening", "greeting", "listening", "speaking", "ended"}),
    "screening": frozenset({"greeting", "listening", "speaking", "ended"}),
    "greeting": frozenset({"listening", "speaking", "ended"}),
    "listening": frozenset({"thinking", "speaking", "ended"}),
    "thinking": frozenset({"listening", "speaking", "ended"}),
    "speaking": frozenset({"listening", "ended"}),
    "ended": frozenset(),
}
"""Where the call may go from each state. Speaking (a phrase, a goodbye) may come from any
live state; a caller's turn is thought about only from listening; an ended call stays ended."""


@dataclass(frozen=True)
class StateChanged:
    """One transition of the session's state machine."""

    old: State
    new: State
    at: float
    """Stamp of the call's clock."""


@dataclass
class CallState:
    """The call's current state and its transitions so far.

    Args:
        now: the call's clock.
        on_change: told of every transition (records, logs, the barge-in gate's reset).
    """

    now: Callable[[], float]
    on_change: Callable[[StateChanged], None]
    state: State = "ringing"
    changes: list[StateChanged] = field(default_factory=list)

    def set(self, new: State) -> None:
        old = self.state
        if new == old:
            return
        check(TRANSITIONS, old, new)
        change = StateChanged(old, new, self.now())
        self.state = new
        self.changes.append(change)
        self.on_change(change)
