"""How soon the caller needs a turn's next model job: the priority the runner's jobs get.

Before the endpoint a turn's work is speculative; up to its first audio it is what the
caller waits for; after that the reply is spoken in real time and may lag, until its queued
audio runs low (then it is urgent again, and cut into shorter chunks).
"""

from __future__ import annotations

from collections.abc import Callable

from agent.turn.result import TurnResult
from agent.turn.timeline import TurnTimeline
from models.priority import Priority, Ranked

LOW_WATER_S = 1.0
"""A reply with less audio than this queued ahead of playout is urgent again (no gap)."""
HURRY_S = 0.5
"""A reply with less than this queued is cut into phrases: its next whole sentence would
come too late. Not sooner: a reply that keeps up is spoken in sentences, which sound better
(one call rarely gets here; after a first clause, often shorter than LOW_WATER_S, it always
would)."""


class Urgency:
    """One turn's priorities, worked out on the call's loop from the turn's state.

    Its jobs carry :attr:`llm_rank` and :attr:`tts_rank`, values the loop sets again after each
    message (:meth:`refresh`) and the scheduler and the LLM engine read: neither evaluates the
    turn's live state on its own thread.
    """

    def __init__(self, timeline: TurnTimeline, result: TurnResult,
                 gate_open: Callable[[], bool], now: Callable[[], float],
                 paused: Callable[[], bool] = lambda: False):
        self.t, self.result, self.gate_open, self.now = timeline, result, gate_open, now
        self.paused = paused
        """The reply is paused on the line (a barge-in being heard): it needs no audio now,
        and the ASR of the caller's sound must not wait behind it."""
        self.llm_rank = Ranked(self.llm())
        self.tts_rank = Ranked(self.tts())

    def refresh(self) -> None:
        """The ranks as the turn stands now (the call's loop, after each message)."""
        self.llm_rank.value = self.llm()
        self.tts_rank.value = self.tts()

    def _at(self, level: int) -> tuple[int, float]:
        # Earliest deadline first within a level: the caller who stopped speaking first.
        return level, self.t.speech_end_at or 0.0

    def short(self, below: float = LOW_WATER_S) -> bool:
        """The reply is playing and less than ``below`` seconds of it are left queued."""
        t = self.t
        if t.tts_first_audio_at is None:
            return False
        played = 0.0 if t.first_frame_out_at is None else self.now() - t.first_frame_out_at
        return self.result.audio_out_s - played < below

    def hurry(self) -> bool:
        """Cut the reply's next chunk at a phrase: its audio is about to run out."""
        return self.short(HURRY_S)

    def _later(self) -> tuple[int, float]:
        urgent = self.short() and not self.paused()
        return self._at(Priority.FIRST_AUDIO if urgent else Priority.PLAYOUT)

    def llm(self) -> tuple[int, float]:
        if not self.gate_open():
            return self._at(Priority.SPECULATIVE)
        if self.t.first_chunk_text_at is None:
            return self._at(Priority.FIRST_AUDIO)
        # Text for the first clause exists: its TTS comes first, then keep ahead of playout.
        if self.t.tts_first_audio_at is None:
            return self._at(Priority.PLAYOUT)
        return self._later()

    def tts(self) -> tuple[int, float]:
        if not self.gate_open():
            return self._at(Priority.SPECULATIVE)
        if self.t.tts_first_audio_at is None:
            return self._at(Priority.FIRST_AUDIO)
        return self._later()
