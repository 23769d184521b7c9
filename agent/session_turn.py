"""Turns in flight inside a :class:`~agent.session.CallSession`: their data and worker threads.

Split from the session so each file holds one concern: the session decides *when* a turn runs
and when its audio may be heard (the gate); this module runs it (quick transcript, then
:class:`~agent.pipeline.TurnRunner` on a worker thread) and carries its state between threads.
Imports no SIP and no database code.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from agent.pipeline import TurnResult, TurnRunner
from agent.playout import Playout
from agent.turn import TurnTimeline
from models.asr.base import ASR, Transcript
from models.llm.base import Message
from models.vad.segmenter import SpeechPaused, Utterance


@dataclass(eq=False)
class Turn:
    """A caller utterance being answered; shared by the session thread and one worker thread.

    The session thread sets ``cancel``/``gate``/``merged``/``barge_in``; the worker sets
    ``quick``, ``result``, ``error`` and ``audible`` (plain attribute writes, each followed by a
    message to the session).
    """

    index: int
    utterance: Utterance | SpeechPaused
    timeline: TurnTimeline
    history_len: int
    """Length of the call's history before this turn (rolled back to it if merged away)."""
    after: Turn | None = None
    """A previous turn whose worker must finish first (it may still touch the history)."""
    merged_from: Turn | None = None
    """The earlier, unanswered turn whose utterance this one continues."""
    endpointed: bool = False
    """The VAD hangover has elapsed; False while the turn runs speculatively."""
    cancel: threading.Event = field(default_factory=threading.Event)
    gate: threading.Event = field(default_factory=threading.Event)
    """Opened by the session once the turn is endpointed and does not sound unfinished."""
    quick: str | None = None
    """The transcript, known right after ASR (before the LLM)."""
    hold_until: float | None = None
    """Monotonic deadline of the pause-tolerance wait, once one started."""
    result: TurnResult | None = None
    error: str = ""
    audible: bool = False
    """Reply audio has been queued for playout."""
    merged: bool = False
    """Cancelled because the caller went on talking: its utterance joins the next one."""
    barge_in: bool = False
    done: bool = False
    thread: threading.Thread | None = None

    def join(self, timeout: float | None = None) -> None:
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join(timeout)


class TurnWorker:
    """Runs one call's turns, each on its own thread, through :class:`TurnRunner`.

    Args:
        runner: the call's turn runner (its ASR is ``asr``).
        asr: the per-call ASR front that keeps the quick transcript.
        history: the call's chat history (appended by the runner once a gate opened).
        playout: where reply audio goes.
        post: sends ``("quick" | "reply-audio" | "turn-done", turn)`` to the session thread.
    """

    def __init__(self, runner: TurnRunner, asr: ReuseASR, history: list[Message],
                 playout: Playout, post: Callable[[tuple], None]):
        self.runner = runner
        self.asr = asr
        self.history = history
        self.playout = playout
        self.post = post

    def start(self, turn: Turn, call_id: str) -> None:
        turn.thread = threading.Thread(target=self._work, args=(turn,), daemon=True,
                                       name=f"turn-{call_id[:6]}-{turn.index}")
        turn.thread.start()

    def _work(self, turn: Turn) -> None:
        try:
            if turn.after is not None:
                turn.after.join()  # it may still append to (or roll back) the history
            if turn.cancel.is_set():
                return
            turn.quick = self.asr.remember(turn.utterance.audio).text
            self.post(("quick", turn))
            turn.result = self.runner.run(turn.utterance, turn.timeline, self.history,
                                          lambda pcm: self._emit(turn, pcm), turn.cancel,
                                          gate=turn.gate)
            if turn.merged:
                del self.history[turn.history_len:]
        except Exception as e:
            turn.error = repr(e)
        finally:
            if turn.audible and not turn.cancel.is_set():
                self.playout.end_reply()
            self.post(("turn-done", turn))

    def _emit(self, turn: Turn, pcm: np.ndarray) -> None:
        if turn.cancel.is_set():
            return
        if not turn.audible:
            turn.audible = True
            timeline = turn.timeline
            self.playout.start_reply(lambda t: setattr(timeline, "first_frame_out_at", t))
            self.post(("reply-audio", turn))
        self.playout.push(pcm)


class ReuseASR(ASR):
    """Per-call wrapper around the shared ASR that hands back the session's quick transcript.

    The session transcribes each utterance once at the endpoint to decide whether it sounds
    finished (:func:`agent.endpointing.sounds_unfinished`); when the turn then runs,
    :class:`~agent.pipeline.TurnRunner` asks for the same audio again and gets that transcript
    instead of a second ASR pass (tiny.en: ~0.3 s saved per turn on 2 cores).
    """

    def __init__(self, inner: ASR):
        self.inner = inner
        self.backend = inner.backend
        self.model_name = inner.model_name
        self._audio: np.ndarray | None = None
        self._transcript: Transcript | None = None

    def remember(self, audio: np.ndarray) -> Transcript:
        """Transcribe ``audio`` and keep the result for the next request of the same array."""
        tr = self.inner.transcribe(audio)
        self._audio, self._transcript = audio, tr
        return tr

    def transcribe(self, audio: np.ndarray) -> Transcript:
        if audio is self._audio and self._transcript is not None:
            return self._transcript
        return self.inner.transcribe(audio)

    def transcribe_batch(self, audios: list[np.ndarray]) -> list[Transcript]:
        return self.inner.transcribe_batch(audios)

    def _transcribe_impl(self, audio: np.ndarray) -> str:
        return self.inner.transcribe(audio).text
