"""What became of a campaign's call, from the call's end, and the rule a restart follows.

:func:`call_outcome` turns a call's end reason (the call log's ``calls.end_reason``) into a
campaign outcome. :func:`resumed` decides, for a row a killed campaign left ``dialing``,
what a restart does with it. Pure: no database, no SIP.

The resume rule (never call a number twice):

1. The attempt has no call id: it was stored before the call existed, and the call id is
   committed before the INVITE is queued, so nothing was dialled. The attempt is undone and
   the row dialled as if for the first time.
2. The call log has the call and its end: the row takes that call's outcome, as if the
   campaign had seen it end (a no-answer or busy with retries left is retried).
3. Otherwise the INVITE may have reached the callee with no record of how it went (the
   call's start and end reach the log through its writer, later): ``failed`` with detail
   ``interrupted``, never retried; ``answered`` (``interrupted``) if the log has turns of it.
"""

from __future__ import annotations

from dataclasses import dataclass

OUTCOMES = ("answered", "voicemail", "no-answer", "busy", "failed", "refused")
RETRIED = ("no-answer", "busy")
"""Outcomes a row is called again after (``[campaigns].retries``)."""
RING_TIMEOUT = "ring-timeout"
"""The end reason of a call the campaign cancelled while it rang (``ring_timeout_s``)."""
INTERRUPTED = "interrupted"

_BUSY = (486, 600)
_REFUSED = (403, 603)  # declined by the callee, or forbidden by their side
_NO_ANSWER = (408, 480, 487)


@dataclass(frozen=True)
class Outcome:
    """A campaign attempt's outcome and why."""

    outcome: str
    """One of :data:`OUTCOMES`."""
    detail: str = ""
    """The call's end reason or SIP status, ``interrupted``..."""


def call_outcome(end_reason: str, answered: bool) -> Outcome:
    """The outcome of an ended campaign call.

    Args:
        end_reason: the call's end reason (``voicemail``, ``unanswered-486``,
            ``ring-timeout``, ``caller-bye``, ``agent``...).
        answered: the call had media (was answered; ``calls.codec`` set).
    """
    if end_reason == "voicemail":
        return Outcome("voicemail")
    if end_reason == RING_TIMEOUT:
        return Outcome("no-answer", RING_TIMEOUT)
    if end_reason.startswith("unanswered-"):
        code_text = end_reason.removeprefix("unanswered-")
        code = int(code_text) if code_text.isdigit() else 0
        detail = f"sip-{code}"
        if code in _BUSY:
            return Outcome("busy", detail)
        if code in _REFUSED:
            return Outcome("refused", detail)
        if code in _NO_ANSWER:
            return Outcome("no-answer", detail)
        return Outcome("failed", detail)
    if answered:
        return Outcome("answered", end_reason)
    if end_reason == "shutdown":  # the campaign stopped while it rang
        return Outcome("failed", INTERRUPTED)
    return Outcome("failed", end_reason or "error")


def resumed(call_id: str | None, call_ended: bool, end_reason: str, codec: str,
            turns: int) -> Outcome | None:
    """What a restart makes of an attempt its campaign left open (the module's rule).

    Args:
        call_id: the attempt's call id (None: it never got one).
        call_ended: the call log has the call's end.
        end_reason: its end reason there.
        codec: its codec there ("" = never answered).
        turns: the call log's turns of it.

    Returns:
        None if nothing was dialled (the attempt is undone), else the attempt's outcome.
    """
    if call_id is None:
        return None
    if call_ended and end_reason != "lost":
        return call_outcome(end_reason, bool(codec))
    if turns > 0:
        return Outcome("answered", INTERRUPTED)
    return Outcome("failed", INTERRUPTED)
