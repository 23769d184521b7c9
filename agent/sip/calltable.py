"""The user agent's calls and bridge ports, and what pjsua2's callbacks do to them.

:class:`CallTable` (a mixin of :class:`~agent.sip.useragent.SipAgent`) is the agent's side of
:class:`~agent.sip.callbacks.AgentHooks`, all on the ``sip`` thread: a new INVITE is screened by
the :class:`~agent.sip.gate.CallGate` as pjsua picks its account, then booked as a call and
queued as an :class:`~agent.sip.events.IncomingCall` (or refused there and then); a call whose
media is active gets an idle bridge port, taken back when the call ends; each answered call's
inbound RTP is watched. A disconnected call is only set aside here: the agent's loop frees it,
never the callback that reports it (SIP.md).

Imports no pjsua2 itself: it holds pjsua2 objects only as the :mod:`agent.sip.callbacks`
subclasses. Must not import models, the session or the database.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Iterator

from agent.sip.audiolink import AudioLink
from agent.sip.callbacks import (
    AgentHooks,
    _Account,
    _Call,
    _Port,
    call_op,
    error_text,
    request_user,
    source_host,
)
from agent.sip.events import CallDisconnected, CallRefused, IncomingCall, SipError, SipEvent
from agent.sip.gate import Screens
from agent.sip.pjconfig import FRAME_MS


class CallTable:
    """The hooks that pjsua2's callbacks call, and the calls and ports they keep (``sip`` thread).

    The state is :class:`~agent.sip.useragent.SipAgent`'s, set in its ``__init__``.
    """

    events: queue.Queue
    clock_rate: int
    _calls: dict[int, _Call]
    _dead: list[_Call]
    _ports: list[_Port]
    _idle_ports: list[_Port]
    _keys: Iterator[int]
    _hooks: AgentHooks
    _screens: Screens | None
    _refusing: _Account | None

    def _emit(self, event: SipEvent) -> None:
        self.events.put(event)

    def _error(self, key: int, exc: BaseException) -> None:
        self.events.put(SipError(key, error_text(exc), time.monotonic()))

    def _make_port(self, link: AudioLink, name: str) -> _Port:
        """An idle bridge port attached to ``link`` (created once, reused, freed at shutdown)."""
        if self._idle_ports:
            port = self._idle_ports.pop()
        else:
            port = _Port(f"port{len(self._ports)}", self.clock_rate, FRAME_MS)
            self._ports.append(port)
        port.attach(link)
        return port

    def _select(self, prm) -> None:
        """Screen a new INVITE as pjsua picks its account, before its media is set up."""
        if self._screens is None or self._refusing is None:
            return
        screen = self._screens.select(source_host(str(prm.rdata.srcAddress)), prm.rdata.wholeMsg)
        if screen is not None and not screen.admitted:
            prm.accountIndex = self._refusing.getId()

    def _incoming(self, acc, prm) -> None:
        key = next(self._keys)
        call = _Call(self._hooks, acc, key, prm.callId)
        self._calls[key] = call
        msg = prm.rdata.wholeMsg
        ci = call.getInfo()
        source = source_host(str(prm.rdata.srcAddress))
        screen = (self._screens.incoming(ci.callIdString, source, msg)
                  if self._screens is not None else None)
        if screen is not None and not screen.admitted:
            # Refused here, inside the callback: the call slot is free again at once. A final
            # answer, not a hangup: pjsua sends a hangup's extra headers only once the call's
            # media is set up, which an incoming call's is not yet (the 401 went out bare).
            call.local_hangup = True
            call.answer(call_op(screen.code, screen.headers))
            if screen.log:
                self._emit(CallRefused(
                    key=key, code=screen.code, reason=screen.reason, source=source,
                    extension=request_user(msg), remote_uri=ci.remoteUri,
                    sip_call_id=ci.callIdString, at=time.monotonic(), user=screen.user,
                    detail=screen.detail, refused=screen.refused))
            return
        self._emit(IncomingCall(key=key, extension=request_user(msg), remote_uri=ci.remoteUri,
                                sip_call_id=ci.callIdString, at=time.monotonic(),
                                source=source, user=screen.user if screen else ""))

    def _watch_rtp(self, now: float) -> None:
        # Its own method, so no loop variable keeps a Call alive (see SipAgent._hangup_all).
        for call in self._calls.values():
            call.watch_rtp(now)

    def _disconnected(self, call: _Call, code: int, reason: str) -> None:
        self._calls.pop(call.key, None)
        self._dead.append(call)
        if call.port is not None:
            call.port.attach(None)  # the stream is gone: its bridge links went with it
            self._idle_ports.append(call.port)
            call.port = None
        self._emit(CallDisconnected(call.key, int(code), str(reason), call.local_hangup,
                                    time.monotonic()))
