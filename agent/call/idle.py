"""What a caller's silence calls for: the idle prompt, the silence goodbye, a wait they asked for.

Silence is counted from the caller's last words, or from the end of what the agent last said
(a reply, the greeting, an action's phrase), but not from the idle prompt itself: at
``limits.idle_prompt_s`` the agent says ``still_there`` once, and the goodbye still comes at
``limits.max_silence_s`` from the same start. A caller who asked the agent to wait (the turn's
``result.hold``: "hold on", :func:`agent.turn.intent.asks_to_wait`) has heard ``hold_ack`` and
gets up to ``limits.hold_s`` with neither; when that runs out the agent checks in at once
(``still_there``) and the goodbye follows ``max_silence_s - idle_prompt_s`` later, as after any
prompt. A call on hold (SIP re-INVITE) is never prompted nor hung up on for silence; its silence
counts from the resume. The caller speaking ends all of it.

:class:`Quiet` decides, on the call's clock, when the session's loop asks, and records what it
decided (events ``idle-prompt`` and ``hold``, and a log line each); the session says the
phrases. No timer: the loop wakes for every 20 ms frame, silent or not.
"""

from __future__ import annotations

from typing import Literal

from agent import log
from agent.call.recorder import CallRecorder
from dialplan.options import LimitOptions

Verdict = Literal["prompt", "goodbye"] | None


class Quiet:
    """One call's silence: see the module docstring.

    Args:
        limits: the profile's ``idle_prompt_s``, ``max_silence_s`` and ``hold_s``.
        now: the call's clock at its start (silence counts from there until it is answered).
        rec: the call's records.
    """

    def __init__(self, limits: LimitOptions, now: float, rec: CallRecorder):
        self.limits = limits
        self._rec = rec
        self.since = now
        """When the caller's silence began."""
        self.prompted = False
        """``still_there`` was said in this silence."""
        self.hold_until: float | None = None
        """The end of the wait the caller asked for, while it runs."""
        self.held = False
        """The caller put the call on hold (SIP)."""
        self._prompting = False  # the prompt is what the agent is saying now

    @property
    def prompt_at_s(self) -> float | None:
        """Silence before the prompt, or None where the goodbye comes first (or never)."""
        s = self.limits.idle_prompt_s
        return s if 0 < s < self.limits.max_silence_s else None

    def caller_spoke(self, at: float, over_agent: bool) -> None:
        """The caller began to speak (``over_agent``: while the agent was talking).

        Speech over the agent (a "thanks" under the acknowledgement) does not end their wait.
        """
        self.restart(at)
        if not over_agent:
            self.hold_until = None

    def agent_done(self, at: float) -> None:
        """The agent finished speaking: silence counts from here, unless it said the prompt."""
        if self._prompting:
            self._prompting = False
        else:
            self.restart(at)

    def sip_hold(self, held: bool, at: float) -> None:
        """The caller put the call on hold, or resumed it (silence counts from the resume)."""
        self.held = held
        self.restart(at)

    def hold(self, at: float, words: str) -> None:
        """The caller asked the agent to wait (``words``) and heard ``hold_ack``."""
        self.hold_until = at + self.limits.hold_s
        log.event("hold", self._rec.call_id, asked=words, hold_s=self.limits.hold_s)
        self._rec.event("hold", f"asked: {words!r}; quiet up to {self.limits.hold_s:g} s")

    def check(self, now: float) -> Verdict:
        """What the caller's silence calls for now (asked while the agent listens, idle)."""
        if self.held:
            return None
        if self.hold_until is not None:
            if now < self.hold_until:
                return None
            # The wait is over: check in now, and say goodbye as long after as after any prompt.
            self.since = self.hold_until - (self.prompt_at_s or 0.0)
            self.hold_until, self.prompted = None, False
        silent = now - self.since
        if silent >= self.limits.max_silence_s:
            return "goodbye"
        prompt = self.prompt_at_s
        if prompt is not None and not self.prompted and silent >= prompt:
            self.prompted = self._prompting = True
            log.event("idle-prompt", self._rec.call_id, silent_s=round(silent, 1))
            self._rec.event("idle-prompt", f"after {silent:.1f} s of silence")
            return "prompt"
        return None

    def restart(self, at: float) -> None:
        """Silence counts from ``at`` (the call was answered, the caller or the agent spoke)."""
        self.since = at
        self.prompted = self._prompting = False
