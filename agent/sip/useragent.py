"""The SIP user agent: with its callbacks and config builders, the only ``pjsua2`` importer.

It owns the pjsua2 endpoint, transports, the account, every ``Call`` and every audio port, and
turns pjsua2 callbacks into plain dataclass events (:data:`~agent.sip.events.SipEvent`) on a
queue and 20 ms PCM frames handed to per-call :class:`~agent.sip.audiolink.AudioLink` callables
(events are defined in :mod:`agent.sip.events`). This module is its thread, its commands and the
endpoint's life; what the callbacks do to its calls and ports is its
:class:`~agent.sip.calltable.CallTable` mixin's. Nothing outside :class:`SipAgent` ever holds a
pjsua2 object, so no other thread can free one (a pj object freed on an unregistered thread or
after ``libDestroy`` aborts the process; see /work/shared/SIP.md).

Threads:
  * one Python thread (``sip``) creates the pjsua2 endpoint, polls it with ``libHandleEvents``
    and runs every pj API call; other threads send it commands (answer, hangup, dial,
    transfer, DTMF; joining two calls, :mod:`agent.sip.legs`) through a queue;
  * the ``sip`` thread screens each new INVITE with the :class:`~agent.sip.gate.CallGate` as
    pjsua picks its account, before its media exists: a refused one gets an account whose media
    opens no socket (:func:`~agent.sip.pjconfig.refusing_config`), and is answered in the
    incoming-call callback;
  * the ``sip`` thread also watches each answered call's inbound RTP (``_Call.watch_rtp``):
    a call that receives no packet for its ``rtp_timeout_s`` while its media is active (not on
    hold) gets one :class:`~agent.sip.events.RtpTimeout`; what to do about it is the consumer's;
  * pjmedia's native clock thread calls the port's ``onFrameReceived``/``onFrameRequested``:
    those only copy bytes to/from the :class:`AudioLink` (no logging, no models, no locks held
    long), because anything slow there delays every call's audio.

Must not import models, the session or the database: SIP knows nothing of speech.
"""

from __future__ import annotations

import gc
import itertools
import queue
import threading
import time
from collections.abc import Callable

import pjsua2 as pj

from agent.sip.audiolink import AudioLink
from agent.sip.callbacks import (
    AgentHooks,
    _Account,
    _Call,
    _Endpoint,
    _Port,
    call_op,
    set_codecs,
    stop_clock,
)
from agent.sip.calltable import CallTable
from agent.sip.events import CallDisconnected, TransferStatus
from agent.sip.gate import CallGate, Screens
from agent.sip.legs import CallJoins
from agent.sip.pjconfig import (  # RTP_PORT_RANGE: tests and benches import it from here
    RTP_PORT_RANGE,  # noqa: F401
    account_config,
    create_transports,
    endpoint_config,
    refusing_config,
)
from dialplan.sip import SIPOptions

RTP_POLL_S = 0.2
"""How often the ``sip`` thread reads each watched call's received-packet count: an RTP timeout
is reported at most two polls (0.4 s) after ``rtp_timeout_s`` has passed since the last packet."""


class SipAgent(CallJoins, CallTable):
    """A pjsua2 user agent running on its own thread; see the module docstring.

    Args:
        options: transport, codecs, call cap and optional registrar.
        events: where :data:`~agent.sip.events.SipEvent` objects are put (from the ``sip``
            thread).
        user: account user part when listening directly (``sip:user@host:port``).
        clock_rate: sample rate of the frames exchanged with :class:`AudioLink` (the bridge
            resamples from the codec's rate).
        pj_log_level: pjsua2's own console log level (0 = silent).
        gate: screens each new INVITE on the ``sip`` thread; a refused one is answered there
            and queued as :class:`CallRefused` (when it is to be logged), never as an
            :class:`IncomingCall`. None = every INVITE is an IncomingCall.
    """

    def __init__(self, options: SIPOptions, events: queue.Queue, *, user: str = "agent",
                 clock_rate: int = 8000, pj_log_level: int = 0, gate: CallGate | None = None):
        self.options = options
        self.events = events
        self.gate = gate
        self.user = user
        self.clock_rate = clock_rate
        self._log_level = pj_log_level
        self._cmds: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._calls: dict[int, _Call] = {}
        self._dead: list[_Call] = []  # disconnected calls, freed by the loop, never in a callback
        self._ports: list[_Port] = []  # every bridge port made; freed only at shutdown
        self._idle_ports: list[_Port] = []  # detached, ready for the next call
        self._keys = itertools.count(1)
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self._stop = threading.Event()
        self._start_error: BaseException | None = None
        self._ep = None
        self._acc = None
        # All the pjsua2 callbacks (agent.sip.callbacks) may call of this agent (its CallTable).
        self._hooks = AgentHooks(
            emit=self._emit, error=self._error, make_port=self._make_port,
            disconnected=self._disconnected, incoming=self._incoming, select=self._select)
        self._refusing: _Account | None = None
        self._screens = Screens(gate) if gate is not None else None

    # ---- public API (any thread) -------------------------------------------------------------

    def start(self, timeout: float = 15.0) -> None:
        """Start the ``sip`` thread and wait until the transport is listening.

        Raises:
            RuntimeError: pjsua2 failed to start (port in use, bad registrar URI...).
        """
        self._thread = threading.Thread(target=self._run, name="sip", daemon=True)
        self._thread.start()
        if not self._started.wait(timeout):
            raise RuntimeError("SIP stack did not start in time")
        if self._start_error is not None:
            raise RuntimeError(f"SIP stack failed to start: {self._start_error}")

    def stop(self, timeout: float = 10.0) -> None:
        """Hang up every call, destroy the endpoint and join the thread."""
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join(timeout)
        self._thread = None

    def answer(self, key: int, code: int = 200, link: AudioLink | None = None,
               rtp_timeout_s: float = 0.0) -> None:
        """Answer an incoming call; ``link`` carries its audio once media is active.

        ``rtp_timeout_s`` > 0 watches the call's inbound RTP: after that long without a packet
        while its media is active (not on hold), one :class:`RtpTimeout` is queued (the call is
        left up: the consumer decides, usually to hang up).
        """
        def do() -> None:
            call = self._calls.get(key)
            if call is None:
                return
            if link is not None:
                call.link = link
            call.rtp_timeout_s = rtp_timeout_s
            op = pj.CallOpParam()
            op.statusCode = code
            call.answer(op)
        self._cmds.put(do)

    def reject(self, key: int, code: int) -> None:
        """Refuse an incoming call with a final status (404, 486, 503...)."""
        self.hangup(key, code)

    def hangup(self, key: int, code: int = 200) -> None:
        """End a call (BYE when answered, the final ``code`` when still ringing)."""
        def do() -> None:
            call = self._calls.get(key)
            if call is None:
                return
            call.local_hangup = True
            try:
                call.hangup(call_op(code))
            except pj.Error as e:
                self._error(key, e)
        self._cmds.put(do)

    def dial(self, uri: str, link: AudioLink) -> int:
        """Place an outgoing call to ``uri``; returns its key (events follow)."""
        key = next(self._keys)

        def do() -> None:
            call = _Call(self._hooks, self._acc, key)
            call.link = link
            self._calls[key] = call
            try:
                call.makeCall(uri, pj.CallOpParam(True))
            except pj.Error as e:
                self._calls.pop(key, None)
                self._dead.append(call)
                self._emit(CallDisconnected(key, 500, e.info(), True, time.monotonic()))
        self._cmds.put(do)
        return key

    def transfer(self, key: int, uri: str) -> None:
        """Blind-transfer an answered call to ``uri``: a REFER with ``Refer-To: <uri>``.

        Progress comes as :class:`~agent.sip.events.TransferStatus` events, the last ``final``.
        The call stays up whatever the outcome: pjsua2 (2.15) does not hang up after a 2xx
        NOTIFY (its sample app does, in its own callback), so the consumer hangs up after a 2xx
        and carries on with the caller after a failure.
        """
        def do() -> None:
            call = self._calls.get(key)
            if call is None:
                self._emit(TransferStatus(key, 500, "no such call", True, time.monotonic()))
            else:
                call.refer(uri)
        self._cmds.put(do)

    def send_dtmf(self, key: int, digits: str) -> None:
        """Send ``digits`` (0-9, *, #, A-D) as RFC 2833 telephone-events on an answered call.

        A failure (unknown call, no telephone-event in the SDP, a bad digit) is a SipError.
        """
        def do() -> None:
            call = self._calls.get(key)
            try:
                if call is None:
                    raise LookupError(f"send_dtmf: no call {key}")
                call.dialDtmf(digits)
            except (pj.Error, LookupError) as e:
                self._error(key, e)
        self._cmds.put(do)

    @property
    def uri(self) -> str:
        """Where this agent can be called (direct mode)."""
        tls = ";transport=tls" if self.options.transport == "tls" else ""
        return f"sip:{self.user}@{self.options.host}:{self.options.port}{tls}"

    # ---- the sip thread ----------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._create()
        except BaseException as e:  # noqa: BLE001 (reported to start())
            self._start_error = e
            self._started.set()
            self._destroy()
            return
        self._started.set()
        next_watch = time.monotonic()
        try:
            while not self._stop.is_set():
                self._ep.libHandleEvents(10)
                self._drain()
                now = time.monotonic()
                if now >= next_watch:
                    next_watch = now + RTP_POLL_S
                    try:
                        self._watch_rtp(now)
                    except Exception as e:  # its traceback must not keep a Call alive
                        self._error(-1, e)
        finally:
            self._shutdown()

    def _drain(self) -> None:
        while True:
            try:
                cmd = self._cmds.get_nowait()
            except queue.Empty:
                break
            try:
                cmd()
            except Exception as e:
                self._error(-1, e)
        if self._dead:
            # Freed here, outside the DISCONNECTED callback that queued them.
            self._dead.clear()

    def _create(self) -> None:
        o = self.options
        ep = _Endpoint(self._hooks)
        self._ep = ep
        ep.libCreate()
        ep.libInit(endpoint_config(self.clock_rate, self._log_level))
        transport_ids = create_transports(ep, o)
        ep.libStart()
        ep.audDevManager().setNullDev()  # no sound card; also drives the bridge clock
        set_codecs(ep, o.codecs)

        acc = _Account(self._hooks)
        acc.create(account_config(o, self.uri, transport_ids), True)
        self._acc = acc
        if self.gate is not None:
            self._refusing = _Account(self._hooks)
            self._refusing.create(refusing_config(o, transport_ids), False)

    def _shutdown(self) -> None:
        self._hangup_all()
        deadline = time.monotonic() + 2.0
        while self._calls and time.monotonic() < deadline:
            self._ep.libHandleEvents(20)  # let BYEs go out and DISCONNECTED callbacks run
            self._drain()
        self._destroy()

    def _hangup_all(self) -> None:
        # A method of its own so that no loop variable outlives it: a Call still referenced from
        # this frame was freed after libDestroy and aborted the process (seen with a call whose
        # 200 OK was never ACKed).
        for key in list(self._calls):
            op = pj.CallOpParam()
            op.statusCode = 503  # to a call still ringing; an answered one gets a BYE
            try:
                self._calls[key].local_hangup = True
                self._calls[key].hangup(op)
            except pj.Error:
                pass

    def _destroy(self) -> None:
        # Every Call/port must be gone before libDestroy, or freeing them later aborts. First
        # unbridge the ports of calls still up: while a port is connected, pjmedia's clock
        # thread may be inside its callback when this thread frees it (a SIGSEGV during the gc
        # below was seen once in the test suite). stopTransmit takes the bridge's lock, which
        # the clock thread holds for a whole tick, so no callback is running once it returns.
        self._unbridge_all()
        stop_clock(self._ep)
        self._calls.clear()
        self._dead.clear()
        self._idle_ports.clear()
        self._ports.clear()
        for acc in (self._acc, self._refusing):
            try:
                if acc is not None:
                    acc.shutdown()
            except Exception:
                pass
        self._acc = self._refusing = acc = None
        gc.collect()
        if self._ep is not None:
            try:
                self._ep.libDestroy()
            except Exception:
                pass
        self._ep = None

    def _unbridge_all(self) -> None:
        for call in list(self._calls.values()):
            call.unbridge()
