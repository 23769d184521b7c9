"""A caller utterance being answered: the data of one turn, owned by its call's loop.

Only the call's loop reads and writes a :class:`Turn`. Model work for it runs in the
process scheduler's workers and reaches the turn as messages; the one field they read is
``cancel``, a :class:`~models.priority.Cancel` that wakes the scheduler (and an LLM engine), so
that a job of a cancelled turn that still waits for the CPU never runs; the value they read is
``asr_rank``, its transcription's priority, which the loop sets as the turn is taken. Imports
nothing of the call's other modules.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from agent.turn.reply import Reply
from agent.turn.reply_state import AudioGate, check
from agent.turn.result import TurnResult
from agent.turn.timeline import TurnTimeline
from models.priority import Cancel, Priority, Ranked
from models.vad.segmenter import SpeechPaused, Utterance


class Taking(enum.Enum):
    """Where turn-taking has the turn: whether the caller has finished the words it answers."""

    SPECULATIVE = "speculative"
    """Started at a pause; the caller may go on."""
    ENDPOINTED = "endpointed"
    """The caller finished (the VAD hangover ran out, or the end-of-turn model said so)."""
    MERGED = "merged"
    """Dropped because the caller went on talking: its words join the next turn's."""


class Work(enum.Enum):
    """How far the turn's work (ASR, the reply) has got."""

    RUNNING = "running"
    FINISHED = "finished"
    """Over: its :class:`~agent.call.messages.TurnDone` is posted."""
    DONE = "done"
    """The session has handled that message."""


T, W = Taking, Work
TAKING = {T.SPECULATIVE: frozenset({T.ENDPOINTED, T.MERGED}),
          T.ENDPOINTED: frozenset({T.ENDPOINTED, T.MERGED}),
          T.MERGED: frozenset({T.MERGED})}
"""The ways on (to itself: a second endpoint or merge of the same turn changes nothing)."""
WORK = {W.RUNNING: frozenset({W.FINISHED}), W.FINISHED: frozenset({W.DONE}),
        W.DONE: frozenset()}


@dataclass(eq=False)
class Turn:
    """A caller utterance being answered."""

    index: int
    utterance: Utterance | SpeechPaused
    timeline: TurnTimeline
    history_len: int
    """Length of the call's history before this turn (rolled back to it if merged away); set
    again when its work begins, once the turns before it have finished."""
    after: Turn | None = None
    """A previous turn that must finish first (it may still append to the history)."""
    merged_from: Turn | None = None
    """The earlier, unanswered turn whose utterance this one continues."""
    # -- turn-taking's decisions
    taking: Taking = Taking.SPECULATIVE
    """Changed only by :meth:`take`."""
    hold_until: float | None = None
    """Clock deadline of the pause-tolerance wait, once one started."""
    barge_in: bool = False
    filled: bool = False
    """The session said the filler phrase while this turn's answer was late."""
    gate: AudioGate = field(default_factory=AudioGate)
    """Whether its audio may be heard: opened (once) when it is endpointed and its words do
    not sound unfinished; its reply reads the same gate."""
    early_end: bool = False
    """Endpointed by the end-of-turn model, before the VAD hangover ran out."""
    cancel: Cancel = field(default_factory=Cancel)
    """Set once the turn is dropped (talked over, merged, hung up)."""
    # -- its work (agent.call.worker)
    end_probability: float | None = None
    """The end-of-turn model's verdict on a speculative turn."""
    transcript: str | None = None
    """Known right after ASR, before the LLM starts."""
    result: TurnResult | None = None
    error: str = ""
    audible: bool = False
    """Reply audio has been queued for playout (a fact of its output, kept once it ends)."""
    work: Work = Work.RUNNING
    """Changed only by :meth:`work_to`."""
    under_load: str = ""
    """The cheaper profile that answered this turn because the agent was overloaded."""
    ticket: int | None = None
    """Its place in the process's backlog until the caller hears it (or it ends)."""
    ahead: int = 0
    """Other calls' turns that were waiting for their first audio when this one entered."""
    reply: Reply | None = None
    """Its answer, once transcribed."""
    failed_at: float | None = None
    """When its work failed; it then waits for its gate to apologise."""
    typed: str | None = None
    """Keypad digits the caller typed ("keypad: 4729#"): the turn's words, with no audio."""
    asr_rank: Ranked = field(default_factory=lambda: Ranked(Priority.SPECULATIVE))
    """Its ASR pass's priority while it waits: speculative until the endpoint, then on the
    caller's critical path (set by :meth:`take`; the scheduler reads it)."""

    def __post_init__(self) -> None:
        self._rank()

    def _rank(self) -> None:
        level = Priority.FIRST_AUDIO if self.endpointed else Priority.SPECULATIVE
        self.asr_rank.value = (level, self.timeline.speech_end_at or 0.0)

    def take(self, new: Taking) -> None:
        """Turn-taking's decision (:data:`TAKING` says which are allowed)."""
        check(TAKING, self.taking, new)
        self.taking = new
        self._rank()

    def work_to(self, new: Work) -> None:
        check(WORK, self.work, new)
        self.work = new

    @property
    def endpointed(self) -> bool:
        return self.taking is Taking.ENDPOINTED

    @property
    def merged(self) -> bool:
        return self.taking is Taking.MERGED

    @property
    def finished(self) -> bool:
        """Its work is over (its :class:`~agent.call.messages.TurnDone` is posted)."""
        return self.work is not Work.RUNNING

    @property
    def done(self) -> bool:
        """The session has handled its :class:`~agent.call.messages.TurnDone`."""
        return self.work is Work.DONE

    @property
    def gate_open(self) -> bool:
        return self.gate.is_open

    @property
    def cancelled(self) -> bool:
        return self.cancel.is_set()

    @property
    def running(self) -> bool:
        """Its work is not over yet."""
        return not self.finished
