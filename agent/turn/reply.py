"""One turn's answer as a machine driven by messages: transcript in, speech out, clause by clause.

The LLM streams while the reply is spoken: its pieces come to the call's loop as messages
(pushed by the engine as it decodes them, or each a step job: :mod:`agent.turn.reply_read`),
and each clause's TTS is a job of the process scheduler whose completion comes back to the
loop too. The loop feeds the text to the clause splitter, queues the next clause's speech
and hands finished audio to the line. So the first clause is heard while the rest is still
being generated, and no thread waits for another (the speed this buys is what ``bench
pipeline`` and ``bench call`` measure). Every job's priority is a rank of
:class:`~agent.turn.urgency.Urgency`, set by the loop: what the caller is waiting for now.

A speculative turn (started before the endpoint) runs with its gate closed: its audio is held
until its :class:`~agent.turn.reply_state.AudioGate` opens, and a reply that is cancelled
before that leaves the history untouched. What the reply is doing is one
:class:`~agent.turn.reply_state.ReplyState`, changed only by :meth:`Reply._to`.

Where the profile offers tools (:mod:`agent.turn.tools`), the stream goes through a
:class:`~agent.turn.tools.ToolCallScanner` first: a tool call is never spoken; what is done
with it is :mod:`agent.turn.reply_tools`. Before the model, the caller's words may decide
(:mod:`agent.turn.intent`: a transfer asked for by name, a wait asked for;
:mod:`agent.turn.routing`: a look-up).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from functools import partial

import numpy as np

from agent.turn.doubt import doubtful
from agent.turn.guard import SentenceGate
from agent.turn.intent import asks_to_wait
from agent.turn.reply_checks import Checked
from agent.turn.reply_end import Reported
from agent.turn.reply_read import Reading
from agent.turn.reply_state import (
    LLM_OVER,
    TRANSITIONS,
    AudioGate,
    InFlight,
    ReplyState,
    check,
    timed,
)
from agent.turn.reply_tools import ToolSteps
from agent.turn.result import TurnResult
from agent.turn.runner import TurnRunner
from agent.turn.textsplit import ClauseSplitter, speakable
from agent.turn.timeline import TurnTimeline
from agent.turn.tools import ToolCall, ToolCallScanner
from agent.turn.urgency import Urgency
from models.asr.base import Transcript
from models.audio import StreamResampler, float_to_pcm16
from models.llm.base import LLMStream, Message
from models.priority import JobCancelled, Priority, cancel_on, priority

Submit = Callable[..., Future]
"""``submit(fn, *args, stage=, priority=, then=, cancel=)``: :meth:`CallJobs.submit`."""


class Reply(Reading, ToolSteps, Checked, Reported):
    """The answer to one transcript, on the call's loop.

    Args:
        runner: the profile's stages and prompt (the under-load one's, under load).
        timeline: the turn's stamps.
        history: the call's chat history; this turn's exchange is appended once its gate
            opened (at the end of the reply).
        submit: runs model work in the scheduler and its continuation on the loop.
        emit: receives int16 audio at the line's rate, once the gate is open, and the words of
            the clause it begins (None: it goes on with the last one).
        cancel: the turn's cancel event (queued jobs of a cancelled turn never run).
        on_done: ``on_done(result, error)`` once nothing is in flight and the reply is over.
        gated: the turn is speculative: its audio waits for :meth:`open_gate`.
        gate: the turn's gate (its owner opens it); None: one of its own, closed if ``gated``.
        feed: :meth:`~agent.call.jobs.CallJobs.feed`, for an engine that pushes its pieces;
            None: every piece is a step job.
        alone: whether no other call is up now (``tts.first_chunk_opener = "alone"``).
        audio_in_s: length of the caller's utterance.
        escalate: the profile's own runner, where ``runner`` is its under-load one: what the
            cheaper model turns away, before a word of it is said, is asked of this one.
        paused: whether the reply is paused on the line (its work is not urgent meanwhile).
    """

    def __init__(self, runner: TurnRunner, timeline: TurnTimeline, history: list[Message],
                 submit: Submit, emit: Callable[[np.ndarray, str | None], None], cancel,
                 on_done: Callable[[TurnResult, BaseException | None], None],
                 gated: bool = False, alone: Callable[[], bool] = lambda: True,
                 audio_in_s: float = 0.0, now: Callable[[], float] = time.monotonic,
                 escalate: TurnRunner | None = None, paused: Callable[[], bool] = lambda: False,
                 gate: AudioGate | None = None, feed: Callable[..., None] | None = None):
        self._use(runner)
        self._escalate = escalate
        self.t = timeline
        self.history = history
        self._emit = emit
        self._cancel = cancel
        self._on_done = on_done
        self._now = now
        self._alone = alone
        self.result = TurnResult(audio_in_s=audio_in_s)
        self.state = ReplyState.NEW
        self.gate = gate if gate is not None else AudioGate(is_open=not gated)
        """Its audio may be heard (once open, it stays open: the reply joins the history)."""
        self.gate.when_open(self._gate_opened)
        self.urgency = Urgency(timeline, self.result, lambda: self.gate.is_open, now, paused)
        self._in_flight = InFlight(submit, cancel, feed)
        self._job = self._in_flight.submit
        self._stream: LLMStream | None = None
        self._first_llm = None  # the first round's metrics (time to first token)
        self._splitter: ClauseSplitter | None = None
        self._rounds: list[Message] = []  # this turn's tool calls and answers, for the history
        self._said: list[str] = []
        self._tool_call: ToolCall | None = None  # an HTTP tool waiting for the gate
        self._tool_since = 0.0  # when the tool in flight was sent
        self._plain = False  # asked again without the tools: it answered neither way
        self._chunks: deque[str] = deque()
        self._held: list[tuple[np.ndarray, str | None]] = []  # (audio, its clause's words)
        self._error: BaseException | None = None

    def _to(self, new: ReplyState) -> None:
        """The one place the reply's state changes; raises on a move the table forbids."""
        check(TRANSITIONS, self.state, new)
        self.state = new

    @property
    def done(self) -> bool:
        return self.state is ReplyState.DONE

    @property
    def gate_open(self) -> bool:
        return self.gate.is_open

    @property
    def _llm_done(self) -> bool:
        return self.state in LLM_OVER

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    @property
    def said(self) -> str:
        """The clauses sent to TTS so far (what the caller hears, or is about to)."""
        return " ".join(self._said)

    # ---- start ---------------------------------------------------------------------------

    def start(self, tr: Transcript) -> None:
        """Answer ``tr``."""
        r = self.result
        r.transcript, r.asr = tr.text, tr.metrics
        if not tr.text or self.cancelled:
            r.cancelled = self.cancelled
            self._to(ReplyState.EMPTY)  # nothing to answer: no verdict to wait for
            self._finish()
            return
        doubt = doubtful(tr, self.runner.profile.asr.min_avg_logprob)
        if doubt:
            self._ask_again(doubt)
            return
        decided = self._decided(tr.text)
        if decided is not None:
            self.t.llm_first_token_at = self._now()
            self._tool(decided)
            return
        if self.runner.profile.limits.hold_s and asks_to_wait(tr.text):
            self._hold()
            return
        if self.runner.router is not None:
            self._route()
            return
        self._ask(tr.text)

    def _ask(self, words: str) -> None:
        """Start (or, after a tool's answer, continue) the LLM's reply to ``words``."""
        tts = self.runner.profile.tts
        opener = tts.first_chunk_opener
        self._gate = SentenceGate(self._check, self._may_lead)
        self._opening = ""
        self._splitter = ClauseSplitter(first_words=tts.first_chunk_words,
                                        hurry=self.urgency.hurry,
                                        openers=self._alone if opener == "alone" else opener,
                                        eager=self._alone)
        # A backend that batches (llama-batch) drops a cancelled reply between its steps: a
        # speculation the caller talked past no longer holds a sequence, or gets its prefill.
        self._to(ReplyState.ASKING)
        # Its priority the rank the loop sets: a pushed reply's engine reads no turn state.
        with cancel_on(self._cancel), priority(self.urgency.llm_rank):
            self._stream = self.runner.stages.llm.stream(
                self.runner.prompt(self.history, words, self._rounds, tools=not self._plain))
        self._read()

    def _ask_again(self, why: str) -> None:
        """Say the profile's ``repeat`` phrase instead of answering a guess; history untouched."""
        self._to(ReplyState.REPEATING)
        self.t.llm_first_token_at = self._now()
        self.result.asked_to_repeat, self.result.reply_text = why, self.runner.profile.repeat
        self._announce(self.runner.profile.repeat,
                       priority=(Priority.FIRST_AUDIO, self.t.speech_end_at or 0.0))

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
        return timed(fn, self._now)

    def _feed(self, text: str | None) -> bool:
        """Streamed text (None: the end) to the splitter; True once a tool call took over."""
        speech, call = (text, None) if self._scanner is None else (
            self._scanner.flush() if text is None else self._scanner.push(text))
        if speech and self._unsure_opening(speech):
            return True
        chunks = self._splitter.push(speech) if speech else []
        if text is None or call is not None:
            chunks += self._splitter.flush()
        for chunk in chunks:
            if self._said_or_objected(*self._gate.push(chunk)):
                return True
        if (text is None or call is not None) and self._said_or_objected(*self._gate.flush()):
            return True
        if call is not None:
            self._tool(call)
            return True
        if text is None and self._scanner is not None and self._scanner.malformed:
            # Neither words nor a call (``<tools></tools>``): the caller would hear nothing.
            # Told so, the small models write the same again (bench tools); asked without
            # the tools, they answer in words.
            bad = ToolCall("?", raw=self._scanner.malformed[:200])
            self._used(bad, "malformed", 0.0, bad.raw)
            if not self._said and not self._plain:
                self._close_stream()
                self._ask_plain()
                return True
        return False

    def _use(self, runner: TurnRunner) -> None:
        """Answer with ``runner``: what reads its tools and its voice's rate follows it."""
        self.runner = runner
        self._scanner = ToolCallScanner() if runner.tools else None
        self._resampler = StreamResampler(runner.stages.tts.sample_rate, runner.out_rate)

    def _close_stream(self) -> None:
        if self._stream is not None:
            self._stream.close()  # frees the backend's sequence now
            if self._first_llm is None:
                self._first_llm = self._stream.metrics
        self.t.llm_done_at = self._now()

    def _llm_end(self) -> None:
        self._close_stream()
        if not self._llm_done:
            self._to(ReplyState.SPEAKING)
        self._finish()

    # ---- TTS and the line ------------------------------------------------------------------

    def _put(self, text: str) -> None:
        text = speakable(text)
        if not text:
            return
        if self.t.first_chunk_text_at is None:
            self.t.first_chunk_text_at = self._now()
        self._said.append(text)
        self._chunks.append(text)
        self._speak_next()

    def _speak_next(self) -> None:
        # Held audio waits for the gate, and so does the next clause's speech: a speculation
        # that is dropped costs one clause.
        if self._in_flight["tts"] or not self._chunks or self.cancelled or self._held:
            return
        text = self._chunks.popleft()
        self._job("tts", self._timed(partial(self.runner.stages.tts.synthesize,
                                             first=self._waited_for(text))),
                  text, stage="tts", priority=self.urgency.tts_rank,
                  then=partial(self._spoken, text))

    def _waited_for(self, text: str) -> bool:
        """Whether the caller would wait for ``text``, so the lead voice (``tts.lead``) says it.

        The reply's first clause, or a later one the voice would not have ready before the
        audio already sent runs out: the reply has no hole where the voice changes over.
        """
        if not self.result.tts or self.t.tts_first_audio_at is None:
            return True
        ahead = self.result.audio_out_s - (self._now() - self.t.tts_first_audio_at)
        return ahead < self.runner.stages.tts.synth_s_per_char * len(text)

    def _spoken(self, clause: str, f: Future) -> None:
        out = self._outcome(f, self._finish)
        if out is None:
            return
        speech, at = out
        if self.t.tts_first_audio_at is None and len(speech.audio):
            self.t.tts_first_audio_at = at
        self.result.tts.append(speech.metrics)
        if not self.cancelled:
            self._out(float_to_pcm16(self._resampler.process(speech.audio)), clause)
            self._speak_next()
        self._finish()

    def _out(self, pcm: np.ndarray, clause: str | None = None) -> None:
        if not len(pcm) or self.cancelled:
            return
        if not self.gate_open:
            self._held.append((pcm, clause))
            return
        self.result.audio_out_s += len(pcm) / self.runner.out_rate
        self._emit(pcm, clause)

    def open_gate(self) -> None:
        """The turn is endpointed and sounds finished: its audio may be heard.

        Opens the reply's gate; the gate's owner (the turn's worker) opens it directly.
        """
        self.gate.open()

    def _gate_opened(self) -> None:
        if self.done:
            return  # failed or cancelled before its verdict: nothing of it is heard
        self.t.settle()
        held, self._held = self._held, []
        for pcm, clause in held:
            self._out(pcm, clause)
        self._speak_next()
        if self.state is ReplyState.TOOL_HELD and not self.cancelled:
            self._run_tool()
        self._finish()

    def stop(self) -> None:
        """The turn was cancelled: end as soon as the jobs in flight are back."""
        self._end_llm_now()

    def _fail(self, error: BaseException) -> None:
        if self._error is None:
            self._error = error
        self._end_llm_now()

    def _end_llm_now(self) -> None:
        """End the model's side unless a step or a tool is out (its return ends it)."""
        waiting = self.state is ReplyState.ASKING and not self._in_flight["llm"]
        if waiting or self.state is ReplyState.TOOL_HELD:
            self._llm_end()
        else:
            self._finish()

    # ---- the end ---------------------------------------------------------------------------

    def _finish(self) -> None:
        """Report the result once nothing is in flight and the reply is over."""
        if self.done or not self._llm_done or self._in_flight:
            return
        failed = self._error is not None
        said_nothing = self.state in (ReplyState.EMPTY, ReplyState.REPEATING)
        if not failed and not self.cancelled and self.state is not ReplyState.EMPTY:
            if self._chunks:
                return  # more clauses to speak (they wait for the gate)
            if not self.gate_open:
                return  # a speculative turn waits for its verdict, even with nothing to say
            if (not self._said and self.result.action is None and self._stream is not None
                    and self._scanner is not None and self.state is ReplyState.SPEAKING):
                # The model said nothing usable: never leave the caller in silence.
                self._to(ReplyState.APOLOGISING)
                self.result.tool_error = "no words and no tool call: apologised"
                self._put(self.runner.profile.apology)
                return
        self._to(ReplyState.DONE)
        self._report(failed, said_nothing)
