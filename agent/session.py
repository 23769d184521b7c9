"""One phone call's conversation: an explicit state machine over audio frames and turns.

A :class:`CallSession` owns one call's per-call state (VAD stream, resampler, segmenter,
history, playout queue) and runs on its own thread. It connects the stages (through
:class:`~agent.pipeline.TurnRunner`, on a worker thread per turn) and never implements one.

Turn-taking decisions (speculation, endpoint, pause tolerance, merging) live in
:class:`~agent.turntaking.TurnTaking`, turn execution in :mod:`agent.session_turn`, records in
:mod:`agent.session_log`; the barge-in rule is :class:`~agent.bargein.BargeInGate`.

States: ``ringing`` (answered, no media yet) -> ``greeting`` -> ``listening`` <-> ``thinking``
-> ``speaking`` -> ``listening`` ... -> ``ended``; :meth:`CallSession._set_state` is the only
place a state changes, and it records a :class:`StateChanged`.

Inbound frames come from pjsua2's clock thread through :attr:`CallSession.link` (the sink only
stamps and queues the bytes); outbound frames are taken from :class:`~agent.playout.Playout`.
Imports no pjsua2 (SIP lives in :mod:`agent.sip`) and no database code (records go to any
``CallLog.put``).
"""

from __future__ import annotations

import queue
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np

from agent import log
from agent.audiolink import AudioLink
from agent.bargein import BargeInGate, rms
from agent.pipeline import Stages, TurnRunner
from agent.playout import Playout
from agent.session_log import CallInfo, CallRecorder
from agent.session_turn import ReuseASR, Turn, TurnWorker
from agent.turntaking import TurnTaking
from db.records import CallLog
from dialplan.options import Profile
from models.audio import StreamResampler, pcm16_to_float
from models.llm.base import Message
from models.vad.segmenter import (
    Segmenter,
    SpeechPaused,
    SpeechResumed,
    SpeechStarted,
    Utterance,
)

State = Literal["ringing", "greeting", "listening", "thinking", "speaking", "ended"]


@dataclass(frozen=True)
class StateChanged:
    """One transition of the session's state machine."""

    old: State
    new: State
    at: float
    """Monotonic stamp."""


class CallSession(TurnTaking):
    """Conversation logic for one call; see the module docstring.

    Args:
        profile: the persona the extension resolved to.
        stages: shared models for that profile.
        call_log: where records go (``put`` never blocks).
        hangup: asks the SIP side to end the call (any thread).
        phrase: synthesised fixed phrases (greeting, goodbye), int16 at ``rate``; shared and
            cached per profile by the server.
        info: caller, extension, SIP Call-ID.
        rate: sample rate of the SIP frames (the port's clock rate).
    """

    def __init__(self, profile: Profile, stages: Stages, call_log: CallLog,
                 hangup: Callable[[], None], phrase: Callable[[str], np.ndarray],
                 info: CallInfo | None = None, rate: int = 8000):
        self.call_id = uuid.uuid4().hex[:16]
        self.profile = profile
        self.info = info or CallInfo()
        self.rate = rate
        self._rec = CallRecorder(call_log, self.call_id)
        self._hangup = hangup
        self._phrase = phrase
        asr = ReuseASR(stages.asr)
        self.runner = TurnRunner(Stages(stages.vad, asr, stages.llm, stages.tts), profile,
                                 out_rate=rate)
        a = profile.audio
        self._segmenter = Segmenter(stages.vad.new_stream(), a, model=stages.vad.model_name)
        self._to16k = StreamResampler(rate, 16000)
        self._gate = BargeInGate(a)
        self.playout = Playout(rate)
        self.link = AudioLink(sink=self._on_frame, source=self.playout.next_frame)
        self._inbox: queue.SimpleQueue = queue.SimpleQueue()
        self._closed = False
        self.state: State = "ringing"
        self.states: list[StateChanged] = []
        self.history: list[Message] = []
        self._worker = TurnWorker(self.runner, asr, self.history, self.playout, self._inbox.put)
        self.barge_ins = 0
        self.codec = ""
        self.end_reason = ""
        self._t0 = time.monotonic()
        self._answered_at: float | None = None
        self._idle_since = self._t0
        self._turn: Turn | None = None
        self._last_turn: Turn | None = None
        self._started = 0  # turns started (names worker threads)
        self._pending_start: float | None = None
        self._held: Turn | None = None  # an utterance waiting to be merged with the next one
        self._echo_suspect = False  # speech began while the agent was talking
        self._closing = ""  # goodbye queued for this end reason
        self._hangup_sent_at: float | None = None
        self._thread = threading.Thread(target=self._run, name=f"call-{self.call_id[:6]}",
                                        daemon=True)

    @property
    def turns(self) -> int:
        """Turns recorded so far."""
        return self._rec.turns

    # ---- inputs (any thread) -----------------------------------------------------------------

    def start(self) -> None:
        """Record the call and start the session thread."""
        self._rec.started(self.info, self.profile, self.runner.stages)
        self._thread.start()

    def media_active(self, codec: str) -> None:
        self._inbox.put(("media", codec))

    def dtmf(self, digit: str) -> None:
        self._inbox.put(("dtmf", digit))

    def disconnected(self, by_local: bool, code: int = 200) -> None:
        """The SIP call is gone (BYE either way, or a failure)."""
        self._inbox.put(("disconnected", by_local, code))

    def shutdown(self) -> None:
        """The process is stopping: hang up and close the records."""
        self._inbox.put(("shutdown",))

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the session thread; True once it has ended."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _on_frame(self, data: bytes) -> None:
        # pjmedia clock thread: stamp and queue, nothing else.
        if not self._closed:
            self._inbox.put((time.monotonic(), data))

    # ---- the session thread ------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while self.state != "ended":
                try:
                    item = self._inbox.get(timeout=0.05)
                except queue.Empty:
                    item = None
                if item is not None:
                    if isinstance(item[0], float):
                        self._on_audio(item[0], item[1])
                    else:
                        self._on_message(item)
                self._tick(time.monotonic())
        except Exception as e:  # a bug must end this call, not the process
            log.event("session-error", self.call_id, error=repr(e), level=40)
            self._record("error", repr(e))
            self.end_reason = self.end_reason or "error"
            self._hangup()
        finally:
            self._finish()

    def _on_message(self, msg: tuple) -> None:
        kind = msg[0]
        if kind == "media":
            self.codec = msg[1]
            self._answered_at = time.monotonic()
            self._idle_since = self._answered_at
            log.event("media", self.call_id, codec=self.codec)
            # While the greeting plays, put this profile's system prompt back in the LLM's KV
            # cache (another profile's call may have replaced it): the first turn starts warm.
            threading.Thread(target=self.runner.prime, daemon=True,
                             name=f"prime-{self.call_id}").start()
            greeting = self.profile.greeting.strip()
            if greeting:
                self._set_state("greeting")
                self._play(self._phrase(greeting))
            else:
                self._set_state("listening")
        elif kind == "dtmf":
            self._record("dtmf", msg[1])
            log.event("dtmf", self.call_id, digit=msg[1], state=self.state)
        elif kind == "disconnected":
            self.end_reason = self.end_reason or ("agent-hangup" if msg[1] else "caller-bye")
            self._cancel_turn()
            self._set_state("ended")
        elif kind == "shutdown":
            self.end_reason = self.end_reason or "shutdown"
            self._request_hangup()
        elif kind == "reply-audio":
            turn = msg[1]
            if turn is self._turn and self.state == "thinking":
                self._set_state("speaking")
        elif kind == "quick":
            if msg[1] is self._turn:
                self._open_gate(msg[1], time.monotonic())
        elif kind == "turn-done":
            self._turn_done(msg[1])

    def _on_audio(self, at: float, data: bytes) -> None:
        if self.state in ("ringing", "ended"):
            return
        level = rms(data)
        events = self._segmenter.feed(self._to16k.process(pcm16_to_float(data)))
        talking = self.state in ("greeting", "speaking") and not self._closing
        if talking and self.playout.busy:
            if self._gate.update(self._segmenter.last_probability, level, self.playout.level):
                self._barge_in(at)
        for ev in events:
            if isinstance(ev, SpeechStarted):
                self._speech_started(ev, at)
            elif isinstance(ev, SpeechPaused):
                self._speculate(ev, at)
            elif isinstance(ev, SpeechResumed):
                self._drop_speculation()
            elif isinstance(ev, Utterance):
                self._utterance(ev, at)

    def _tick(self, now: float) -> None:
        turn = self._turn
        if turn is not None and turn.hold_until is not None and not turn.gate.is_set():
            self._open_gate(turn, now)
        if self._rec.pending:
            self._rec.flush(self.playout.busy, self._t0)
        if self.state == "speaking" and not self.playout.busy and (turn is None or turn.done):
            self._turn = None
            if self._closing:
                self._request_hangup()
            else:
                self._idle_since = now
                self._set_state("listening")
        elif self.state == "greeting" and not self.playout.busy:
            self._idle_since = now
            self._set_state("listening")
        if self._answered_at is None or self._closing or self.state == "ended":
            if self._hangup_sent_at is not None and now - self._hangup_sent_at > 5.0:
                self._set_state("ended")  # no disconnect came back: do not hold the slot
            return
        lim = self.profile.limits
        if now - self._answered_at >= lim.max_call_s:
            self._goodbye("timeout")
        elif (self.state == "listening" and not self._segmenter.in_speech
              and now - self._idle_since >= lim.max_silence_s):
            self._goodbye("silence")

    # ---- actions -----------------------------------------------------------------------------

    def _barge_in(self, at: float) -> None:
        dropped = self.playout.clear()
        self._gate.reset()
        self._echo_suspect = False
        self.barge_ins += 1
        turn, self._turn = self._turn, None
        if turn is not None:
            turn.barge_in = True
            turn.cancel.set()  # still recorded (barge_in=True) when its worker finishes
        log.event("barge-in", self.call_id, state=self.state, dropped_ms=dropped * 20,
                  detect_ms=round((time.monotonic() - at) * 1000, 1))
        self._record("barge-in", f"{self.state} dropped_ms={dropped * 20}")
        self._set_state("listening")

    def _goodbye(self, reason: str) -> None:
        self._closing = reason
        self.end_reason = reason
        self._cancel_turn()
        log.event("limit", self.call_id, reason=reason)
        if self.profile.goodbye.strip():
            self._play(self._phrase(self.profile.goodbye))
        self._set_state("speaking")

    def _play(self, pcm: np.ndarray) -> None:
        self.playout.clear()
        self.playout.start_reply()
        self.playout.push(pcm)
        self.playout.end_reply()

    def _cancel_turn(self) -> None:
        for turn in (self._turn, self._held):
            if turn is not None:
                turn.cancel.set()
        self.playout.clear()

    def _request_hangup(self) -> None:
        if self._hangup_sent_at is None:
            self._hangup_sent_at = time.monotonic()
            self._cancel_turn()
            self._hangup()

    def _set_state(self, new: State) -> None:
        old = self.state
        if new == old:
            return
        change = StateChanged(old, new, time.monotonic())
        self.state = new
        self.states.append(change)
        self._gate.reset()
        self._record("state", f"{old}->{new}")
        log.event("state", self.call_id, old=old, new=new)

    def _record(self, kind: str, detail: str) -> None:
        self._rec.event(kind, detail)

    def _finish(self) -> None:
        self._closed = True
        self._cancel_turn()
        for t in (self._turn, self._held, self._last_turn):
            if t is not None:
                t.join(5.0)
        while True:  # a worker that just finished may have posted its turn-done
            try:
                item = self._inbox.get_nowait()
            except queue.Empty:
                break
            if item[0] == "turn-done":
                self._turn_done(item[1])
        self._rec.flush(self.playout.busy, self._t0, final=True)
        if self.state != "ended":
            self.state = "ended"
        self._rec.ended(self.end_reason or "error", self.barge_ins, self.codec,
                        self.playout.metrics(), time.monotonic() - self._t0)
