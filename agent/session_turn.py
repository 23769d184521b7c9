"""One turn in flight inside a :class:`~agent.session.CallSession`, and the per-call ASR front.

Split from the session so each file holds one concern: the session decides *when* a turn runs,
this module holds *what* a turn carries between the session thread and its worker thread.
Imports no SIP and no database code.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from agent.pipeline import TurnResult
from agent.turn import TurnTimeline
from models.asr.base import ASR, Transcript
from models.vad.segmenter import Utterance


@dataclass(eq=False)
class Turn:
    """A caller utterance being answered; shared by the session thread and one worker thread.

    The session thread sets ``cancel``/``merged``/``barge_in``; the worker sets ``result``,
    ``error`` and ``audible`` (plain attribute writes, read after the worker posts
    ``turn-done``).
    """

    index: int
    utterance: Utterance
    timeline: TurnTimeline
    history_len: int
    """Length of the call's history before this turn (rolled back to it if merged away)."""
    after: Turn | None = None
    """A previous turn whose worker must finish first (it may still touch the history)."""
    cancel: threading.Event = field(default_factory=threading.Event)
    result: TurnResult | None = None
    error: str = ""
    audible: bool = False
    """Reply audio has been queued for playout."""
    merged: bool = False
    """Cancelled because the caller went on talking: its utterance joins the next one."""
    barge_in: bool = False
    done: bool = False
    recorded: bool = False
    thread: threading.Thread | None = None

    def start(self, target: Callable[[Turn], None], call_id: str) -> None:
        self.thread = threading.Thread(target=target, args=(self,), daemon=True,
                                       name=f"turn-{call_id[:6]}-{self.index}")
        self.thread.start()

    def join(self, timeout: float | None = None) -> None:
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join(timeout)


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
