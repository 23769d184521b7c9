"""What reaches a call's loop: one typed message per kind, on one queue.

The SIP side (or a simulated line) sends line events, the pjmedia clock thread sends frames
(and the stamp of a reply's first frame out), the scheduler's workers send completed model work
(:class:`JobDone`), and the loop posts its own turn milestones after the message that caused
them. The loop handles them one at a time,
in order, so call and turn state need no locks. Plain frozen dataclasses, told apart with
``match``.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass

from agent.call.turn import Turn


@dataclass(frozen=True, slots=True)
class Frame:
    """20 ms of caller audio (16-bit PCM at the line rate), stamped on arrival."""

    at: float
    data: bytes


@dataclass(frozen=True, slots=True)
class MediaActive:
    """The call's audio is connected with ``codec``."""

    codec: str


@dataclass(frozen=True, slots=True)
class Dtmf:
    """An RFC 2833 digit."""

    digit: str


@dataclass(frozen=True, slots=True)
class Disconnected:
    """The SIP call is gone (BYE either way, or a failure)."""

    by_local: bool
    code: int = 200


@dataclass(frozen=True, slots=True)
class LineDead:
    """The line is gone without a BYE (no RTP for ``limits.rtp_timeout_s``...).

    The session hangs up at once, speaks no goodbye into nothing, and ends with ``reason``.
    """

    reason: str


@dataclass(frozen=True, slots=True)
class Held:
    """The caller put the call on hold (``held``) or took it off hold."""

    held: bool


@dataclass(frozen=True, slots=True)
class TransferProgress:
    """The REFER the call sent: its response, then each NOTIFY's status (``final`` last)."""

    code: int
    reason: str
    final: bool


@dataclass(frozen=True, slots=True)
class LegFrame:
    """20 ms of a consult leg's audio (an attended transfer's call to its target)."""

    leg: str
    """The leg's call id."""
    at: float
    data: bytes


@dataclass(frozen=True, slots=True)
class LegEvent:
    """News of the consult leg (:mod:`agent.call.consult`).

    ``media`` (answered; ``detail``: the codec), ``dtmf`` (``detail``: the digit), ``gone``
    (disconnected; ``code``: its last status, ``detail``: ``local`` or ``remote``),
    ``bridged`` / ``bridge-failed`` (the two calls' audio joined, or why not), ``shutdown``.
    """

    leg: str
    """The leg's call id."""
    kind: str
    detail: str = ""
    code: int = 0


@dataclass(frozen=True, slots=True)
class Shutdown:
    """The process is stopping, or its owner ends the call: hang up and close the records."""

    reason: str = "shutdown"
    """The end reason (``ring-timeout``: a campaign gave up on a call still ringing)."""


@dataclass(frozen=True, slots=True)
class JobDone:
    """Model work submitted for the call has completed (or failed, or was cancelled)."""

    future: Future
    then: Callable[[Future], None]
    """The continuation that takes its result, run on the call's loop."""


@dataclass(frozen=True, slots=True)
class Tick:
    """A deadline passed (no frame may come to check it)."""


@dataclass(frozen=True, slots=True)
class EndOfTurnScored:
    """The end-of-turn model has scored a speculative turn (``turn.end_probability``)."""

    turn: Turn


@dataclass(frozen=True, slots=True)
class Transcribed:
    """A turn's transcript is known (before its reply)."""

    turn: Turn


@dataclass(frozen=True, slots=True)
class ReplyAudio:
    """A turn queued its first reply audio."""

    turn: Turn


@dataclass(frozen=True, slots=True)
class FirstFrameOut:
    """The line's clock thread handed out a turn's first reply frame at ``at``."""

    turn: Turn
    at: float


@dataclass(frozen=True, slots=True)
class TurnDone:
    """A turn's work has finished (answered, cancelled or failed)."""

    turn: Turn


Message = (Frame | MediaActive | Dtmf | Disconnected | LineDead | Held | Shutdown | JobDone | Tick
           | EndOfTurnScored | Transcribed | ReplyAudio | TurnDone | TransferProgress | LegFrame
           | LegEvent)
