"""Turn-taking for a :class:`~agent.session.CallSession`: when a turn starts, ends, is heard.

* At ``speculate_ms`` of silence (:class:`SpeechPaused`) a turn starts at once, its audio held
  behind a gate; if the caller goes on (:class:`SpeechResumed`) it is dropped unheard.
* At the VAD endpoint (:class:`Utterance`) the turn commits; the gate opens unless the quick
  transcript sounds unfinished, in which case it waits up to the pause tolerance (capped by
  ``max_endpoint_wait_ms`` after speech ended) for more speech.
* If the caller speaks again before hearing anything, the pending turn is cancelled and its
  utterance merged into the next one: one turn, one answer.

A mixin: it reads and writes the session's turn state (``_turn``, ``_held``, ``_last_turn``,
``_pending_start``, ``_worker``, ``_rec``, ``state``...) and calls its ``_set_state``; it holds
no state of its own. Imports no SIP and no database code.
"""

from __future__ import annotations

import time

from agent import log
from agent.endpointing import hold_s, merge, sounds_unfinished
from agent.session_turn import Turn
from agent.turn import TurnTimeline
from models.vad.segmenter import SpeechPaused, SpeechStarted, Utterance


class TurnTaking:
    """Turn start, speculation, endpoint, gate and merge decisions (session thread only)."""

    def _speech_started(self, ev: SpeechStarted, at: float) -> None:
        self._idle_since = at
        if self.state in ("greeting", "speaking"):
            self._echo_suspect = True
            return
        turn = self._turn
        if self.state == "thinking" and turn is not None and not turn.audible:
            # The caller resumed before hearing a reply: one turn, answer it after the rest.
            turn.merged = True
            turn.cancel.set()
            self._held, self._turn = turn, None
            log.event("turn-resumed", self.call_id, pause_ms=round(
                (at - (turn.timeline.speech_end_at or at)) * 1000))
            self._set_state("listening")
        self._pending_start = at - (ev.at_s - ev.start_s)

    def _speculate(self, ev: SpeechPaused, at: float) -> None:
        """Silence began: run the turn now, its audio held behind the gate until the endpoint."""
        if self.state != "listening" or self._closing or self._echo_suspect:
            return
        timeline = TurnTimeline(speech_start_at=self._pending_start,
                                speech_end_at=at - (ev.at_s - ev.end_s))
        self._new_turn(ev, timeline)

    def _drop_speculation(self) -> None:
        turn = self._turn
        if turn is not None and not turn.endpointed:
            turn.cancel.set()  # the runner leaves the history alone: its gate never opened
            self._held, self._turn = turn.merged_from, None

    def _utterance(self, utt: Utterance, at: float) -> None:
        if self._echo_suspect:
            self._echo_suspect = False
            log.event("speech-ignored", self.call_id, reason="during-reply",
                      duration_s=round(utt.duration_s, 2))
            return
        if self.state not in ("listening", "thinking") or self._closing:
            return
        now = time.monotonic()
        turn = self._turn
        if turn is not None and (turn.endpointed or turn.cancel.is_set()):
            turn = None  # an earlier turn (answered or cut): this utterance starts a new one
        if turn is not None and not turn.endpointed:
            held = turn.merged_from.utterance.audio if turn.merged_from else ()
            if len(turn.utterance.audio) == len(held) + len(utt.audio):
                turn.timeline.endpoint_at = now  # the speculation holds: same audio
            else:  # cut by max_utterance_s or similar: start over on the real utterance
                self._drop_speculation()
                turn = None
        if turn is None:
            timeline = TurnTimeline(speech_start_at=self._pending_start, endpoint_at=now,
                                    speech_end_at=at - (utt.endpoint_s - utt.end_s))
            turn = self._new_turn(utt, timeline)
        turn.endpointed = True
        self._set_state("thinking")
        self._open_gate(turn, now)
        if turn.done:
            self._settle(turn)

    def _new_turn(self, utt: Utterance | SpeechPaused, timeline: TurnTimeline) -> Turn:
        held, self._held = self._held, None
        if held is not None:
            utt = merge(held.utterance, utt)
            timeline.speech_start_at = held.timeline.speech_start_at
        turn = Turn(index=self._started, utterance=utt, timeline=timeline,
                    history_len=len(self.history), after=held or self._last_turn,
                    merged_from=held)
        self._started += 1
        self._turn = self._last_turn = turn
        self._worker.start(turn, self.call_id)
        return turn

    def _open_gate(self, turn: Turn, now: float) -> None:
        """Let the turn be heard once endpointed, unless its words sound unfinished."""
        if turn.gate.is_set() or turn.cancel.is_set() or not turn.endpointed or turn.quick is None:
            return
        if sounds_unfinished(turn.quick):
            if turn.hold_until is None:
                turn.hold_until = turn.timeline.speech_end_at + hold_s(self.profile.audio)
            if now < turn.hold_until:
                return
            turn.timeline.endpoint_at = now  # the endpoint is the end of the held wait
        turn.gate.set()

    def _turn_done(self, turn: Turn) -> None:
        turn.done = True
        if turn.error:
            self._record("error", turn.error)
            log.event("turn-error", self.call_id, error=turn.error, level=40)
        if turn.merged or not turn.endpointed:
            return  # superseded by a merged turn, or a speculation the caller talked over
        self._settle(turn)
        if turn.result is None or not turn.result.transcript:
            if turn.result is not None:
                log.event("speech-empty", self.call_id, duration_s=round(
                    turn.utterance.duration_s, 2))
            return
        if turn.gate.is_set():
            self._rec.pending.append(turn)

    def _settle(self, turn: Turn) -> None:
        if turn is self._turn and self.state == "thinking":
            self._turn = None if not turn.audible else turn
            self._set_state("speaking" if turn.audible else "listening")
