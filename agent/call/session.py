"""One phone call's conversation: an explicit state machine over audio frames and turns.

A :class:`CallSession` is an actor: one loop, on one thread, owns every piece of the call's and
its turns' state (inbound audio path, history, playout, turns) and handles one message at a
time from its inbox. Model work never runs there: it is submitted to the process scheduler
(:mod:`agent.call.jobs`) and its completion comes back as a message, so there are no turn
threads, no locks on call state and no polling. The session connects the parts of a call and
implements none: the caller's audio on its way in (resampler, VAD segmenter, barge-in gate) is
:class:`~agent.call.inbound.Inbound`'s, turn-taking :class:`~agent.call.turntaking.TurnTaking`'s,
a turn's work :class:`~agent.call.worker.TurnWorker`'s, what the caller's silence calls for
:class:`~agent.call.idle.Quiet`'s, records :class:`~agent.call.recorder.CallRecorder`'s, its
end (goodbye, hangup, last records) :class:`~agent.call.closing.CallClosing`'s.
:class:`~agent.call.state.CallState` is the only place a state changes. Frames come through
:attr:`CallSession.link` (pjsua2's clock thread, or :class:`~agent.simulate.SimulatedLine`) and
go out of :class:`~agent.call.playout.Playout`.
Imports no pjsua2 and no database code.
"""
from __future__ import annotations

import queue
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import Future

import numpy as np

from agent import log
from agent.call.actions import CallActions, Line
from agent.call.amd import Screening
from agent.call.bargein import PausedReply
from agent.call.clock import REAL_TIME, Clock
from agent.call.closing import CallClosing
from agent.call.consult import ConsultKit
from agent.call.idle import Quiet
from agent.call.inbound import Inbound
from agent.call.inputs import CallInputs
from agent.call.jobs import CallJobs
from agent.call.legs import ConsultLine
from agent.call.live import Publish, TurnFeed
from agent.call.messages import (
    Disconnected,
    Dtmf,
    EndOfTurnScored,
    FirstFrameOut,
    Frame,
    Held,
    JobDone,
    LegEvent,
    LegFrame,
    LineDead,
    MediaActive,
    Message,
    ReplyAudio,
    Shutdown,
    Tick,
    Transcribed,
    TransferProgress,
    TurnDone,
)
from agent.call.pacing import Pacing
from agent.call.playout import Playout
from agent.call.recorder import CallInfo, CallRecorder
from agent.call.recording import recording_for
from agent.call.state import CallState, State, StateChanged
from agent.call.turntaking import TurnTaking
from agent.call.worker import TurnWorker
from agent.sip.audiolink import AudioLink
from agent.turn.load import LoadPolicy
from agent.turn.runner import Stages, TurnRunner
from db.records import CallLog
from dialplan.profile import Profile
from models.llm.base import Message as ChatMessage
from models.priority import Priority


class CallSession(CallInputs, CallClosing):
    """Conversation logic for one call; see the module docstring.

    Args:
        profile: the persona the extension resolved to.
        stages: shared models for that profile.
        call_log: where records go (``put`` never blocks).
        hangup: asks the line to end the call (any thread).
        phrase: synthesised fixed phrases (greeting, goodbye), int16 at ``rate``; shared and
            cached per profile by the server.
        info: caller, extension, SIP Call-ID, source.
        rate: sample rate of the line's frames (the port's clock rate).
        clock: the call's clock (a simulation's may skip ahead).
        under_load: a cheaper profile and its models, for turns under load.
        load: the process's rules under load, shared by its calls; its scheduler runs the
            call's model work (by default a policy of the call's own, on the scheduler its
            models were loaded with).
        transfer: sends REFER to a URI on this call's line (None: the line cannot).
        send_dtmf: sends keypad digits down the line (None: the line cannot).
        media_dir: where callers' messages are written.
        live: publishes the turns' words as they happen, to the live console (None: no console).
        consult: places and joins an attended transfer's call to its target (None: the line
            cannot; such transfers are made blind).
    """

    def __init__(self, profile: Profile, stages: Stages, call_log: CallLog,
                 hangup: Callable[[], None], phrase: Callable[[str], np.ndarray],
                 info: CallInfo | None = None, rate: int = 8000, clock: Clock = REAL_TIME,
                 under_load: tuple[Profile, Stages] | None = None,
                 load: LoadPolicy | None = None,
                 transfer: Callable[[str], None] | None = None,
                 send_dtmf: Callable[[str], None] | None = None, media_dir: str = "recordings",
                 live: Publish | None = None, consult: ConsultLine | None = None):
        self.call_id = uuid.uuid4().hex[:16]
        self.profile = profile
        self.info = info or CallInfo()
        self.rate = rate
        self.clock = clock
        self._rec = CallRecorder(call_log, self.call_id)
        self.live = TurnFeed(live, self.call_id) if live is not None else None
        self._hangup = hangup
        self._phrase = phrase
        self.runner = TurnRunner(stages, profile, out_rate=rate, clock=clock.now, phrases=phrase)
        self.playout = Playout(rate, clock=clock.now)
        self.link = AudioLink(sink=self._on_frame, source=self.playout.next_frame)
        self.recording = recording_for(profile.recording, media_dir, self.call_id, rate,
                                       clock=clock.now, started_at=self.info.offered_at)
        if self.recording is not None:
            self.link = self.recording.tap(self.link)
        self._inbox: queue.SimpleQueue[Message] = queue.SimpleQueue()
        self._closed = False
        self._call = CallState(clock.now, self._on_state)
        self.history: list[ChatMessage] = []
        self.load = load or LoadPolicy(stages.llm.scheduler)
        self.jobs = CallJobs(self.load.scheduler, self._inbox.put)
        self.actions = CallActions(
            profile, self._rec, Line(say=self._say, hangup=self._end_by, typed=self._typed,
                                     transfer=transfer, send_dtmf=send_dtmf),
            self.history, media_dir, caller=self.info.caller_uri, consult=consult and ConsultKit(
                consult, profile, stages, self.jobs, phrase, self.playout, self.history,
                self.leg, self._inbox.put, clock.now, rate, self.call_id))
        worker = TurnWorker(self.runner, self.history, self.playout, self._inbox.put, self.jobs,
                            clock.now, self.load, under_load=under_load,
                            keep=self.actions.keep)
        self.turntaking = TurnTaking(self.call_id, profile.audio, worker, self._rec, self._call)
        self.paused = PausedReply(self.call_id, profile.audio, profile.asr.min_avg_logprob,
                                  self.playout, stages.asr.transcribe, self.jobs.submit,
                                  commit=self._interrupt, record=self._rec.event)
        self.inbound = Inbound(profile.audio, stages.vad, rate, self.turntaking, self.playout,
                               on_speech=self._caller_spoke, on_barge_in=self._barge_in,
                               paused=self.paused)
        self.barge_ins = 0
        self.codec = ""
        self.end_reason = ""
        self._t0 = clock.now()
        self.quiet = Quiet(profile.limits, self._t0, self._rec)
        self.pacing = Pacing(self.call_id, profile, self.quiet, self._rec, self.playout, phrase,
                             wake=lambda: self._inbox.put(Tick()))
        self._priming: Future | None = None
        self.screening: Screening | None = None  # an outbound call's machine detection
        self._frames_done = 0
        self._progress = threading.Condition()
        self._thread = threading.Thread(target=self._run, name=f"call-{self.call_id[:6]}",
                                        daemon=True)

    @property
    def state(self) -> State:
        return self._call.state

    @property
    def states(self) -> list[StateChanged]:
        """Every transition so far."""
        return self._call.changes

    @property
    def turns(self) -> int:
        """Turns recorded so far."""
        return self._rec.turns

    @property
    def computing(self) -> bool:
        """Model work for this call is in flight (a turn's, or the LLM priming)."""
        priming = self._priming is not None and not self._priming.done()
        return priming or self.turntaking.in_flight

    @property
    def idle(self) -> bool:
        """Listening, nothing computing, nothing playing: the caller has the floor."""
        return (self.state == "listening" and not self.computing and not self.playout.busy
                and not self.inbound.in_speech and not self._rec.pending)

    # ---- inputs (any thread): see CallInputs ---------------------------------------------

    def start(self) -> None:
        """Record the call and start the call's loop."""
        self._rec.started(self.info, self.profile, self.runner.stages)
        self._thread.start()

    # ---- the session thread ------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while self.state != "ended":
                self._on_message(self._inbox.get())
                self._tick(self.clock.now())
        except Exception as e:  # a bug must end this call, not the process
            log.event("session-error", self.call_id, error=repr(e), level=40)
            self._rec.event("error", repr(e))
            self.end_reason = self.end_reason or "error"
            self._hangup()
        finally:
            self._finish()

    def _on_message(self, msg: Message) -> None:
        match msg:
            case Frame(at, data):
                self._on_audio(at, data)
                if self.recording is not None and (why := self.recording.write_pending()):
                    self._rec.event("recording-stopped", why)
                with self._progress:
                    self._frames_done += 1
                    self._progress.notify_all()
            case MediaActive(codec):
                self._media(codec)
            case Dtmf(digit):
                self._rec.event("dtmf", digit)
                log.event("dtmf", self.call_id, digit=digit, state=self.state)
                self.actions.dtmf(digit, self.clock.now())
            case LegFrame() | LegEvent():
                self.actions.leg(msg, self.clock.now())
            case TransferProgress(code, reason, final):
                self.actions.transfer_status(code, reason, final, self.clock.now())
            case Disconnected(by_local, code):
                unanswered = self.info.direction == "outbound" and self.pacing.answered_at is None
                self.end_reason = self.end_reason or (
                    "agent-hangup" if by_local else f"unanswered-{code}" if unanswered
                    else "caller-bye")
                self._cancel_turns()
                self._set_state("ended")
            case LineDead(reason):
                self.end_reason = self.end_reason or reason
                log.event("line-dead", self.call_id, reason=reason)
                self._rec.event("line-dead", reason)
                self._request_hangup()
            case Held(held):
                self.quiet.sip_hold(held, self.clock.now())
                self._rec.event("hold" if held else "resume", "")
            case Shutdown(reason):
                self.end_reason = self.end_reason or reason
                self._request_hangup()
            case JobDone():
                self.jobs.done(msg)
            case Tick():
                pass  # the checks after every message
            case ReplyAudio(turn):
                self.turntaking.reply_audio(turn)
            case FirstFrameOut(turn, at):
                turn.timeline.first_frame_out_at = at
            case EndOfTurnScored(turn):
                self.turntaking.end_scored(turn, self.clock.now())
            case Transcribed(turn):
                self.turntaking.transcribed(turn, self.clock.now())
            case TurnDone(turn):
                self._turn_done(turn)
        if self.live is not None and isinstance(msg, (Transcribed, ReplyAudio, TurnDone)):
            self.live.update(msg.turn)

    def _media(self, codec: str) -> None:
        self.codec = codec
        self.pacing.answered(self.clock.now())
        log.event("media", self.call_id, codec=codec)
        # While the greeting plays, put this profile's system prompt back in the LLM's KV
        # cache (another profile's call may have replaced it): the first turn starts warm.
        self._priming = self.jobs.submit(self.runner.prime, stage="llm",
                                         priority=Priority.BACKGROUND, then=self._primed)
        if self.profile.amd and self.info.direction == "outbound":
            stages = self.runner.stages
            self.screening = Screening(self.call_id, stages.vad, stages.asr.transcribe,
                                       self.rate, self.profile.amd_max_s, self.jobs.submit,
                                       self._rec.event)
            self._set_state("screening")  # greet only a person (or when unsure)
        else:
            self._greet()

    def _greet(self) -> None:
        greeting = self.profile.greeting.strip()
        if greeting:
            self._set_state("greeting")
            self._play(self._phrase(greeting))
        else:
            self._set_state("listening")

    def _primed(self, f: Future) -> None:
        if f.exception() is not None:  # the first turn reads its prompt itself
            log.event("prime-failed", self.call_id, error=repr(f.exception()))

    def _on_audio(self, at: float, data: bytes) -> None:
        if self.state in ("ringing", "ended") or self.actions.holding:
            return  # (holding: an attended transfer has the caller's audio)
        if self.state == "screening" and self.screening is not None:
            verdict = self.screening.feed(data)
            if verdict == "human":
                self._greet()
            elif verdict == "voicemail":
                self._goodbye("voicemail", self.profile.voicemail_message)
            return
        talking = self.state in ("greeting", "speaking") and not self.pacing.closing
        self.inbound.feed(at, data, talking, closing=bool(self.pacing.closing))

    def _caller_spoke(self, at: float) -> None:
        self.quiet.caller_spoke(at, over_agent=self.state in ("greeting", "speaking"))

    def _turn_done(self, turn) -> None:
        error = self.turntaking.turn_done(turn)
        if not turn.merged and turn.endpointed:
            self.actions.after_turn(turn)
            if turn.result is not None and turn.result.hold and turn.gate_open:
                self.quiet.hold(self.clock.now(), turn.result.transcript)
        if error:
            self._rec.event("error", error)
            log.event("turn-error", self.call_id, error=error, level=40)

    def _tick(self, now: float) -> None:
        self.turntaking.tick(now, self.inbound.speaking)
        self.turntaking.tick_work(now)
        self.pacing.filler(now, self.turntaking.turn, thinking=self.state == "thinking")
        if self._rec.pending:
            self._rec.flush(self.playout.busy, self._t0)
        self._act(now)
        if self.state == "speaking" and not self.playout.busy and not self.turntaking.reply_pending:
            self.turntaking.turn = None
            if self.pacing.closing:
                self._request_hangup()
            else:
                self.quiet.agent_done(now)
                self.turntaking.agent_quiet(self.playout.last_audio_at or now)
                self._set_state("listening")
        elif self.state == "greeting" and not self.playout.busy:
            self.quiet.agent_done(now)
            self.turntaking.agent_quiet(self.playout.last_audio_at or now)
            self._set_state("listening")
        listening = (self.state == "listening" and not self.inbound.in_speech
                     and not self.actions.transferring)  # a transfer's wait is not the caller's
        match self.pacing.due(now, self.state == "ended", listening):
            case "ended":
                self._set_state("ended")
            case "timeout" | "silence" as reason:
                self._goodbye(reason)
            case "prompt":
                self._say(self.profile.still_there)

    # ---- actions -----------------------------------------------------------------------------

    def _act(self, now: float) -> None:
        """The call's actions: deadlines, and the one announced once the agent fell silent."""
        if self.pacing.closing or self.state in ("ringing", "ended"):
            return
        self.actions.tick(now, self.inbound.in_speech, self.turntaking.in_flight)
        if (self.actions.pending is not None and not self.playout.busy
                and self.state in ("listening", "speaking")
                and not self.turntaking.reply_pending):
            self.actions.heard(now)

    def _say(self, text: str) -> None:
        """A fixed phrase of the profile, now (what an action announces or reports)."""
        log.event("say", self.call_id, text=text)
        self._play(self._phrase(text))
        self._set_state("speaking")

    def _typed(self, words: str) -> bool:
        return self.turntaking.typed(words, self.clock.now())

    def _barge_in(self, at: float) -> None:
        """The caller talks over the agent: the reply stops, kept until its words are known."""
        log.event("barge-in", self.call_id, state=self.state,
                  detect_ms=round((self.clock.now() - at) * 1000, 1))
        if not self.paused.pause(at):
            self._interrupt(at)

    def _interrupt(self, at: float) -> None:
        """The barge-in stands: the reply is dropped, the caller has the floor."""
        dropped = self.inbound.stop_reply()
        self.barge_ins += 1
        self.turntaking.interrupt()
        self._rec.event("barge-in", f"{self.state} dropped_ms={dropped * 20}")
        self._set_state("listening")

    def _play(self, pcm: np.ndarray) -> None:
        self.playout.clear()
        self.playout.start_reply()
        self.playout.push(pcm)
        self.playout.end_reply()

    def _set_state(self, new: State) -> None:
        self._call.set(new)

    def _on_state(self, change: StateChanged) -> None:
        self.inbound.reset_gate()
        if self.live is not None and change.new == "thinking":  # a turn ended: its words?
            self.live.update(self.turntaking.turn)
        self._rec.event("state", f"{change.old}->{change.new}")
        log.event("state", self.call_id, old=change.old, new=change.new)
