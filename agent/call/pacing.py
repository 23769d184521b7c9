"""What a call's clock calls for outside turn-taking: the filler, the call's limits, the BYE's wait.

The session's loop asks after every message (it wakes for each 20 ms frame, so there is no
timer but the one after a BYE):

- the filler: a caller still waiting ``limits.filler_after_s`` after their turn ended, for an
  answer that has not started (a loaded agent, :mod:`agent.turn.load`), hears ``filler`` once;
- the call's time limit, ``limits.max_call_s`` from the answer, and what the caller's silence
  calls for while the agent listens (:class:`~agent.call.idle.Quiet`'s prompt or goodbye);
- the end of a call whose BYE got no answer within :data:`HANGUP_WAIT_S`.

:class:`Pacing` decides and records the filler; the session acts on the rest (says the phrase,
sends the BYE, changes state). Imports no pjsua2 and no database code.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal

import numpy as np

from agent import log
from agent.call.idle import Quiet
from agent.call.playout import Playout
from agent.call.recorder import CallRecorder
from agent.call.timers import TIMERS
from agent.call.turn import Turn
from dialplan.profile import Profile

HANGUP_WAIT_S = 5.0  # no disconnect after our BYE: end anyway, do not hold the slot

Due = Literal["ended", "timeout", "silence", "prompt"] | None
"""What the clock calls for: the end (a BYE nobody answered), a goodbye for the time limit or
the caller's silence, or the idle prompt."""


class Pacing:
    """One call's clock-driven checks: see the module docstring.

    Args:
        call_id: the call's id, for logs.
        profile: its ``limits`` and ``filler``.
        quiet: the call's silence.
        rec: the call's records.
        playout: where the filler is interjected.
        phrase: synthesised fixed phrases (cached per profile).
        wake: wakes the call's loop (any thread).
    """

    def __init__(self, call_id: str, profile: Profile, quiet: Quiet, rec: CallRecorder,
                 playout: Playout, phrase: Callable[[str], np.ndarray],
                 wake: Callable[[], None]):
        self._call_id = call_id
        self._limits = profile.limits
        self._filler = profile.filler
        self._quiet = quiet
        self._rec = rec
        self._playout = playout
        self._phrase = phrase
        self._wake = wake
        self.answered_at: float | None = None
        """When the call's media began (None: not answered)."""
        self.closing = ""
        """The end reason a goodbye is queued for ("" while the call goes on)."""
        self.hangup_sent_at: float | None = None
        """When the agent asked the line for its BYE."""

    def answered(self, at: float) -> None:
        """The call's media began: its time limit and the caller's silence count from ``at``."""
        self.answered_at = at
        self._quiet.restart(at)

    def hangup_requested(self, at: float) -> bool:
        """The agent wants the call to end: True the first time (send the BYE), then False."""
        if self.hangup_sent_at is not None:
            return False
        self.hangup_sent_at = at
        # No frame may come after our BYE: wake up to end the call if no answer does.
        TIMERS.at(time.monotonic() + HANGUP_WAIT_S + 0.05, self._wake)
        return True

    def filler(self, now: float, turn: Turn | None, thinking: bool) -> None:
        """Say "one moment" once to a caller still waiting for an answer (a loaded agent).

        Args:
            now: the call's clock.
            turn: the turn in progress, if any.
            thinking: the session waits for that turn's answer.
        """
        after = self._limits.filler_after_s
        if (after <= 0 or not thinking or turn is None or turn.audible
                or turn.filled or not turn.gate_open or self._playout.busy
                or turn.timeline.endpoint_at is None or now - turn.timeline.endpoint_at < after):
            return
        turn.filled = True
        if self._playout.interject(self._phrase(self._filler)):
            log.event("filler", self._call_id,
                      waited_ms=round((now - turn.timeline.endpoint_at) * 1000))
            self._rec.event("filler", f"turn {turn.index}")

    def due(self, now: float, ended: bool, listening: bool) -> Due:
        """What the call's clock calls for now.

        Args:
            now: the call's clock.
            ended: the call is over.
            listening: the agent listens to a silent caller and waits for nothing else (no
                transfer is out); only then does silence count against the caller.

        Returns:
            The action due, or None.
        """
        if self.answered_at is None or self.closing or ended:
            if self.hangup_sent_at is not None and now - self.hangup_sent_at > HANGUP_WAIT_S:
                return "ended"
            return None
        if now - self.answered_at >= self._limits.max_call_s:
            return "timeout"
        if not listening:
            return None
        verdict = self._quiet.check(now)
        return "silence" if verdict == "goodbye" else verdict
