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
    source: str = ""
    """The address the INVITE came from (the packet's, not its headers'): what ``sip.allow``
    is checked against."""
    user: str = ""
    """The ``sip.auth`` user the INVITE authenticated as (empty without ``sip.auth``)."""


@dataclass(frozen=True)
class CallRefused:
    """An INVITE the user agent refused itself, before any media (:mod:`agent.sip.gate`).

    Queued only for refusals that get a log line: a flood's come at most once a second per
    source, ``refused`` counting the INVITEs each stands for.
    """

    key: int
    code: int
    reason: str
    """``flood``, ``not-allowed``, ``challenge``, ``stale`` or ``bad-credentials``."""
    source: str
    extension: str
    remote_uri: str
    sip_call_id: str
    at: float
    user: str = ""
    """The user the credentials named, if any."""
    detail: str = ""
    """What was wrong with the credentials (never a password or a hash)."""
    refused: int = 1


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
class TransferStatus:
    """Progress of a blind transfer (:meth:`SipAgent.transfer`), one per REFER response or NOTIFY.

    The first, 100 Accepted, comes with the 202 to the REFER; then one per NOTIFY from the
    transferee, carrying the status line of its call to the target (``SIP/2.0 180 Ringing``,
    ``SIP/2.0 200 OK``). A REFER that could not be sent, was refused (4xx-6xx) or got no answer
    ends with a final one carrying that code (500 when there is none). The call itself stays up
    whatever the code: hanging it up after a 2xx is the consumer's. A 2xx NOTIFY that leaves
    the subscription active comes with ``final`` False; pjsua then unsubscribes, and the
    transferee's last NOTIFY brings the final one.
    """

    key: int
    code: int
    """SIP status: of the REFER's response, or of the target's call as the NOTIFY reports it."""
    reason: str
    final: bool
    """The last one for this transfer: the subscription ended (or never began)."""
    at: float


@dataclass(frozen=True)
class Bridged:
    """Two of the agent's calls now hear each other (:meth:`SipAgent.bridge`), or why not."""

    key: int
    """The call whose bridge was asked for (an attended transfer's caller)."""
    other: int
    ok: bool
    detail: str
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


SipEvent = (IncomingCall | CallRefused | MediaActive | MediaHold | RtpTimeout | CallConnected
            | DtmfReceived | TransferStatus | Bridged | CallDisconnected
            | RegistrationChanged | SipError)
