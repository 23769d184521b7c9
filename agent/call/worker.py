"""A call's turns at work: end-of-turn score, ASR, then the reply, as jobs and continuations.

The call's turn-taking (:mod:`agent.call.turntaking`) decides *when* a turn runs and when its
audio may be heard (the gate); this module runs it, on the call's loop: it submits the turn's
model work to the process scheduler and continues from each completion. The ASR result goes to
turn-taking at once (a :class:`~agent.call.messages.Transcribed` message: it decides from the
words whether the caller has finished), then a :class:`~agent.turn.reply.Reply` answers it.
Imports no SIP and no database code.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future

import numpy as np

from agent import log
from agent.call.jobs import CallJobs
from agent.call.messages import (
    EndOfTurnScored,
    FirstFrameOut,
    Message,
    ReplyAudio,
    Transcribed,
    TurnDone,
)
from agent.call.playout import Playout
from agent.call.turn import Turn, Work
from agent.turn.load import LoadPolicy
from agent.turn.prefill import prefill_words
from agent.turn.reply import Reply
from agent.turn.reply_state import timed
from agent.turn.result import TurnResult
from agent.turn.runner import Stages, TurnRunner
from dialplan.profile import Profile
from models.asr.base import Transcript
from models.llm.base import Message as ChatMessage
from models.priority import Cancel, JobCancelled, Priority
from models.vad.segmenter import SpeechPaused

APOLOGY_WAIT_S = 3.0
"""How long a failed speculative turn waits for its endpoint before giving up on apologising."""


class TurnWorker:
    """Runs one call's turns through the scheduler, on the call's loop.

    Args:
        runner: the call's turn runner.
        history: the call's chat history (appended by a reply once its gate opened).
        playout: where reply audio goes.
        post: puts a message in the call's inbox.
        jobs: submits the call's model work.
        now: the call's clock.
        load: the process's rules under load (every call's worker shares it).
        under_load: the profile's cheaper ``under_load`` profile and its models, if any.
        keep: why a transcribed turn is not for the LLM ("" if it is): the call's actions
            (a message being left, a transfer running).
    """

    def __init__(self, runner: TurnRunner, history: list[ChatMessage], playout: Playout,
                 post: Callable[[Message], None], jobs: CallJobs, now: Callable[[], float],
                 load: LoadPolicy, under_load: tuple[Profile, Stages] | None = None,
                 keep: Callable[[Turn, str, float], str] | None = None):
        self.runner = runner
        self.history = history
        self.playout = playout
        self.post = post
        self.jobs = jobs
        self.now = now
        # Same voice and phrases as the profile's (dialplan.plan.under_load): its cache, so a
        # turn under load does not render "repeat" on its critical path, waiting for the CPU.
        self.under_load = None if under_load is None else TurnRunner(
            under_load[1], under_load[0], out_rate=runner.out_rate, clock=runner.now,
            phrases=runner.speak)
        self.load = load
        self.keep = keep
        self.backlog = load.backlog
        self.call_id = "-"
        self._waiting: list[Turn] = []  # turns whose previous turn has not finished yet
        self._prefill: Future | None = None
        self._prefill_cancel = None
        self._speaking = False  # as last told to the backlog
        self.backlog.join(self)

    # ---- prefill ---------------------------------------------------------------------------

    def prefill(self, audio: np.ndarray | None, call_id: str) -> None:
        """The caller's words so far into the LLM's cache, as background work.

        ``audio`` None: no words yet, the history up to where the next turn's words go (the
        caller began to speak: :meth:`~agent.call.turntaking.TurnTaking.speech_started`). One
        at a time: while one still works, the next call's
        :class:`SpeechSoFar` (with more words) is skipped rather than queued.
        """
        if (audio is None and not self.history) or (
                self._prefill is not None and not self._prefill.done()):
            return  # (no history: the primed prefix holds all before the first words)
        self.call_id = call_id
        cancel = self._prefill_cancel = Cancel()
        self._prefill = self.jobs.submit(
            prefill_words, self.runner, audio, list(self.history), cancel,
            lambda again: self.load.may_prefill(self, again), stage="prefill",
            priority=Priority.BACKGROUND, cancel=cancel, then=self._prefilled)

    def _prefilled(self, f: Future) -> None:
        try:
            evaluated = f.result()
        except JobCancelled:
            return
        except Exception as e:  # an optimisation only: the turn reads its prompt itself
            log.event("prefill-failed", self.call_id, error=repr(e))
            return
        if evaluated:
            log.event("prefilled", self.call_id, evaluated=evaluated)
        else:
            log.event("prefill-skipped", self.call_id, level=logging.DEBUG)

    def cancel_prefill(self) -> None:
        if self._prefill_cancel is not None:
            self._prefill_cancel.set()

    def close(self) -> None:
        """The call ends: any prefill stops, and other calls are no longer kept company."""
        self.cancel_prefill()
        self.backlog.part(self)

    def speaking(self, now: bool) -> None:
        """The session's VAD: this call's caller is inside an utterance (``now``) or not.

        Told every inbound frame; the shared backlog's lock is taken only when it changes.
        """
        if now != self._speaking:
            self._speaking = now
            self.backlog.speaking(self, now)

    # ---- a turn's work ---------------------------------------------------------------------

    def _runner(self, turn: Turn) -> TurnRunner:
        """This profile's runner, or the cheaper one while the CPU is overloaded."""
        if self.under_load is None or not self.load.under_load(self.runner.profile.limits,
                                                               self, turn.ahead):
            return self.runner
        turn.under_load = self.under_load.profile.name
        return self.under_load

    def start(self, turn: Turn, call_id: str) -> None:
        self.call_id = call_id
        self.cancel_prefill()  # the turn's own request reads on from what it evaluated
        turn.ticket, turn.ahead = self.backlog.enter(self)
        if turn.after is not None and not turn.after.finished:
            self._waiting.append(turn)  # it may still append to (or roll back) the history
            return
        self._begin(turn)

    def _begin(self, turn: Turn) -> None:
        if turn.merged_from is not None:
            # The turn this one continues may have finished (its reply appended) before
            # the caller went on: its words are asked again here, whole.
            del self.history[turn.merged_from.history_len:]
        turn.history_len = len(self.history)  # now that no earlier turn can touch it
        if turn.cancelled:
            self._done(turn)
            return
        runner = self._runner(turn)
        if turn.typed is not None:  # keypad digits: the words are known, nothing to hear
            typed: Future = Future()
            typed.set_result((Transcript(turn.typed, None), None))  # (no ASR: no stamp)
            self._transcribed(turn, runner, typed)
            return
        eot = runner.stages.eot
        if eot is not None and isinstance(turn.utterance, SpeechPaused):
            if turn.ahead:
                # Other callers' turns still wait for their first audio, and this one waits
                # for them: ending it before the hangover gains it nothing, while the model
                # beside the slot slows the job holding it.
                log.event("end-of-turn-skipped", self.call_id, level=logging.DEBUG,
                          ahead=turn.ahead)
            else:
                # Beside the ASR pass, not before it: the verdict arrives during the pass
                # instead of the pass starting late.
                self.jobs.submit(eot.score, turn.utterance.audio, stage="eot",
                                 priority=Priority.END_OF_TURN,
                                 then=lambda f: self._scored(turn, f))
        # Speculative until the endpoint; the caller's critical path from then on (the turn's
        # rank, which the loop sets as it takes the turn; the scheduler re-reads it while the
        # job waits for a slot). A pass still queued when the caller goes on (or hangs up)
        # never runs.
        # Stamped where it ran, handed back with the transcript (``asr_done_at``).
        self.jobs.submit(timed(runner.transcribe, runner.now), turn.utterance, stage="asr",
                         priority=turn.asr_rank,
                         cancel=turn.cancel, then=lambda f: self._transcribed(turn, runner, f))

    def _scored(self, turn: Turn, f: Future) -> None:
        try:
            verdict = f.result()
        except Exception as e:  # no verdict: the VAD hangover ends the turn instead
            log.event("end-of-turn-failed", self.call_id, error=repr(e))
            return
        turn.end_probability = verdict.probability
        log.event("end-of-turn-scored", self.call_id, level=logging.DEBUG,
                  ran_ms=log.ms(verdict.metrics.duration_s),
                  probability=round(verdict.probability, 3))
        self.post(EndOfTurnScored(turn))

    def _transcribed(self, turn: Turn, runner: TurnRunner, f: Future) -> None:
        try:
            transcript, done_at = f.result()
        except JobCancelled:
            turn.result = TurnResult(transcript="", audio_in_s=turn.utterance.duration_s,
                                     cancelled=True)
            self._done(turn)
            return
        except Exception as e:
            self._failed(turn, e)
            return
        if done_at is not None:
            turn.timeline.asr_done_at = done_at
        turn.transcript = transcript.text
        kept = self.keep(turn, transcript.text, self.now()) if self.keep is not None else ""
        if kept:
            turn.result = TurnResult(transcript=transcript.text, asr=transcript.metrics,
                                     audio_in_s=turn.utterance.duration_s, kept=kept)
            self.post(Transcribed(turn))
            self._done(turn)
            return
        self.post(Transcribed(turn))
        turn.reply = Reply(runner, turn.timeline, self.history, self.jobs.submit,
                           emit=lambda pcm, clause: self._emit(turn, pcm, clause),
                           cancel=turn.cancel,
                           on_done=lambda result, error: self._replied(turn, result, error),
                           gate=turn.gate, alone=lambda: self.backlog.alone(self),
                           audio_in_s=turn.utterance.duration_s, now=self.now,
                           escalate=self.runner if runner is not self.runner else None,
                           paused=lambda: self.playout.paused, feed=self.jobs.feed)
        turn.reply.start(transcript)

    def _replied(self, turn: Turn, result: TurnResult, error: BaseException | None) -> None:
        turn.result = result
        if error is not None:
            self._failed(turn, error)
            return
        if turn.merged:
            del self.history[turn.history_len:]
        self._done(turn)

    def _done(self, turn: Turn) -> None:
        if turn.finished:
            return
        self.backlog.leave(turn.ticket)
        if turn.audible and not turn.cancelled:
            self.playout.end_reply()
        turn.work_to(Work.FINISHED)
        self.post(TurnDone(turn))
        ready = [t for t in self._waiting if t.after is turn]
        self._waiting = [t for t in self._waiting if t.after is not turn]
        for t in ready:
            self._begin(t)

    # ---- the line's side of a turn (turn-taking calls these) ---------------------------------

    def open_gate(self, turn: Turn) -> None:
        """Let the turn be heard: its held audio goes out, or its apology is said.

        The one place a turn's gate opens; its reply, waiting on the same gate, goes on.
        """
        if turn.gate.open() and turn.failed_at is not None:
            self._apologise(turn)

    def cancel(self, turn: Turn) -> None:
        """Drop the turn: its queued jobs never run, its reply ends when the rest are back."""
        if turn.cancelled:
            return
        turn.cancel.set()
        if turn.failed_at is not None:
            self._done(turn)
        elif turn.reply is not None and not turn.reply.done:
            turn.reply.stop()

    def tick(self, now: float, turns: tuple[Turn | None, ...]) -> None:
        """After every message: the replies' ranks and the failed turns' apologies.

        The ranks are worked out again on the loop (what the replies' jobs waiting in the
        scheduler carry); a failed turn whose gate has not opened in time ends without an
        apology.
        """
        for turn in turns:
            if turn is not None and turn.reply is not None and not turn.reply.done:
                turn.reply.urgency.refresh()
        for turn in turns:
            if (turn is not None and turn.failed_at is not None and not turn.finished
                    and not turn.gate_open and now - turn.failed_at > APOLOGY_WAIT_S):
                self._done(turn)

    # ---- failures ----------------------------------------------------------------------------

    def _failed(self, turn: Turn, error: BaseException) -> None:
        """The answer failed: say the profile's apology rather than leave the caller in silence.

        Only for a turn whose caller is waiting (its gate opens: endpointed, not talked over)
        and who has heard nothing of it yet.
        """
        turn.error = repr(error)
        profile = self.runner.profile
        turn.result = turn.result or TurnResult(
            transcript=turn.transcript or "", audio_in_s=turn.utterance.duration_s)
        if turn.audible or not profile.apology.strip() or turn.cancelled:
            self._done(turn)
            return
        turn.failed_at = self.now()
        if turn.transcript is None:  # ASR itself failed: let turn-taking open the gate
            turn.transcript = ""
            self.post(Transcribed(turn))
        if turn.gate_open:
            self._apologise(turn)

    def _apologise(self, turn: Turn) -> None:
        self.jobs.submit(self.runner.speak, self.runner.profile.apology, stage="tts",
                         priority=(Priority.FIRST_AUDIO, turn.timeline.speech_end_at or 0.0),
                         then=lambda f: self._apologised(turn, f))

    def _apologised(self, turn: Turn, f: Future) -> None:
        if not turn.finished and not turn.cancelled and f.exception() is None:
            pcm = f.result()
            turn.result.reply_text = self.runner.profile.apology
            turn.result.audio_out_s = len(pcm) / self.runner.out_rate
            self._emit(turn, pcm, turn.result.reply_text)
        self._done(turn)  # TTS is what failed, or the apology is queued: nothing more

    def _emit(self, turn: Turn, pcm: np.ndarray, clause: str | None = None) -> None:
        if turn.cancelled:
            return
        if not turn.audible:
            turn.audible = True
            self.backlog.leave(turn.ticket)  # heard: turns starting now no longer wait for it
            # The clock thread stamps the first frame and posts it: the loop writes it down.
            self.playout.start_reply(lambda at: self.post(FirstFrameOut(turn, at)))
            self.post(ReplyAudio(turn))
        self.playout.push(pcm, clause)
