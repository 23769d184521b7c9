"""The call's states, the record of one transition, and the one place a state changes.

``ringing`` (answered, no media yet) -> (``screening``: an outbound call's answering-machine
detection, :mod:`agent.call.amd`) -> ``greeting`` -> ``listening`` <-> ``thinking`` ->
``speaking`` -> ``listening`` ... -> ``ended``. The session and its turn-taking share one
:class:`CallState`; :meth:`CallState.set` is the only transition.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

State = Literal["ringing", "screening", "greeting", "listening", "thinking", "speaking", "ended"]


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
        change = StateChanged(old, new, self.now())
        self.state = new
        self.changes.append(change)
        self.on_change(change)
