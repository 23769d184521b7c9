"""Process wiring for ``callagent serve``: config, dialplan, models, call log, SIP and sessions.

One :class:`Server` per process. INVITEs the SIP gate refuses (``sip.invite_rate`` 503,
``sip.allow`` 403, ``sip.auth`` 401/403; :mod:`agent.sip.gate`) never become calls: they are only
logged here. Its thread (the caller of :meth:`Server.run`) consumes SIP
events and routes each call: unknown extension -> 404, no free call slot -> 486 (``sip.max_calls``
is the machine's, shared with the ``campaign`` and ``dial`` processes of the same config:
:mod:`agent.sip.slots`; pjsua2's wheel also refuses a 5th call of a process itself), otherwise a
:class:`~agent.call.session.CallSession`: one loop on its own thread, its model work run by
the process scheduler's workers. Every call, inbound, outbound or a consult leg, holds its slot
from the INVITE (sent or accepted) until it leaves :attr:`Server.sessions`, and a process that
dies loses its slots with it.
Models are loaded once, before the SIP port opens, and shared by every call; fixed phrases
(greetings, goodbyes) are synthesised at start so a call never waits for them.

Threads in a serving process: main (this loop), ``sip`` (pjsua2 polling), pjmedia's clock
thread (frames), ``calllog-writer``, ``timers``, one ``call-*`` per call, and the models':
the scheduler's fixed pool of ``model-*`` workers (and a batching LLM's engine). Their number
does not grow with turns. Model code never runs on the clock thread or a call's loop.

Imports no pjsua2 (only :mod:`agent.sip.useragent` does).
"""

from __future__ import annotations

import dataclasses
import queue
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

from agent import log
from agent.call.legs import ConsultLine, LegInputs
from agent.call.live import Publish
from agent.call.recorder import CallInfo
from agent.call.session import CallSession
from agent.sip.events import (
    Bridged,
    CallDisconnected,
    CallRefused,
    DtmfReceived,
    IncomingCall,
    MediaActive,
    MediaHold,
    RegistrationChanged,
    RtpTimeout,
    SipError,
    TransferStatus,
)
from agent.sip.gate import CallGate
from agent.sip.slots import NoFreeSlot, Slot, SlotSet, slots_of
from agent.sip.useragent import SipAgent
from agent.summary.runner import summarizer_for
from agent.turn.load import LoadPolicy
from agent.turn.profiles import ReadyProfiles
from agent.turn.runner import StageCache
from db.placement import this_host
from db.records import CallLog
from dialplan import Config, Dialplan, Profile
from dialplan.config import sip_passwords

CLOCK_RATE = 8000  # G.711 rate; the bridge resamples G.722 calls to it


class Server:
    """Answers calls on one SIP port with the sessions and models of one config.

    Args:
        config: parsed config (SIP options, profiles, dialplan).
        call_log: where every session writes its records.
        stage_cache: shared model loader (a test may pass one that is already warm).
        worker: this process's worker id in a cluster (recorded on each call), or None.
        live: where each call publishes its turns' words as they happen (the live console's
            feed), or None.
        slots: the machine's call slots (default: the config's, :func:`~agent.sip.slots.
            slots_of`; a cluster's worker has a set of its own).
    """

    def __init__(self, config: Config, call_log: CallLog, stage_cache: StageCache | None = None,
                 worker: str | None = None, live: Publish | None = None,
                 slots: SlotSet | None = None):
        self.config = config
        self.worker = worker
        self.live = live
        self.host = this_host()
        self.dialplan = Dialplan.from_config(config)
        self.call_log = call_log
        self.cache = stage_cache or StageCache()
        self.profiles = ReadyProfiles(self.dialplan, self.cache, out_rate=CLOCK_RATE)
        self.events: queue.Queue = queue.Queue()
        # Passwords are read here, before any model loads: a missing one fails at start.
        self.gate = CallGate(config.sip, sip_passwords(config.sip.auth))
        self.sip = SipAgent(config.sip, self.events, clock_rate=CLOCK_RATE, gate=self.gate)
        self.sessions: dict[int, CallSession | LegInputs] = {}
        """The calls up, by key: sessions, and the consult legs of attended transfers."""
        self.slots = slots or slots_of(config, worker)
        self._held: dict[int, Slot] = {}  # each call's slot, by the key of :attr:`sessions`
        self._lock = threading.Lock()  # events vs. a call's loop placing a consult leg
        self._ending: list[CallSession] = []
        self._loaded = False
        self.calls_total = 0
        self.load_policy = LoadPolicy(self.cache.models.scheduler)
        """What every call does under load, and which new calls are refused."""
        self.summaries = summarizer_for(config.profiles, config.db.url, call_log,
                                        lambda p: self.cache.models.llm(p.llm), self.load_policy,
                                        worker, self.host)
        """Post-call notes of the profiles that ask for them (None: none does)."""
        if self.summaries is not None:  # their calls' ends are marked for it on the way
            self.call_log = self.summaries.tee(call_log)

    def load(self) -> None:
        """Prepare every routed profile (models, phrases, warm-up), as ``simulate`` does.

        The first extension's profile last: profiles sharing an LLM prime its cache in turn,
        and the one primed last is the one a first call finds warm, as ``simulate`` finds its
        one profile.
        """
        for profile in reversed(list(self.dialplan.routes.values())):
            self.profiles.prepare(profile)
        self._loaded = True

    def start(self) -> None:
        """Load models, then open the SIP port."""
        if not self._loaded:
            self.load()
        if self.summaries is not None:  # the pending notes of calls before a restart too
            self.summaries.start()
        self.sip.start()
        mode = self.config.sip.registrar.uri or "direct"
        log.event("listening", uri=self.sip.uri, transport=self.config.sip.transport,
                  registrar=mode, max_calls=self.config.sip.max_calls)

    def run(self, stop: threading.Event) -> None:
        """Handle SIP events until ``stop`` is set."""
        while not stop.is_set():
            self.step(0.1)

    def step(self, timeout: float) -> None:
        """Handle the SIP events of up to ``timeout`` seconds and reap finished sessions."""
        try:
            ev = self.events.get(timeout=timeout)
        except queue.Empty:
            ev = None
        if ev is not None:
            with self._lock:
                self._handle(ev)
        self._ending = [s for s in self._ending if not s.join(0)]
        for key, session in list(self.sessions.items()):
            if session.join(0):  # ended without a DISCONNECTED (its BYE got no answer...)
                self._drop(key)
                log.event("session-reaped", session.call_id, reason=session.end_reason)

    def stop(self, timeout: float = 8.0) -> None:
        """Hang up every call, wait for their records, then close the SIP stack."""
        for session in list(self.sessions.values()):
            session.shutdown()
        deadline = time.monotonic() + timeout
        while (self.sessions or self._ending) and time.monotonic() < deadline:
            self.step(0.05)
        for session in list(self.sessions.values()):  # no BYE answer: end them anyway
            session.disconnected(by_local=True)
            session.join(2.0)
        for key in list(self.sessions):
            self._drop(key)
        self.sip.stop()
        if self.summaries is not None:  # one in flight is made again at the next start
            self.summaries.close()
        log.event("stopped", calls=self.calls_total)

    def dial(self, uri: str, profile: Profile, say_first: str = "",
             before_invite: Callable[[str], None] | None = None,
             slot: Slot | None = None) -> CallSession:
        """Place a call to ``uri`` answered by ``profile``'s agent (direction ``outbound``).

        ``say_first`` replaces the profile's greeting: what the agent says once the callee
        answers. The session runs as an answered call's does; its events arrive through
        :meth:`step` like any call's. ``before_invite(call_id)`` runs before the INVITE is
        queued (a campaign stores the id first); if it raises, nothing is dialled.
        ``slot``: the call slot the caller already took (a campaign waits for one); the call
        holds it from here (released if this raises). Without one, a free one is taken.

        Raises:
            NoFreeSlot: no slot given and every slot of the machine is held.
        """
        if slot is None and (slot := self.slots.take(uri)) is None:
            raise NoFreeSlot(f"no free call slot: {self.slots.describe()} are all in use")
        try:
            return self._dial(uri, profile, say_first, before_invite, slot)
        except BaseException:
            slot.release()
            raise

    def _dial(self, uri: str, profile: Profile, say_first: str,
              before_invite: Callable[[str], None] | None, slot: Slot) -> CallSession:
        if say_first:
            profile = dataclasses.replace(profile, greeting=say_first)
            self.profiles.runner(profile).speak(say_first)  # synthesised before dialling
        if profile.amd:  # said at a machine's beep: no synthesis then
            self.profiles.runner(profile).speak(profile.voicemail_message)
        info = CallInfo(caller_uri=uri, offered_at=datetime.now(UTC), source="sip",
                        worker=self.worker, host=self.host, direction="outbound")
        stages, phrase, cheap = self.profiles.for_call(profile)
        keys: list[int] = []
        session = CallSession(profile, stages, self.call_log,
                              hangup=lambda: self.sip.hangup(keys[0]), phrase=phrase,
                              info=info, rate=CLOCK_RATE, under_load=cheap,
                              load=self.load_policy,
                              transfer=lambda target: self.sip.transfer(keys[0], target),
                              send_dtmf=lambda digits: self.sip.send_dtmf(keys[0], digits),
                              media_dir=self.config.db.media_dir, live=self.live,
                              consult=self._consult_line(lambda: keys[0]))
        if before_invite is not None:
            before_invite(session.call_id)
        key = self.sip.dial(uri, session.link)
        keys.append(key)
        self.sessions[key] = session
        self._held[key] = slot
        self.calls_total += 1
        session.start()
        log.event("dialing", session.call_id, uri=uri, profile=profile.name)
        return session

    def _consult_line(self, key: Callable[[], int]) -> ConsultLine:
        """What the call ``key()`` may do for an attended transfer: its second call, the leg.

        The leg is one of :attr:`sessions` (a :class:`LegInputs`) from its INVITE to its end,
        with a call slot of its own, so it counts against ``sip.max_calls`` as any call does;
        none is placed beyond it.
        """
        def dial(uri: str, link, inputs: LegInputs) -> int | None:
            with self._lock:  # no event is handled between the INVITE and the leg's entry
                if len(self.sessions) >= min(self.config.sip.max_calls, 4):
                    return None
                if (slot := self.slots.take(uri)) is None:
                    return None
                try:
                    leg = self.sip.dial(uri, link)
                except BaseException:
                    slot.release()
                    raise
                self.sessions[leg] = inputs
                self._held[leg] = slot
            log.event("consult-dialing", inputs.call_id, uri=uri)
            return leg
        return ConsultLine(dial=dial, hangup=self.sip.hangup,
                           replaces=lambda leg: self.sip.transfer_replaces(key(), leg),
                           bridge=lambda leg: self.sip.bridge(key(), leg))

    # ---- events ------------------------------------------------------------------------------

    def _handle(self, ev) -> None:
        if isinstance(ev, IncomingCall):
            self._incoming(ev)
        elif isinstance(ev, CallRefused):
            self._refused(ev)
        elif isinstance(ev, MediaActive):
            if (s := self.sessions.get(ev.key)) is not None:
                s.media_active(ev.codec)
        elif isinstance(ev, DtmfReceived):
            if (s := self.sessions.get(ev.key)) is not None:
                s.dtmf(ev.digit)
        elif isinstance(ev, MediaHold):
            if (s := self.sessions.get(ev.key)) is not None:
                log.event("hold" if ev.held else "resume", s.call_id)
                s.hold(ev.held)
        elif isinstance(ev, TransferStatus):
            if (s := self.sessions.get(ev.key)) is not None:
                s.transfer_status(ev.code, ev.reason, ev.final)
        elif isinstance(ev, Bridged):
            if isinstance(s := self.sessions.get(ev.other), LegInputs):
                s.bridged(ev.ok, ev.detail)
        elif isinstance(ev, RtpTimeout):
            if (s := self.sessions.get(ev.key)) is not None:
                log.event("rtp-timeout", s.call_id, silent_s=round(ev.silent_s, 2))
                s.line_dead("rtp-timeout")
        elif isinstance(ev, CallDisconnected):
            s = self._drop(ev.key)
            if s is not None:
                s.disconnected(ev.by_local, ev.status_code)
                self._ending.append(s)
        elif isinstance(ev, RegistrationChanged):
            log.event("registration", code=ev.status_code, reason=ev.reason, active=ev.active)
        elif isinstance(ev, SipError):
            log.event("sip-error", str(ev.key), detail=ev.detail, level=40)

    def _refused(self, ev: CallRefused) -> None:
        """Log an INVITE the SIP gate refused (sip.invite_rate, sip.allow, sip.auth)."""
        extra: dict[str, object] = {}
        if ev.user:
            extra["user"] = ev.user
        if ev.detail:
            extra["why"] = ev.detail
        if ev.reason == "flood":
            extra["refused"] = ev.refused  # INVITEs from this source this line stands for
        # A challenge is how every authenticated call starts; the others are worth a look.
        level = 20 if ev.code == 401 else 30
        log.event("call-rejected", ev.sip_call_id, code=ev.code, reason=ev.reason,
                  source=ev.source, caller=ev.remote_uri, extension=ev.extension, level=level,
                  **extra)

    def _incoming(self, ev: IncomingCall) -> None:
        if ev.user:
            log.event("call-authenticated", ev.sip_call_id, user=ev.user, source=ev.source)
        profile = self.dialplan.resolve(ev.extension)
        if profile is None:
            log.event("call-rejected", ev.sip_call_id, code=404, extension=ev.extension,
                      caller=ev.remote_uri)
            self.sip.reject(ev.key, 404)
            return
        if self._overloaded(ev):
            return
        slot = None
        if len(self.sessions) < self.config.sip.max_calls:
            slot = self.slots.take(ev.sip_call_id)
        if slot is None:  # this process's calls, or with the others' the machine's, are many
            log.event("call-rejected", ev.sip_call_id, code=486, extension=ev.extension,
                      caller=ev.remote_uri, active=self.config.sip.max_calls,
                      here=len(self.sessions))
            self.sip.reject(ev.key, 486)
            return
        try:
            session = self._session(ev, profile)
        except Exception as e:  # e.g. a profile's model failed to load: refuse, keep serving
            slot.release()
            log.event("call-rejected", ev.sip_call_id, code=500, error=repr(e), level=40)
            self.sip.reject(ev.key, 500)
            return
        self.sessions[ev.key] = session
        self._held[ev.key] = slot
        self.calls_total += 1
        self.sip.answer(ev.key, 200, session.link, rtp_timeout_s=profile.limits.rtp_timeout_s)
        session.start()

    def _drop(self, key: int) -> CallSession | LegInputs | None:
        """The call ``key`` is over: out of :attr:`sessions`, its slot free for the next."""
        if (slot := self._held.pop(key, None)) is not None:
            slot.release()
        return self.sessions.pop(key, None)

    def _overloaded(self, ev: IncomingCall) -> bool:
        """Refuse the call (503) if callers' work already waits too long for the CPU."""
        sip = self.config.sip
        waited = self.load_policy.refuse(sip, len(self.sessions))
        if waited is None:
            return False
        log.event("call-rejected", ev.sip_call_id, code=sip.overload_code, reason="overload",
                  first_audio_wait_p90_s=round(waited, 2), active=len(self.sessions))
        self.sip.reject(ev.key, sip.overload_code)
        return True

    def _session(self, ev: IncomingCall, profile: Profile) -> CallSession:
        stages, phrase, cheap = self.profiles.for_call(profile)
        info = CallInfo(extension=ev.extension, caller_uri=ev.remote_uri,
                        sip_call_id=ev.sip_call_id, offered_at=datetime.now(UTC),
                        worker=self.worker, host=self.host)
        key = ev.key
        return CallSession(profile, stages, self.call_log, hangup=lambda: self.sip.hangup(key),
                           phrase=phrase, info=info, rate=CLOCK_RATE, under_load=cheap,
                           load=self.load_policy,
                           transfer=lambda uri: self.sip.transfer(key, uri),
                           send_dtmf=lambda digits: self.sip.send_dtmf(key, digits),
                           media_dir=self.config.db.media_dir, live=self.live,
                           consult=self._consult_line(lambda: key))

