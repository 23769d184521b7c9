"""The call's states and the record of one transition.

``ringing`` (answered, no media yet) -> ``greeting`` -> ``listening`` <-> ``thinking`` ->
``speaking`` -> ``listening`` ... -> ``ended``. Only the session's ``_set_state`` changes a
state; turn-taking asks it to.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

State = Literal["ringing", "greeting", "listening", "thinking", "speaking", "ended"]


@dataclass(frozen=True)
class StateChanged:
    """One transition of the session's state machine."""

    old: State
    new: State
    at: float
    """Stamp of the call's clock."""
