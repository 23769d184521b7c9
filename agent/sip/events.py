"""Events the SIP user agent (:mod:`agent.sip.useragent`) queues, one per pjsua2 callback.

Pure data (keys, strings, monotonic stamps): never a pjsua2 object, so whichever thread drops an
event cannot free a pj object. Imports nothing.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class IncomingCall:
    """An INVITE arrived; answer it with :meth:`SipAgent.answer` or :meth:`SipAgent.reject`."""

    key: int
    extension: str
    """User part of the request URI (what the dialplan routes on)."""
    remote_uri: str
    sip_call_id: str
    at: float


@dataclass(frozen=True)
class MediaActive:
    """RTP is flowing; frames start reaching the call's :class:`AudioLink`."""

    key: int
    codec: str
    at: float


@dataclass(frozen=True)
class MediaHold:
    """The caller put the call on hold, or took it off hold.

    Hold is a re-INVITE with a=sendonly or a=inactive (or a=recvonly: a caller that only
    listens); no inbound RTP is due while held, so the RTP watch is suspended.
    """

    key: int
    held: bool
    at: float


@dataclass(frozen=True)
class RtpTimeout:
    """No RTP for ``rtp_timeout_s``: the line is dead without a BYE.

    An answered call received no packet (comfort noise and silence count) for that long while not
    on hold. Sent once per call; the call stays up until someone hangs it up.
    """

    key: int
    silent_s: float
    """Seconds since the poll that last saw a new packet (the line was silent up to one poll
    interval longer)."""
    at: float


@dataclass(frozen=True)
class CallConnected:
    """An outgoing call was answered (200 OK)."""

    key: int
    at: float


@dataclass(frozen=True)
class DtmfReceived:
    """An RFC 2833 telephone-event digit (or SIP INFO) was received."""

    key: int
    digit: str
    at: float


@dataclass(frozen=True)
class CallDisconnected:
    """The call is over; its key is no longer valid."""

    key: int
    status_code: int
    reason: str
    by_local: bool
    """True when this side hung up (or rejected); False when the remote side sent BYE/CANCEL."""
    at: float


@dataclass(frozen=True)
class RegistrationChanged:
    """The account's registration with the PBX changed."""

    status_code: int
    reason: str
    active: bool
    at: float


@dataclass(frozen=True)
class SipError:
    """pjsua2 raised inside a callback or command (logged by the consumer, not here)."""

    key: int
    """The call concerned, or -1."""
    detail: str
    at: float


SipEvent = (IncomingCall | MediaActive | MediaHold | RtpTimeout | CallConnected | DtmfReceived
            | CallDisconnected | RegistrationChanged | SipError)
