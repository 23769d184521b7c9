"""Turns in flight inside a call: their data, and the worker thread that answers each one.

The call's turn-taking (:mod:`agent.call.turntaking`) decides *when* a turn runs and when its
audio may be heard (the gate); this module runs it: the end-of-turn model on a speculative turn,
then ASR (each result goes back to the session at once: it decides from them whether the caller
has finished), then
:class:`~agent.turn.runner.TurnRunner` with that transcript, on a worker thread. Imports no SIP
and no database code.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from agent.call.messages import EndOfTurnScored, Message, ReplyAudio, Transcribed, TurnDone
from agent.call.playout import Playout
from agent.turn.backlog import BACKLOG, Backlog
from agent.turn.prefill import prefill_words
from agent.turn.runner import Stages, TurnResult, TurnRunner
from db import log
from db.timeline import TurnTimeline
from dialplan.options import Profile
from models.llm.base import Message as ChatMessage
from models.priority import JobCancelled, Priority, cancel_on, priority
from models.scheduler import SCHEDULER
from models.vad.segmenter import SpeechPaused, Utterance

APOLOGY_WAIT_S = 3.0
"""How long a failed speculative turn waits for its endpoint before giving up on apologising."""
UNDER_LOAD_WINDOW_S = 30.0
"""How far back the scheduler's measured waits count for ``limits.under_load_after_s``."""


def measured_wait(window_s: float = UNDER_LOAD_WINDOW_S) -> float:
    """The process's measured load: p90 seconds first-audio work waited for the CPU lately.

    Over the last ``window_s``: under-load profiles use the default, admission control its own.
    """
    return SCHEDULER.recent_wait(Priority.FIRST_AUDIO, window_s)


@dataclass(eq=False)
class Turn:
    """A caller utterance being answered.

    Two threads touch it, each its own fields. The session thread (turn-taking) owns
    ``endpointed``, ``hold_until``, ``merged``, ``barge_in`` and the two events it sets
    (``cancel``, ``gate``). The worker writes ``transcript``, ``result``, ``error`` and
    ``audible``, each write followed by a message to the session, which reads them only after
    that message.
    """

    index: int
    utterance: Utterance | SpeechPaused
    timeline: TurnTimeline
    history_len: int
    """Length of the call's history before this turn (rolled back to it if merged away); set
    again by its worker once the turns before it have finished."""
    after: Turn | None = None
    """A previous turn whose worker must finish first (it may still touch the history)."""
    merged_from: Turn | None = None
    """The earlier, unanswered turn whose utterance this one continues."""
    # -- session thread
    endpointed: bool = False
    """The VAD hangover has elapsed; False while the turn runs speculatively."""
    hold_until: float | None = None
    """Clock deadline of the pause-tolerance wait, once one started."""
    merged: bool = False
    """Cancelled because the caller went on talking: its utterance joins the next one."""
    barge_in: bool = False
    filled: bool = False
    """The session said the filler phrase while this turn's answer was late."""
    cancel: threading.Event = field(default_factory=threading.Event)
    gate: threading.Event = field(default_factory=threading.Event)
    """Opened by the session once the turn is endpointed and does not sound unfinished."""
    early_end: bool = False
    """Endpointed by the end-of-turn model, before the VAD hangover ran out."""
    # -- worker thread
    end_probability: float | None = None
    """The end-of-turn model's verdict on a speculative turn."""
    transcript: str | None = None
    """Known right after ASR, before the LLM starts."""
    result: TurnResult | None = None
    error: str = ""
    audible: bool = False
    """Reply audio has been queued for playout."""
    done: bool = False
    """Set by the session when the worker's TurnDone arrives."""
    under_load: str = ""
    """The cheaper profile that answered this turn because the agent was overloaded."""
    ticket: int | None = None
    """Its place in the process's backlog until the caller hears it (or it ends)."""
    thread: threading.Thread | None = None

    def join(self, timeout: float | None = None) -> None:
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join(timeout)

    @property
    def running(self) -> bool:
        """Its worker thread is still working."""
        return self.thread is not None and self.thread.is_alive()


class TurnWorker:
    """Runs one call's turns, each on its own thread, through :class:`TurnRunner`.

    Args:
        runner: the call's turn runner.
        history: the call's chat history (appended by the runner once a gate opened).
        playout: where reply audio goes.
        post: sends messages to the session thread.
        under_load: the profile's cheaper ``under_load`` profile and its models, if any.
        waiting: the measured load (seconds first-audio work waits for the CPU).
        backlog: the process's turns not yet heard answered (every call's worker shares it).
    """

    def __init__(self, runner: TurnRunner, history: list[ChatMessage], playout: Playout,
                 post: Callable[[Message], None],
                 under_load: tuple[Profile, Stages] | None = None,
                 waiting: Callable[[], float] = measured_wait, backlog: Backlog = BACKLOG):
        self.runner = runner
        self.history = history
        self.playout = playout
        self.post = post
        # Same voice and phrases as the profile's (dialplan.plan.under_load): its cache, so a
        # turn under load does not render "repeat" on its critical path, waiting for the CPU.
        self.under_load = None if under_load is None else TurnRunner(
            under_load[1], under_load[0], out_rate=runner.out_rate, clock=runner.now,
            phrases=runner.speak)
        self.waiting = waiting
        self.backlog = backlog
        self.call_id = "-"
        self._prefill: threading.Thread | None = None
        self._prefill_cancel = threading.Event()
        self._speaking = False  # as last told to the backlog
        backlog.join(self)

    def prefill(self, audio: np.ndarray, call_id: str) -> None:
        """The caller's words so far into the LLM's cache, as background work.

        One at a time: while one still works, the next call's :class:`SpeechSoFar` (with more
        words) is skipped rather than queued.
        """
        if self._prefill is not None and self._prefill.is_alive():
            return
        self.call_id = call_id
        cancel = self._prefill_cancel = threading.Event()
        self._prefill = threading.Thread(
            target=self._prefill_words, args=(audio, list(self.history), cancel), daemon=True,
            name=f"prefill-{self.call_id[:6]}")
        self._prefill.start()

    def cancel_prefill(self) -> None:
        self._prefill_cancel.set()

    def close(self) -> None:
        """The call ends: any prefill stops, and other calls are no longer kept company."""
        self.cancel_prefill()
        self.backlog.part(self)

    def _prefill_words(self, audio: np.ndarray, history: list[ChatMessage],
                       cancel: threading.Event) -> None:
        try:
            evaluated = prefill_words(self.runner, audio, history, cancel,
                                      others_idle=lambda: not self.backlog.busy_others(self),
                                      alone=lambda: self.backlog.alone(self))
        except JobCancelled:
            return
        except Exception as e:  # an optimisation only: the turn reads its prompt itself
            log.event("prefill-failed", self.call_id, error=repr(e))
            return
        if evaluated:
            log.event("prefilled", self.call_id, evaluated=evaluated)
        else:
            log.event("prefill-skipped", self.call_id, level=logging.DEBUG)

    def speaking(self, now: bool) -> None:
        """The session's VAD: this call's caller is inside an utterance (``now``) or not.

        Told every inbound frame; the shared backlog's lock is taken only when it changes.
        """
        if now != self._speaking:
            self._speaking = now
            self.backlog.speaking(self, now)

    def _runner(self, turn: Turn, ahead: int) -> TurnRunner:
        """This profile's runner, or the cheaper one while the CPU is overloaded.

        Overloaded: ``ahead`` turns of other calls are still waiting for their first audio
        (this one would wait for all of them), or as many other callers are still speaking
        (their turns will compete with this one's), or first-audio work has lately waited too
        long.
        """
        limits = self.runner.profile.limits
        if self.under_load is None:
            return self.runner
        ahead = max(ahead, self.backlog.busy_others(self))
        if not ((limits.under_load_ahead and ahead >= limits.under_load_ahead)
                or self.waiting() > limits.under_load_after_s):
            return self.runner
        turn.under_load = self.under_load.profile.name
        return self.under_load

    def start(self, turn: Turn, call_id: str) -> None:
        self.call_id = call_id
        self.cancel_prefill()  # the turn's own request reads on from what it evaluated
        turn.thread = threading.Thread(target=self._work, args=(turn,), daemon=True,
                                       name=f"turn-{call_id[:6]}-{turn.index}")
        turn.thread.start()

    def _work(self, turn: Turn) -> None:
        turn.ticket, ahead = self.backlog.enter(self)
        try:
            if turn.after is not None:
                turn.after.join()  # it may still append to (or roll back) the history
            if turn.merged_from is not None:
                # The turn this one continues may have finished (its reply appended) before
                # the caller went on: its words are asked again here, whole.
                del self.history[turn.merged_from.history_len:]
            turn.history_len = len(self.history)  # now that no earlier worker can touch it
            if turn.cancel.is_set():
                return
            runner = self._runner(turn, ahead)
            eot = runner.stages.eot
            if eot is not None and isinstance(turn.utterance, SpeechPaused):
                if ahead:
                    # Other callers' turns still wait for their first audio, and this one
                    # waits for them: ending it ~200 ms before the hangover gains it nothing,
                    # while the model's thread beside the slot slows the job holding it.
                    log.event("end-of-turn-skipped", self.call_id, level=logging.DEBUG,
                              ahead=ahead)
                else:
                    # Beside the ASR pass, not before it: the verdict arrives ~100 ms into
                    # the pass instead of the pass starting ~100 ms late.
                    threading.Thread(target=self._score_end, args=(turn, eot), daemon=True,
                                     name=f"{threading.current_thread().name}-eot").start()
            # Speculative until the endpoint; the caller's critical path from then on (the
            # scheduler re-reads this while the job waits for a slot).
            # A pass still queued when the caller goes on (or hangs up) never runs.
            with priority(lambda: (Priority.FIRST_AUDIO if turn.endpointed
                                   else Priority.SPECULATIVE, turn.timeline.speech_end_at or 0.0)
                          ), cancel_on(turn.cancel):
                transcript = runner.transcribe(turn.utterance, turn.timeline)
            turn.transcript = transcript.text
            self.post(Transcribed(turn))
            turn.result = runner.run(turn.utterance, turn.timeline, self.history,
                                          lambda pcm: self._emit(turn, pcm), turn.cancel,
                                          gate=turn.gate, transcript=transcript,
                                          alone=lambda: self.backlog.alone(self))
            if turn.merged:
                del self.history[turn.history_len:]
        except JobCancelled:
            turn.result = TurnResult(transcript="", audio_in_s=turn.utterance.duration_s,
                                     cancelled=True)
        except Exception as e:
            turn.error = repr(e)
            self._apologise(turn)
        finally:
            self.backlog.leave(turn.ticket)
            if turn.audible and not turn.cancel.is_set():
                self.playout.end_reply()
            self.post(TurnDone(turn))

    def _score_end(self, turn: Turn, eot) -> None:
        try:
            verdict = eot.score(turn.utterance.audio)
        except Exception as e:  # no verdict: the VAD hangover ends the turn instead
            log.event("end-of-turn-failed", self.call_id, error=repr(e))
            return
        turn.end_probability = verdict.probability
        # Outside the scheduler (see models.eot.base): the job trace does not show it.
        log.event("end-of-turn-scored", self.call_id, level=logging.DEBUG,
                  ran_ms=log.ms(verdict.metrics.duration_s),
                  probability=round(verdict.probability, 3))
        self.post(EndOfTurnScored(turn))

    def _apologise(self, turn: Turn) -> None:
        """The answer failed: say the profile's apology rather than leave the caller in silence.

        Only for a turn whose caller is waiting (its gate opens: endpointed, not talked over)
        and who has heard nothing of it yet.
        """
        profile = self.runner.profile
        turn.result = turn.result or TurnResult(
            transcript=turn.transcript or "", audio_in_s=turn.utterance.duration_s)
        if turn.audible or not profile.apology.strip():
            return
        if turn.transcript is None:  # ASR itself failed: let the session open the gate
            turn.transcript = ""
            self.post(Transcribed(turn))
        deadline = time.monotonic() + APOLOGY_WAIT_S
        while (not turn.gate.is_set() and not turn.cancel.is_set()
               and time.monotonic() < deadline):
            turn.gate.wait(0.01)
        if not turn.gate.is_set() or turn.cancel.is_set():
            return
        try:
            with priority((Priority.FIRST_AUDIO, turn.timeline.speech_end_at or 0.0)):
                pcm = self.runner.speak(profile.apology)
        except Exception:  # TTS is what failed: nothing more can be said
            return
        turn.result.reply_text = profile.apology
        turn.result.audio_out_s = len(pcm) / self.runner.out_rate
        self._emit(turn, pcm)

    def _emit(self, turn: Turn, pcm: np.ndarray) -> None:
        if turn.cancel.is_set():
            return
        if not turn.audible:
            turn.audible = True
            self.backlog.leave(turn.ticket)  # heard: turns starting now no longer wait for it
            timeline = turn.timeline
            self.playout.start_reply(lambda t: setattr(timeline, "first_frame_out_at", t))
            self.post(ReplyAudio(turn))
        self.playout.push(pcm)
