"""One turn's answer as a machine driven by messages: transcript in, speech out, clause by clause.

The LLM streams while the reply is spoken: each decode step and each clause's TTS is a job of
the process scheduler, submitted by the call's loop, and its completion comes back to the loop,
which feeds the text to the clause splitter, queues the next clause's speech and hands finished
audio to the line. So the first clause is heard while the rest is still being generated, and
no thread waits for another (the speed this buys is what ``bench pipeline`` and ``bench call``
measure). Every job's priority is read from :class:`~agent.turn.urgency.Urgency`: what the
caller is waiting for right now.

A speculative turn (started before the endpoint) runs with its gate closed: its audio is held
until :meth:`Reply.open_gate`, and a reply that is cancelled before that leaves the history
untouched.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future

import numpy as np

from agent.turn.doubt import doubtful
from agent.turn.result import TurnResult
from agent.turn.runner import TurnRunner
from agent.turn.textsplit import ClauseSplitter, speakable
from agent.turn.timeline import TurnTimeline
from agent.turn.urgency import Urgency
from models.asr.base import Transcript
from models.audio import StreamResampler, float_to_pcm16
from models.llm.base import LLMStream, Message
from models.priority import JobCancelled, Priority, cancel_on

Submit = Callable[..., Future]
"""``submit(fn, *args, stage=, priority=, then=, cancel=)``: :meth:`CallJobs.submit`."""


class Reply:
    """The answer to one transcript, on the call's loop.

    Args:
        runner: the profile's stages and prompt (the under-load one's, under load).
        timeline: the turn's stamps.
        history: the call's chat history; this turn's exchange is appended once its gate
            opened (at the end of the reply).
        submit: runs model work in the scheduler and its continuation on the loop.
        emit: receives int16 audio at the line's rate, once the gate is open.
        cancel: the turn's cancel event (queued jobs of a cancelled turn never run).
        on_done: ``on_done(result, error)`` once nothing is in flight and the reply is over.
        gated: the turn is speculative: its audio waits for :meth:`open_gate`.
        alone: whether no other call is up now (``tts.first_chunk_opener = "alone"``).
        audio_in_s: length of the caller's utterance.
    """

    def __init__(self, runner: TurnRunner, timeline: TurnTimeline, history: list[Message],
                 submit: Submit, emit: Callable[[np.ndarray], None], cancel,
                 on_done: Callable[[TurnResult, BaseException | None], None],
                 gated: bool = False, alone: Callable[[], bool] = lambda: True,
                 audio_in_s: float = 0.0, now: Callable[[], float] = time.monotonic):
        self.runner = runner
        self.t = timeline
        self.history = history
        self._submit = submit
        self._emit = emit
        self._cancel = cancel
        self._on_done = on_done
        self._now = now
        self._alone = alone
        self.result = TurnResult(audio_in_s=audio_in_s)
        self.gate_open = not gated
        """Its audio may be heard (once open, it stays open: the reply joins the history)."""
        self.urgency = Urgency(timeline, self.result, lambda: self.gate_open, now)
        self._stream: LLMStream | None = None
        self._splitter: ClauseSplitter | None = None
        self._resampler = StreamResampler(runner.stages.tts.sample_rate, runner.out_rate)
        self._chunks: deque[str] = deque()
        self._held: list[np.ndarray] = []
        self._stepping = False
        self._speaking = False
        self._llm_done = False
        self._repeat = False
        self._empty = False
        self._error: BaseException | None = None
        self.done = False

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    # ---- start ---------------------------------------------------------------------------

    def start(self, tr: Transcript) -> None:
        """Answer ``tr``."""
        r = self.result
        r.transcript, r.asr = tr.text, tr.metrics
        if not tr.text or self.cancelled:
            r.cancelled = self.cancelled
            self._llm_done = self._empty = True  # nothing to answer: no verdict to wait for
            self._finish()
            return
        doubt = doubtful(tr, self.runner.profile.asr.min_avg_logprob)
        if doubt:
            self._ask_again(doubt)
            return
        tts = self.runner.profile.tts
        opener = tts.first_chunk_opener
        self._splitter = ClauseSplitter(first_words=tts.first_chunk_words,
                                        hurry=self.urgency.hurry,
                                        openers=self._alone if opener == "alone" else opener,
                                        eager=self._alone)
        # A backend that batches (llama-batch) drops a cancelled reply between its steps: a
        # speculation the caller talked past no longer holds a sequence, or gets its prefill.
        with cancel_on(self._cancel):
            self._stream = self.runner.stages.llm.stream(
                self.runner.prompt(self.history, tr.text))
        self._step()

    def _ask_again(self, why: str) -> None:
        """Say the profile's ``repeat`` phrase instead of answering a guess; history untouched."""
        self._repeat = True
        self.t.llm_first_token_at = self.t.first_chunk_text_at = self._now()
        self.result.asked_to_repeat, self.result.reply_text = why, self.runner.profile.repeat
        self._speaking = True
        self._submit(self._timed(self.runner.speak), self.runner.profile.repeat, stage="tts",
                     priority=(Priority.FIRST_AUDIO, self.t.speech_end_at or 0.0),
                     then=self._repeated)

    def _repeated(self, f: Future) -> None:
        self._speaking = False
        self._llm_done = True
        out = self._outcome(f, self._finish)
        if out is None:
            return
        pcm, self.t.tts_first_audio_at = out
        self._out(pcm)
        self._finish()

    # ---- the LLM -------------------------------------------------------------------------

    def _outcome(self, f: Future, cancelled: Callable[[], None]) -> tuple | None:
        """A job's ``(result, stamp)`` (see :meth:`_timed`), or None once it was dealt with.

        A cancelled job calls ``cancelled()``; a failed one fails the reply.
        """
        try:
            return f.result()
        except JobCancelled:
            cancelled()
        except BaseException as e:  # noqa: BLE001 - handed to on_done
            self._fail(e)
        return None

    def _timed(self, fn: Callable) -> Callable:
        """``fn`` returning its result and the clock when it came (stamped where it ran)."""
        now = self._now

        def run(*args):
            return fn(*args), now()
        return run

    def _step(self) -> None:
        self._stepping = True
        self._submit(self._timed(self._stream.step), stage="llm", priority=self.urgency.llm,
                     cancel=self._cancel, then=self._stepped)

    def _stepped(self, f: Future) -> None:
        self._stepping = False
        out = self._outcome(f, self._llm_end)
        if out is None:
            return
        text, at = out
        if text is not None and self.t.llm_first_token_at is None:
            self.t.llm_first_token_at = at
        if self.cancelled or self._error is not None:
            self._llm_end()
            return
        if text is None:
            for chunk in self._splitter.flush():
                self._put(chunk)
            self._llm_end()
            return
        for chunk in self._splitter.push(text):
            self._put(chunk)
        self._step()

    def _llm_end(self) -> None:
        if self._stream is not None:
            self._stream.close()  # frees the backend's sequence now
        self.t.llm_done_at = self._now()
        self._llm_done = True
        self._finish()

    # ---- TTS and the line ------------------------------------------------------------------

    def _put(self, text: str) -> None:
        text = speakable(text)
        if not text:
            return
        if self.t.first_chunk_text_at is None:
            self.t.first_chunk_text_at = self._now()
        self._chunks.append(text)
        self._speak_next()

    def _speak_next(self) -> None:
        # Held audio waits for the gate, and so does the next clause's speech: a speculation
        # that is dropped costs one clause.
        if self._speaking or not self._chunks or self.cancelled or self._held:
            return
        self._speaking = True
        self._submit(self._timed(self.runner.stages.tts.synthesize), self._chunks.popleft(),
                     stage="tts", priority=self.urgency.tts, cancel=self._cancel,
                     then=self._spoken)

    def _spoken(self, f: Future) -> None:
        self._speaking = False
        out = self._outcome(f, self._finish)
        if out is None:
            return
        speech, at = out
        if self.t.tts_first_audio_at is None and len(speech.audio):
            self.t.tts_first_audio_at = at
        self.result.tts.append(speech.metrics)
        if not self.cancelled:
            self._out(float_to_pcm16(self._resampler.process(speech.audio)))
            self._speak_next()
        self._finish()

    def _out(self, pcm: np.ndarray) -> None:
        if not len(pcm) or self.cancelled:
            return
        if not self.gate_open:
            self._held.append(pcm)
            return
        self.result.audio_out_s += len(pcm) / self.runner.out_rate
        self._emit(pcm)

    def open_gate(self) -> None:
        """The turn is endpointed and sounds finished: its audio may be heard."""
        if self.gate_open:
            return
        self.gate_open = True
        self.t.settle()
        held, self._held = self._held, []
        for pcm in held:
            self._out(pcm)
        self._speak_next()
        self._finish()

    def stop(self) -> None:
        """The turn was cancelled: end as soon as the jobs in flight are back."""
        if not self._stepping and self._stream is not None and not self._llm_done:
            self._llm_end()
        else:
            self._finish()

    def _fail(self, error: BaseException) -> None:
        if self._error is None:
            self._error = error
        if not self._stepping and not self._llm_done and self._stream is not None:
            self._llm_end()
            return
        self._llm_done = self._llm_done or self._stream is None
        self._finish()

    # ---- the end ---------------------------------------------------------------------------

    def _finish(self) -> None:
        """Report the result once nothing is in flight and the reply is over."""
        if self.done or not self._llm_done or self._stepping or self._speaking:
            return
        failed = self._error is not None
        if not failed and not self.cancelled and not self._empty:
            if self._chunks:
                return  # more clauses to speak (they wait for the gate)
            if not self.gate_open:
                return  # a speculative turn waits for its verdict, even with nothing to say
        self.done = True
        r = self.result
        if not failed and not self.cancelled and not self._repeat:
            self._out(float_to_pcm16(
                self._resampler.process(np.zeros(0, np.float32), last=True)))
        self.t.settle()
        self.t.tts_done_at = self._now()
        if self._stream is not None:
            r.llm = self._stream.metrics
            r.reply_text = self._stream.text.strip()
        r.cancelled = self.cancelled
        if self.gate_open and not (self._repeat or self._empty or failed):
            self.history.append(Message("user", r.transcript))
            if r.reply_text:
                self.history.append(Message("assistant", r.reply_text))
        self._on_done(r, self._error)
