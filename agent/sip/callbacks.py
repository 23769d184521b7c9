"""The pjsua2 objects whose methods pjsua2 calls back: bridge port, call, account, endpoint.

Director subclasses only: each callback turns what pjsua2 reports into a plain event for
:class:`~agent.sip.useragent.SipAgent` (which owns every one of these objects and their
lifetimes) or copies a frame to/from an :class:`~agent.sip.audiolink.AudioLink`. They reach the
agent only through :class:`AgentHooks`, plain callables it hands them, so this module does not
import :mod:`agent.sip.useragent` (which imports this one). Call and account callbacks run on
the ``sip`` thread; port callbacks on pjmedia's clock thread, so they only copy bytes. Every
callback catches its exceptions: one escaping into pjsua2 would be printed per frame, or worse.
With :mod:`agent.sip.useragent`, the only pjsua2 importers.
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pjsua2 as pj

from agent.sip.audiolink import AudioLink
from agent.sip.events import (
    CallConnected,
    DtmfReceived,
    MediaActive,
    MediaHold,
    RegistrationChanged,
    RtpTimeout,
    SipEvent,
    TransferStatus,
)


@dataclass(frozen=True)
class AgentHooks:
    """What a callback may ask of its user agent; every hook runs on the ``sip`` thread."""

    emit: Callable[[SipEvent], None]
    """Queue an event for the agent's consumer."""
    error: Callable[[int, BaseException], None]
    """A callback failed: report it for the call's key (-1: not a call's)."""
    make_port: Callable[[AudioLink, str], _Port]
    """A bridge port attached to the link (made once, reused by later calls)."""
    disconnected: Callable[[_Call, int, str], None]
    """The call ended, with its last status code and reason."""
    incoming: Callable[[_Account, Any], None]
    """An INVITE reached the account (pjsua2's ``OnIncomingCallParam``)."""
    select: Callable[[Any], None] = lambda prm: None
    """A new INVITE is about to become a call: pick its account (``OnSelectAccountParam``)."""


def _vector_reader() -> Callable[[pj.ByteVector], bytes]:
    """How to read a frame's ``ByteVector`` into bytes on this build.

    ``bytes(vector)`` goes element by element through SWIG, a call per sample, with the GIL
    held, on the clock thread, for every call's every frame, while the LLM's threads want both
    cores. Reading the vector's storage directly is one copy. It relies on
    libstdc++'s layout (the object starts with its data pointer), so it is used only if it
    reads a probe vector back exactly.
    """
    def direct(vector: pj.ByteVector) -> bytes:
        n = len(vector)
        data = ctypes.c_void_p.from_address(int(vector.this)).value
        return ctypes.string_at(data, n) if n and data else b""

    probe = bytes(range(256)) * 2
    try:
        if direct(pj.ByteVector(probe)) == probe and direct(pj.ByteVector()) == b"":
            return direct
    except Exception:  # any failure: the slow, safe way
        pass
    return bytes


_read_vector = _vector_reader()


class _Port(pj.AudioMediaPort):
    """A bridge port that copies frames between the conference bridge and an AudioLink.

    Ports are never freed while the endpoint runs: pjmedia's clock thread may already be inside
    a director callback of a port (no GIL yet) when the sip thread would drop its last Python
    reference, and it then runs Python code on a freed object (the intermittent libpython
    SIGSEGV right after a call ended: a read at ``ob_type->tp_flags`` of a NULL type, ``segfault
    at a9``). A disconnected call's port is detached (its callbacks pass silence) and reused by
    the next call; all of them go at shutdown, before ``libDestroy``.
    """

    def __init__(self, name: str, clock_rate: int, frame_ms: int):
        super().__init__()
        self._link: AudioLink | None = None
        self._frame_bytes = clock_rate * frame_ms // 1000 * 2  # 16-bit mono
        self._silence = bytes(self._frame_bytes)
        fmt = pj.MediaFormatAudio()
        fmt.init(pj.PJMEDIA_FORMAT_PCM, clock_rate, 1, frame_ms * 1000, 16)
        self.createPort(name, fmt)

    def attach(self, link: AudioLink | None) -> None:
        self._link = link  # one reference swap: atomic for the clock thread

    def onFrameReceived(self, frame):  # noqa: N802 (pjsua2 name)
        link = self._link
        if link is None:
            return
        try:
            if frame.type == pj.PJMEDIA_FRAME_TYPE_AUDIO and frame.size == self._frame_bytes:
                link.sink(_read_vector(frame.buf))
            else:  # keep the inbound clock: the session's VAD offsets count frames
                link.sink(self._silence)
        except Exception:  # an exception here would be printed 50 times a second
            pass

    def onFrameRequested(self, frame):  # noqa: N802
        link = self._link
        try:
            data = link.source() if link is not None else self._silence
            if len(data) != self._frame_bytes:
                data = self._silence
        except Exception:
            data = self._silence
        frame.type = pj.PJMEDIA_FRAME_TYPE_AUDIO
        frame.buf = pj.ByteVector(data)
        frame.size = len(data)


class _Call(pj.Call):
    def __init__(self, hooks: AgentHooks, acc, key: int, call_id: int = pj.PJSUA_INVALID_ID):
        super().__init__(acc, call_id)
        self.hooks = hooks
        self.key = key
        self.link: AudioLink | None = None
        self.port: _Port | None = None
        self.local_hangup = False
        self.connected = False
        self.media_announced = False  # MediaActive is sent once; a re-INVITE only rewires
        self.receiving: bool | None = None  # inbound audio active (None: no media yet)
        self.audio_index = -1
        # RTP watch, read and written on the sip thread only (see SipAgent._watch_rtp).
        self.rtp_timeout_s = 0.0  # 0: not watched
        self.rx_count: int | None = None  # packets pjmedia counted at the last poll
        self.rx_at: float | None = None  # monotonic stamp of the last change; None: suspended
        self.rtp_timed_out = False

    def onCallState(self, prm):  # noqa: N802
        try:
            ci = self.getInfo()
            if ci.state == pj.PJSIP_INV_STATE_CONFIRMED and not self.connected:
                self.connected = True
                self.hooks.emit(CallConnected(self.key, time.monotonic()))
            elif ci.state == pj.PJSIP_INV_STATE_DISCONNECTED:
                self.hooks.disconnected(self, ci.lastStatusCode, ci.lastReason)
        except Exception as e:  # never let an exception unwind into pjsua2
            self.hooks.error(self.key, e)

    def onCallMediaState(self, prm):  # noqa: N802
        try:
            ci = self.getInfo()
            receiving = False
            for mi in ci.media:
                if mi.type != pj.PJMEDIA_TYPE_AUDIO:
                    continue
                # Remote hold (a=sendonly or a=inactive from the caller) is REMOTE_HOLD; a=recvonly
                # from the caller leaves us sending only. Either way no RTP is due to us.
                if (mi.status == pj.PJSUA_CALL_MEDIA_ACTIVE
                        and mi.dir & pj.PJMEDIA_DIR_DECODING):
                    receiving = True
                    self.audio_index = mi.index
                if mi.status != pj.PJSUA_CALL_MEDIA_ACTIVE:
                    continue
                if self.port is None and self.link is not None:
                    self.port = self.hooks.make_port(self.link, f"call{self.key}")
                if self.port is None:
                    continue
                media = self.getAudioMedia(mi.index)  # a re-INVITE may have made a new stream
                media.startTransmit(self.port)
                self.port.startTransmit(media)
                if not self.media_announced:
                    self.media_announced = True
                    codec = self.getStreamInfo(mi.index).codecName
                    self.hooks.emit(MediaActive(self.key, codec, time.monotonic()))
            self.media_direction(receiving)
        except Exception as e:
            self.hooks.error(self.key, e)

    def media_direction(self, receiving: bool) -> None:
        """Media (re)negotiated: restart the call's RTP watch, or suspend it while held."""
        if receiving:
            self.rx_count = None  # a re-INVITE may have made a new stream (counts from 0)
            self.rx_at = time.monotonic()
        else:
            self.rx_at = None
        if self.receiving is not None and receiving != self.receiving:
            self.hooks.emit(MediaHold(self.key, not receiving, time.monotonic()))
        self.receiving = receiving

    def watch_rtp(self, now: float) -> None:
        """One poll of the RTP watch (the agent's ``sip`` loop, every ``RTP_POLL_S``)."""
        if self.rtp_timeout_s <= 0 or self.rx_at is None or self.rtp_timed_out:
            return
        count = self.rx_packets()
        if count is None:
            return
        if count != self.rx_count:
            # A packet arrived since the last poll: the newest came at most one poll ago,
            # so stamping it now can only make the timeout late, never early.
            self.rx_count = count
            self.rx_at = now
        elif now - self.rx_at >= self.rtp_timeout_s:
            self.rtp_timed_out = True  # reported once; a hang-up follows from the consumer
            self.hooks.emit(RtpTimeout(self.key, now - self.rx_at, now))

    def unbridge(self) -> None:
        """Detach the call's port and disconnect it from the stream (before freeing both)."""
        port = self.port
        if port is None or self.audio_index < 0:
            return
        port.attach(None)
        try:
            media = self.getAudioMedia(self.audio_index)
            media.stopTransmit(port)
            port.stopTransmit(media)
        except pj.Error:
            pass  # the stream is already gone: nothing is bridged to the port

    def rx_packets(self) -> int | None:
        """RTP packets the audio stream has received; None while there is no stream.

        Any payload type counts (comfort noise, telephone-events, packets pjmedia discards).
        """
        if self.audio_index < 0:
            return None
        try:
            rx = self.getStreamStat(self.audio_index).rtcp.rxStat
        except pj.Error:
            # The stream is gone but the call was never reported disconnected: nothing can
            # arrive any more, so the count stands still and the timeout runs.
            return self.rx_count
        return int(rx.pkt) + int(rx.discard)

    def onDtmfDigit(self, prm):  # noqa: N802
        try:
            self.hooks.emit(DtmfReceived(self.key, str(prm.digit), time.monotonic()))
        except Exception as e:
            self.hooks.error(self.key, e)

    def refer(self, uri: str) -> None:
        """Start a blind transfer to ``uri`` (REFER); see :meth:`SipAgent.transfer`.

        A REFER that cannot be sent (``uri`` not a URI, ``xfer`` raising) ends the transfer here,
        with a final 500: pjsua2 calls :meth:`onCallTransferStatus` only once it was sent. It
        does not check the URI itself: ``not a uri`` went out as the Refer-To.
        """
        try:
            if pj.Endpoint.instance().utilVerifyUri(uri) != pj.PJ_SUCCESS:
                reason = f"not a URI: {uri!r}"
            else:
                self.xfer(uri, pj.CallOpParam())
                return
        except pj.Error as e:
            reason = error_text(e)
        self.hooks.emit(TransferStatus(self.key, 500, reason, True, time.monotonic()))

    def onCallTransferStatus(self, prm):  # noqa: N802
        # pjsua (2.15) calls this with 100 "Accepted" on the 202, then once per NOTIFY with the
        # code of its sipfrag body, or once with a refusal's code (4xx-6xx) or 500 for a REFER
        # that timed out; the last has finalNotify. It never hangs the call up itself.
        try:
            final = bool(prm.finalNotify)
            if not final:
                prm.cont = True  # keep reporting NOTIFYs until the subscription ends
            self.hooks.emit(TransferStatus(self.key, int(prm.statusCode), str(prm.reason), final,
                                           time.monotonic()))
        except Exception as e:
            self.hooks.error(self.key, e)


class _Account(pj.Account):
    def __init__(self, hooks: AgentHooks):
        super().__init__()
        self.hooks = hooks

    def onIncomingCall(self, prm):  # noqa: N802
        try:
            self.hooks.incoming(self, prm)
        except Exception as e:
            self.hooks.error(-1, e)

    def onRegState(self, prm):  # noqa: N802
        try:
            info = self.getInfo()
            self.hooks.emit(RegistrationChanged(
                int(prm.code), str(prm.reason), bool(info.regIsActive), time.monotonic()))
        except Exception as e:
            self.hooks.error(-1, e)


class _Endpoint(pj.Endpoint):
    """The endpoint, for ``onSelectAccount``.

    pjsua asks it for a new INVITE's account before it sets up the call's media, the one
    moment a flood can still be refused cheaply.
    """

    def __init__(self, hooks: AgentHooks):
        super().__init__()
        self.hooks = hooks

    def onSelectAccount(self, prm):  # noqa: N802
        try:
            self.hooks.select(prm)
        except Exception as e:
            self.hooks.error(-1, e)


def error_text(e: BaseException) -> str:
    """What went wrong, readably: a ``pj.Error``'s reason and title (its repr says nothing)."""
    if isinstance(e, pj.Error):
        return f"{e.title}: {e.reason} (status {e.status})"
    return repr(e)


def source_host(address: str) -> str:
    """The host of pjsip's ``srcAddress`` (``127.0.0.1:5080``, ``[::1]:5080``)."""
    if address.startswith("["):
        return address[1:].split("]", 1)[0]
    return address.rsplit(":", 1)[0] if address.count(":") == 1 else address


def request_user(whole_msg: str) -> str:
    """The user part of a SIP request line: ``INVITE sip:101@host SIP/2.0`` -> ``101``."""
    line = whole_msg.split("\r\n", 1)[0].split("\n", 1)[0]
    parts = line.split()
    uri = parts[1] if len(parts) >= 2 else ""
    uri = uri.split(":", 1)[1] if ":" in uri else uri
    return uri.split("@", 1)[0].split(";", 1)[0] if "@" in uri else ""


def call_op(code: int, headers: tuple[tuple[str, str], ...] = ()) -> pj.CallOpParam:
    """A ``CallOpParam`` with a status code and extra headers (``Retry-After``...) to send."""
    op = pj.CallOpParam()
    op.statusCode = code
    if headers:
        vector = pj.SipHeaderVector()
        for name, value in headers:
            h = pj.SipHeader()
            h.hName = name
            h.hValue = value
            vector.append(h)
        opt = pj.SipTxOption()
        opt.headers = vector
        op.txOption = opt
    return op


def set_codecs(ep: pj.Endpoint, wanted: list[str]) -> None:
    """Only the configured codecs, in the configured order.

    Everything else is disabled, so an offer of speex/iLBC/GSM alone is refused (488) instead
    of decoded at a loss.
    """
    prio = {name.upper(): 255 - i for i, name in enumerate(wanted)}
    for info in ep.codecEnum2():
        name = info.codecId.split("/", 1)[0].upper()
        ep.codecSetPriority(info.codecId, prio.get(name, 0))


def stop_clock(ep: pj.Endpoint | None) -> None:
    """Close the null sound device, which drives the conference bridge's clock thread.

    That thread calls into every port the bridge still knows; with it stopped, no frame
    callback can run while ports and calls are freed at shutdown (the test suite crashed in
    that gc twice, the second time after ports were already unbridged first).
    """
    if ep is None:
        return
    try:
        ep.audDevManager().setNoDev()
    except pj.Error:
        pass
