"""The seam between an attended transfer and the SIP side: its second call, the consult leg.

:class:`ConsultLine` is what a call's attended transfer (:mod:`agent.call.consult`) may do on
the SIP side, as plain callables the server binds to its user agent and to the caller's call.
:class:`LegInputs` stands for the consult leg among the server's calls: the server routes the
leg's SIP events to it as it routes a call's to its session, it forwards them to the caller's
session (whose loop runs the transfer), and it holds one of the process's call slots, so the
leg counts against ``sip.max_calls`` beside inbound and campaign calls.

Imports no pjsua2 and no database code.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from agent.sip.audiolink import AudioLink

OWNER_GONE_S = 10.0
"""A leg whose caller's call has ended frees its slot after this long even if its SIP side never
reported it gone (a BYE nobody answered)."""


@dataclass(frozen=True)
class ConsultLine:
    """What an attended transfer may do on the SIP side (each returns at once)."""

    dial: Callable[[str, AudioLink, LegInputs], int | None]
    """``dial(uri, link, inputs)``: call the target, its SIP events to ``inputs``; the leg's
    key, or None when no call slot is free (``sip.max_calls``, the 4 calls of a process)."""
    hangup: Callable[[int], None]
    """End the leg (a CANCEL while it rings, else a BYE)."""
    replaces: Callable[[int], None]
    """REFER the caller's call to the leg's party, with Replaces (its progress comes to the
    caller's session as a blind transfer's does)."""
    bridge: Callable[[int], None]
    """Join the caller's call's audio with the leg's (a ``bridged`` or ``bridge-failed`` leg
    event follows)."""


class LegInputs:
    """The consult leg as one of the server's calls: its SIP events go to the caller's session.

    Args:
        call_id: the leg's own call id (its row in the call log).
        post: the caller's session's :meth:`~agent.call.inputs.CallInputs.leg`.
    """

    def __init__(self, call_id: str, post: Callable[..., None]):
        self.call_id = call_id
        self._post = post
        self._gone = threading.Event()
        self._owner_gone_at: float | None = None
        self.end_reason = ""

    def media_active(self, codec: str) -> None:
        self._post(self.call_id, "media", codec)

    def dtmf(self, digit: str) -> None:
        self._post(self.call_id, "dtmf", digit)

    def disconnected(self, by_local: bool, code: int = 200) -> None:
        self.end_reason = "local" if by_local else "remote"
        self._gone.set()
        self._post(self.call_id, "gone", self.end_reason, code)

    def shutdown(self, reason: str = "shutdown") -> None:
        self._post(self.call_id, "shutdown", reason)

    def line_dead(self, reason: str) -> None:
        self._post(self.call_id, "shutdown", reason)

    def bridged(self, ok: bool, detail: str) -> None:
        """The server's news of the bridge asked for (a :class:`Bridged` SIP event)."""
        self._post(self.call_id, "bridged" if ok else "bridge-failed", detail)

    def hold(self, held: bool) -> None:
        """The target put the leg on hold: nothing to do (the transfer's deadlines go on)."""

    def transfer_status(self, code: int, reason: str, final: bool) -> None:
        """Never asked for: the agent sends no REFER on a consult leg."""

    def owner_ended(self) -> None:
        """The caller's call has ended: the leg's slot is freed soon, whatever its SIP side."""
        self._owner_gone_at = time.monotonic()

    def join(self, timeout: float | None = None) -> bool:
        """True once the leg is gone (as a session's join: the server reaps it then)."""
        if self._gone.wait(timeout or 0):
            return True
        return (self._owner_gone_at is not None
                and time.monotonic() - self._owner_gone_at > OWNER_GONE_S)
