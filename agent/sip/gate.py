"""Which INVITEs reach the agent at all: rate, source network, digest credentials.

:class:`CallGate` screens each new INVITE on the ``sip`` thread, inside pjsua2's incoming-call
callback, so a refused one is answered there and then: it holds one of the wheel's four call
slots only for that moment (a flood queued for another thread would fill them and get the
wheel's own 486 to real callers too), and it never gets media. In order, cheapest first:

1. ``sip.invite_rate``: a token bucket per source (:mod:`agent.sip.flood`); over it, 503 with
   ``Retry-After``. First, so a flood from anywhere costs one bucket update per INVITE and at
   most one log line per source per second, whatever comes after.
2. ``sip.allow``: the packet's source address must be in one of the networks; else 403.
3. ``sip.auth``: digest credentials (:mod:`agent.sip.digest`); none -> 401 with a challenge,
   wrong -> 403.

Requests inside an answered call (re-INVITE, BYE, DTMF) never come here: a caller already in a
call keeps being served whatever the gate would say now. :class:`Screens` runs the gate when
pjsua picks a new INVITE's account, before the call's media exists, and keeps the verdict for
the incoming-call callback. Pure Python; imports no pjsua2.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from agent.sip.digest import DigestAuth, header_values
from agent.sip.flood import InviteLimiter
from dialplan.sip import SIPOptions


@dataclass(frozen=True)
class Screening:
    """What the gate decided about one INVITE."""

    code: int = 0
    """0: let it through; else the final SIP status to refuse it with."""
    reason: str = ""
    """Why, for the log line: ``flood``, ``not-allowed``, ``challenge``, ``stale``,
    ``bad-credentials``."""
    headers: tuple[tuple[str, str], ...] = ()
    """Headers the refusal carries (``Retry-After``, ``WWW-Authenticate``)."""
    user: str = ""
    """The authenticated user (through ``sip.auth``), or the user credentials named."""
    detail: str = ""
    """What was wrong with credentials; never a password or a hash."""
    log: bool = True
    """False for a refusal a recent log line already stands for (floods)."""
    refused: int = 1
    """Refusals the log line stands for (more than 1 only for floods)."""

    @property
    def admitted(self) -> bool:
        return self.code == 0


ADMIT = Screening()


class CallGate:
    """Screens new INVITEs; see the module docstring.

    Args:
        options: ``[sip]``: ``allow``, ``invite_rate``, ``invite_burst``, ``auth``.
        passwords: ``sip.auth`` user -> password (:func:`dialplan.config.sip_passwords`);
            empty = no authentication.
        clock: monotonic seconds for the rate limit (tests inject one).
        wall_clock: wall-clock seconds for the nonces.
    """

    def __init__(self, options: SIPOptions, passwords: dict[str, str] | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 wall_clock: Callable[[], float] = time.time):
        self.options = options
        self.limiter = InviteLimiter(options.invite_rate, options.invite_burst, clock)
        self.auth = (DigestAuth(options.auth.realm, passwords, options.auth.nonce_ttl_s,
                                wall_clock) if passwords else None)

    def screen(self, source: str, message: str) -> Screening:
        """The decision for an INVITE (its whole text) whose packet came from ``source``."""
        limited = self.limiter.take(source)
        if limited is not None:
            return Screening(503, "flood", (("Retry-After", str(limited.retry_after_s)),),
                             log=limited.log, refused=limited.refused)
        if not self.options.allows(source):
            return Screening(403, "not-allowed")
        if self.auth is None:
            return ADMIT
        check = self.auth.check(message, source)
        if check.verdict == "ok":
            return Screening(user=check.user)
        if check.verdict == "bad":
            return Screening(403, "bad-credentials", user=check.user, detail=check.why)
        stale = check.verdict == "stale"
        return Screening(401, check.verdict, (("WWW-Authenticate",
                                               self.auth.challenge(source, stale=stale)),),
                         user=check.user, detail=check.why)


class Screens:
    """The gate's verdict on each new INVITE, reached at account selection, kept for the call.

    pjsua asks for a new INVITE's account (``onSelectAccount``) before it sets up the call's
    media, then reports the call (``onIncomingCall``), both on the ``sip`` thread within one
    INVITE's handling: :meth:`select` screens it (once: the gate counts and remembers what it
    sees) and :meth:`incoming` hands the verdict to the call it belongs to.
    """

    def __init__(self, gate: CallGate):
        self.gate = gate
        self._last: tuple[str, Screening] | None = None

    def select(self, source: str, message: str) -> Screening | None:
        """Screen a request pjsua is picking an account for; None if it is not an INVITE."""
        if not message.startswith("INVITE "):
            return None
        screen = self.gate.screen(source, message)
        call_ids = header_values(message, "Call-ID") or header_values(message, "i")
        self._last = (call_ids[0] if call_ids else "", screen)
        return screen

    def incoming(self, call_id: str, source: str, message: str) -> Screening:
        """The verdict on the INVITE of call ``call_id`` (screened now if it was not before)."""
        last, self._last = self._last, None
        return last[1] if last and last[0] == call_id else self.gate.screen(source, message)
