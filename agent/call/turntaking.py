"""Turn-taking for one call: when the caller's turn starts, ends, and when its answer is heard.

* At ``speculate_s`` of silence (:class:`SpeechPaused`) a turn starts at once, its audio held
  behind a gate; if the caller goes on (:class:`SpeechResumed`) it is dropped unheard.
* When the end-of-turn model (scored on the speculative turn) says the caller has finished,
  or the speculative turn's quick transcript is a whole sentence, the turn ends there;
  otherwise at the VAD endpoint (:class:`Utterance`). The gate opens unless
  the transcript sounds unfinished, in which case it waits up to the pause tolerance (capped by
  ``max_endpoint_wait_s`` after speech ended) for more speech.
* If the caller speaks again before hearing anything, the pending turn is cancelled and its
  utterance merged into the next one: one turn, one answer.

:class:`TurnTaking` owns the turn state (current, held and last turn, speech start, echo
suspicion: :mod:`agent.call.overlap`) and runs on the call's loop only. It changes the
call's state only through the :class:`~agent.call.state.CallState` it shares with the
session (the single transition point). Imports no SIP and no database code; ``simulate``
and ``serve`` both reach these decisions through a :class:`~agent.call.session.CallSession`,
never through a copy.
"""

from __future__ import annotations

import numpy as np

from agent import log
from agent.call.endpointing import hold_s, merge, sounds_finished, sounds_unfinished
from agent.call.overlap import EchoWatch, began_before_reply, same_speech
from agent.call.recorder import CallRecorder
from agent.call.state import CallState
from agent.call.turn import Taking, Turn, Work
from agent.call.worker import TurnWorker
from agent.turn.timeline import TurnTimeline
from dialplan.options import AudioOptions
from models.vad.segmenter import SpeechPaused, SpeechSoFar, Utterance


class TurnTaking:
    """Turn start, speculation, endpoint, gate and merge decisions for one call.

    Args:
        call_id: for log lines.
        audio: VAD and endpointing options of the profile.
        worker: runs each turn on its own thread.
        recorder: the call's records (finished turns are queued on it).
        state: the call's state machine (shared with the session, the one place a state
            changes).
    """

    def __init__(self, call_id: str, audio: AudioOptions, worker: TurnWorker,
                 recorder: CallRecorder, state: CallState):
        self.call_id = call_id
        self.audio = audio
        self.worker = worker
        self._rec = recorder
        self._call = state
        self.turn: Turn | None = None
        """The turn being answered or speculated on, until its reply has been heard."""
        self.held: Turn | None = None
        """An unanswered utterance waiting to be merged with the next one."""
        self.last: Turn | None = None
        """The newest turn started: the next one waits for its worker (shared history)."""
        self.started = 0
        self._speech_start_at: float | None = None
        self._echo = EchoWatch()  # speech that began while the agent was talking
        self._ended_early: Turn | None = None  # ended by the model, its Utterance not yet in

    # ---- segmenter events ------------------------------------------------------------------

    def speech_started(self, start_at: float) -> bool:
        """Confirmed caller speech that began at ``start_at``.

        Returns True when the reply now playing must stop (see :meth:`resumed_over_reply`).
        """
        if self.resumed_over_reply(start_at):
            return True
        state = self._call.state
        turn = self.turn
        if state in ("greeting", "speaking"):
            # Echo, a backchannel, or the caller talking over the agent: decided once the agent
            # falls silent (see _is_callers).
            self._echo.began_over_agent()
            self._speech_start_at = start_at
            return False
        if state == "thinking" and turn is not None and not turn.audible:
            # The caller resumed before hearing a reply: one turn, answer it after the rest.
            self._hold_for_merge(turn, start_at)
        self._speech_start_at = start_at
        if state == "listening" and self.audio.prefill_every_s and not (
                self.held or self.in_flight):  # the history, for a short follow-up's sake
            self.worker.prefill(None, self.call_id)  # (bench call --turns; see TurnWorker)
        return False

    def resumed_over_reply(self, start_at: float, grace_s: float = 0.0) -> bool:
        """The caller's speech from ``start_at`` began before the reply now playing did.

        A pause mid-thought that the endpoint took for the end: the agent began speaking over
        the rest of the caller's turn (none of this speech can be its echo). The turn is held
        and merged with what the caller says now, like a turn resumed before its reply was
        ready; True tells the session to stop the reply. With ``grace_s``, speech that began
        that soon after the reply counts too: too soon to be an answer to it (the caller
        hears it a line's latency late, and reacts ~0.2 s after that).
        """
        turn = self.turn
        if (self._call.state != "speaking" or turn is None or turn.cancelled
                or turn.barge_in or not began_before_reply(turn, start_at - grace_s)):
            return False
        self._echo.clear()
        self._hold_for_merge(turn, start_at, after="reply-start")
        self._speech_start_at = start_at
        return True

    def _hold_for_merge(self, turn: Turn, start_at: float, **why: object) -> None:
        """Cancel ``turn`` and hold it: the caller's next utterance is merged into it (one turn)."""
        turn.take(Taking.MERGED)
        self.worker.cancel(turn)
        self._unrecord(turn)
        self.held, self.turn = turn, None
        log.event("turn-resumed", self.call_id, **why, pause_ms=round(
            (start_at - (turn.timeline.speech_end_at or start_at)) * 1000))
        self._call.set("listening")

    def _unrecord(self, turn: Turn) -> None:
        """A turn merged into the next one is recorded as that one, not on its own too.

        Its worker may have finished already (a short reply, still playing out when the
        caller's resumed speech was confirmed), which queued its record.
        """
        self._rec.unqueue(turn)

    def speech_paused(self, ev: SpeechPaused, end_at: float, closing: bool) -> None:
        """Silence began: run the turn now, its audio held behind the gate until the endpoint."""
        if self._echo.suspect and self._echo.callers(end_at):
            self._echo.clear()
        if self._call.state != "listening" or closing or self._echo.suspect:
            return
        timeline = TurnTimeline(speech_start_at=self._speech_start_at, speech_end_at=end_at)
        self._new_turn(ev, timeline)

    def caller_speaking(self, now: bool) -> None:
        """Told every inbound frame: the caller is inside an utterance (``now``) or not.

        Other calls' turns starting meanwhile will compete with the one this caller speaks.
        """
        self.worker.speaking(now)

    def speech_so_far(self, ev: SpeechSoFar) -> None:
        """The caller is mid-utterance: their words so far go into the LLM's cache.

        Not while a turn of this call is in flight or held for a merge: the prompt would not
        be the words the next turn asks.
        """
        if self._call.state == "listening" and self.held is None and not self.in_flight:
            self.worker.prefill(ev.audio, self.call_id)

    def speech_resumed(self) -> None:
        """The caller went on within the hangover: the speculation is dropped unheard."""
        turn = self.turn
        if turn is None:
            return
        if not turn.endpointed:
            self.worker.cancel(turn)  # the reply leaves the history alone: its gate never opened
            self.held, self.turn = turn.merged_from, None
        elif turn.early_end and not turn.audible and not turn.cancelled:
            # The end-of-turn model ended it too soon. The segmenter's utterance goes on (it
            # will hold this audio too), so only earlier held pieces stay held.
            turn.take(Taking.MERGED)
            self.worker.cancel(turn)
            self._unrecord(turn)
            self.held, self.turn = turn.merged_from, None
            log.event("turn-resumed", self.call_id, after="end-of-turn")
            self._call.set("listening")

    def end_scored(self, turn: Turn, now: float) -> None:
        """The end-of-turn model scored a speculative turn: a finished one ends here."""
        p = turn.end_probability
        if p is None or not self._speculating(turn):
            return
        if p < self.audio.end_of_turn_threshold:  # the hangover decides; say why it waits
            log.event("end-of-turn-wait", self.call_id, probability=round(p, 3))
            return
        self._end_early(turn, now, by="model", probability=round(p, 3))

    def _speculating(self, turn: Turn) -> bool:
        """``turn`` is the call's live speculative turn: not yet ended, cancelled or answered."""
        return (turn is self.turn and not turn.endpointed and not turn.cancelled
                and self._call.state == "listening")

    def _end_early(self, turn: Turn, now: float, **why) -> None:
        """End a speculative turn at the pause, before the VAD hangover runs out."""
        turn.take(Taking.ENDPOINTED)
        turn.early_end = True
        turn.timeline.endpoint_at = now
        self._ended_early = turn  # its segment's Utterance is still to come: not a new turn
        log.event("end-of-turn", self.call_id, **why,
                  silence_ms=round((now - (turn.timeline.speech_end_at or now)) * 1000))
        self._call.set("thinking")
        self._open_gate(turn, now)
        if turn.done:  # its worker finished before the endpoint (no words, an error)
            self._finished(turn)

    def utterance(self, utt: Utterance, end_at: float, at: float, closing: bool) -> None:
        """The VAD endpoint at ``at`` (speech ended at ``end_at``): commit the turn."""
        if self._echo.suspect:
            self._echo.clear()
            if not self._echo.callers(end_at):
                # Over the agent's audio from start to end, too quiet or short to barge in:
                # echo or a backchannel ("uh-huh"). Not answered, but never dropped unseen.
                log.event("speech-ignored", self.call_id, reason="during-reply",
                          duration_s=round(utt.duration_s, 2))
                self._rec.event("speech-ignored",
                                f"during-reply duration_s={utt.duration_s:.2f}")
                return
            log.event("overlap-kept", self.call_id, duration_s=round(utt.duration_s, 2),
                      after_agent_ms=self._echo.after_agent_ms(end_at))
        early, self._ended_early = self._ended_early, None
        if early is not None and not early.cancelled and same_speech(early, utt):
            return  # the end-of-turn model ended this turn already; the hangover agrees
        turn = self.turn
        if self._call.state not in ("listening", "thinking") or closing:
            if not closing:
                self._rec.event("speech-ignored", f"state={self._call.state} "
                                f"duration_s={utt.duration_s:.2f}")
            return
        if turn is not None and (turn.endpointed or turn.cancelled):
            turn = None  # an earlier turn (answered or cut): this utterance starts a new one
        if turn is not None:
            if same_speech(turn, utt):
                turn.timeline.endpoint_at = at  # the speculation holds: same audio
            else:  # cut by max_utterance_s or similar: start over on the real utterance
                self.speech_resumed()
                turn = None
        if turn is None:
            timeline = TurnTimeline(speech_start_at=self._speech_start_at, endpoint_at=at,
                                    speech_end_at=end_at)
            turn = self._new_turn(utt, timeline)
        turn.take(Taking.ENDPOINTED)
        self._call.set("thinking")
        self._open_gate(turn, at)
        if turn.done:  # its worker finished before the endpoint (no words, an error)
            self._finished(turn)

    def typed(self, words: str, now: float) -> bool:
        """Keypad digits as the caller's turn; False while the agent speaks or thinks."""
        if self._call.state != "listening" or self.in_flight or self.held is not None:
            return False
        empty = Utterance(audio=np.zeros(0, np.float32), start_s=0.0, end_s=0.0,
                          endpoint_s=0.0, vad=None)
        timeline = TurnTimeline(speech_start_at=now, speech_end_at=now, endpoint_at=now)
        turn = self._new_turn(empty, timeline, typed=words)
        turn.take(Taking.ENDPOINTED)
        self._call.set("thinking")
        self._open_gate(turn, now)
        return True

    # ---- worker messages -------------------------------------------------------------------

    def transcribed(self, turn: Turn, now: float) -> None:
        """The quick transcript is in; a speculative turn whose words are a whole sentence ends.

        The end-of-turn model may have said "not finished": the words overrule it.
        """
        if turn is not self.turn:
            return
        if (self.audio.end_of_turn_words and self._speculating(turn) and turn.transcript
                and sounds_finished(turn.transcript)):
            self._end_early(turn, now, by="words")
            return
        self._open_gate(turn, now)

    def reply_audio(self, turn: Turn) -> None:
        if turn is self.turn and self._call.state == "thinking":
            self._call.set("speaking")

    def turn_done(self, turn: Turn) -> str:
        """The worker finished; returns its error (empty if none) for the session to record."""
        turn.work_to(Work.DONE)
        if turn.merged or not turn.endpointed:
            return turn.error  # superseded by a merged turn, or a speculation talked over
        self._finished(turn)
        return turn.error

    # ---- session actions -------------------------------------------------------------------

    def agent_quiet(self, at: float) -> None:
        """The agent's greeting or reply has finished playing (not cut by a barge-in)."""
        self._echo.agent_quiet(at)

    def tick(self, now: float, caller_sounding: bool = False) -> None:
        """Open a held gate whose pause-tolerance wait has run out.

        Not while the caller is sounding again (speech the VAD has heard but not yet
        confirmed): a caller who resumed at 0.7 s is confirmed only ~0.3 s later, after the
        0.9 s wait, and the reply then began over the rest of their turn.
        """
        if caller_sounding:
            return
        turn = self.turn
        if turn is not None and turn.hold_until is not None and not turn.gate_open:
            self._open_gate(turn, now)

    def interrupt(self) -> None:
        """Barge-in: the turn being heard is cut (still recorded when its worker finishes)."""
        turn, self.turn = self.turn, None
        self._echo.clear()
        if turn is not None:
            turn.barge_in = True
            self.worker.cancel(turn)

    def cancel_all(self) -> None:
        """The call ends: its turns stop, and any prefill of its words.

        A prefill left running would hold an LLM sequence until the CPU is next idle.
        """
        self.worker.close()
        for turn in (self.turn, self.held):
            if turn is not None:
                self.worker.cancel(turn)

    def tick_work(self, now: float) -> None:
        """Deadlines of the turns' work (a failed turn waiting to apologise)."""
        self.worker.tick(now, (self.turn, self.held, self.last))

    @property
    def in_flight(self) -> bool:
        """Model work (ASR, LLM or TTS) is in flight or pending for one of this call's turns."""
        return any(t is not None and t.running for t in (self.turn, self.held, self.last))

    @property
    def reply_pending(self) -> bool:
        """A committed turn has not finished producing its reply."""
        return self.turn is not None and not self.turn.done

    # ---- internals -------------------------------------------------------------------------

    def _new_turn(self, utt: Utterance | SpeechPaused, timeline: TurnTimeline,
                  typed: str | None = None) -> Turn:
        old = self.turn
        if old is not None and not old.done and not old.audible and not old.cancelled:
            # Superseded before it was heard (e.g. ended early by the model, then its segment
            # went on): cancel it, or its worker waits at a gate nobody opens any more and
            # every later turn of the call waits for that worker.
            old.take(Taking.MERGED)
            self.worker.cancel(old)
            log.event("turn-superseded", self.call_id, index=old.index)
        held, self.held = self.held, None
        if held is not None:
            utt = merge(held.utterance, utt)
            timeline.speech_start_at = held.timeline.speech_start_at
        turn = Turn(index=self.started, utterance=utt, timeline=timeline,
                    history_len=len(self.worker.history), after=held or self.last,
                    merged_from=held, typed=typed)
        self.started += 1
        self.turn = self.last = turn
        self.worker.start(turn, self.call_id)
        return turn

    def _open_gate(self, turn: Turn, now: float) -> None:
        """Let the turn be heard once endpointed, unless its words sound unfinished."""
        if (turn.gate_open or turn.cancelled or not turn.endpointed
                or turn.transcript is None):
            return
        if sounds_unfinished(turn.transcript):
            if turn.hold_until is None:
                turn.hold_until = turn.timeline.speech_end_at + hold_s(self.audio)
            if now < turn.hold_until:
                return
            turn.timeline.endpoint_at = now  # the endpoint is the end of the held wait
        self.worker.open_gate(turn)

    def _finished(self, turn: Turn) -> None:
        """An endpointed turn's worker is done: settle the state, queue its record."""
        self._settle(turn)
        if turn.result is not None and turn.result.no_words:
            log.event("speech-empty", self.call_id, duration_s=round(
                turn.utterance.duration_s, 2))
        # Every endpointed turn is recorded, answered or not: a caller is never left in
        # silence without a record of why (no words, an error, the call ending first...).
        self._rec.queue(turn)

    def _settle(self, turn: Turn) -> None:
        if turn is self.turn and self._call.state == "thinking":
            self.turn = None if not turn.audible else turn
            self._call.set("speaking" if turn.audible else "listening")

