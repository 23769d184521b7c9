"""A reply's state machine: its one state value, the allowed transitions, and its audio gate.

A :class:`~agent.turn.reply.Reply` is in exactly one :class:`ReplyState`; what it has in
flight (a decode step, a clause's speech, a tool) is counted apart, since speech runs while the
model still streams. Everything else a reply used to keep as flags is read from these two.
The :class:`AudioGate` is the one owner of "may this turn be heard": made with the turn,
opened once by turn-taking (through the worker), read by the reply and its priorities.
Imports nothing of the call.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future


class ReplyState(enum.Enum):
    """Where a reply is; see :data:`TRANSITIONS` for the ways on."""

    NEW = "new"
    """Made, not started."""
    ASKING = "asking"
    """The model streams the answer (again, after a tool's answer or a refused sentence)."""
    TOOL_HELD = "tool-held"
    """A tool call waits for the gate: a speculative turn runs no tool."""
    TOOL = "tool"
    """An HTTP or MCP tool runs; its answer goes back to the model."""
    SPEAKING = "speaking"
    """No more words to come: the clauses left are spoken (a phrase, the answer's rest)."""
    APOLOGISING = "apologising"
    """The model said nothing usable: the apology is spoken instead of silence."""
    REPEATING = "repeating"
    """The transcript was a guess: the ``repeat`` phrase is spoken, the history untouched."""
    EMPTY = "empty"
    """Nothing to answer (no words, or cancelled before it began)."""
    DONE = "done"
    """Its result is reported (``on_done``)."""


S = ReplyState
TRANSITIONS: dict[ReplyState, frozenset[ReplyState]] = {
    S.NEW: frozenset({S.ASKING, S.TOOL_HELD, S.SPEAKING, S.REPEATING, S.EMPTY}),
    S.ASKING: frozenset({S.ASKING, S.TOOL_HELD, S.SPEAKING}),
    S.TOOL_HELD: frozenset({S.TOOL, S.SPEAKING}),
    S.TOOL: frozenset({S.ASKING, S.SPEAKING}),
    S.SPEAKING: frozenset({S.APOLOGISING, S.DONE}),
    S.APOLOGISING: frozenset({S.DONE}),
    S.REPEATING: frozenset({S.DONE}),
    S.EMPTY: frozenset({S.DONE}),
    S.DONE: frozenset(),
}
"""Every state a reply may go to from each (ASKING to itself: the model asked again)."""
LLM_OVER = frozenset({S.SPEAKING, S.APOLOGISING, S.REPEATING, S.EMPTY, S.DONE})
"""States in which the model has nothing more to say this turn."""


class IllegalTransition(RuntimeError):
    """A state machine was asked to go where its table does not allow: a bug."""


def check(table: dict, old, new) -> None:
    """Raise :class:`IllegalTransition` unless ``table`` allows ``old`` -> ``new``.

    States are an enum's members or plain names (the call's).
    """
    if new not in table[old]:
        raise IllegalTransition(f"{getattr(old, 'value', old)} -> {getattr(new, 'value', new)}")


class AudioGate:
    """Whether a turn's audio may be heard: closed while it is speculative, then open for good.

    Args:
        is_open: open from the start (a turn that was endpointed before its reply began).
    """

    def __init__(self, is_open: bool = False):
        self._open = is_open
        self._waiting: list[Callable[[], None]] = []

    @property
    def is_open(self) -> bool:
        return self._open

    def open(self) -> bool:
        """Open it and run what waited for it; False if it was open already."""
        if self._open:
            return False
        self._open = True
        waiting, self._waiting = self._waiting, []
        for fn in waiting:
            fn()
        return True

    def when_open(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` once the gate opens (never, if it was open already)."""
        if not self._open:
            self._waiting.append(fn)


class InFlight:
    """A reply's jobs out, by kind (``llm``, ``tts``, ``tool``): each counts until it is back.

    Args:
        submit: :meth:`~agent.call.jobs.CallJobs.submit` (the continuation runs on the loop).
        cancel: the turn's cancel (queued jobs of a cancelled turn never run).
    """

    def __init__(self, submit: Callable[..., Future], cancel,
                 feed: Callable[..., None] | None = None):
        self._submit = submit
        self._cancel = cancel
        self.feed_in = feed
        """:meth:`~agent.call.jobs.CallJobs.feed`; None: nothing is pushed, all is stepped."""
        self._out: Counter[str] = Counter()

    def __getitem__(self, kind: str) -> int:
        return self._out[kind]

    def __bool__(self) -> bool:
        return any(self._out.values())

    def submit(self, kind: str, fn: Callable, *args, stage: str, priority,
               then: Callable[[Future], None]) -> None:
        self._out[kind] += 1

        def back(f: Future) -> None:
            self._out[kind] -= 1
            then(f)
        self._submit(fn, *args, stage=stage, priority=priority, cancel=self._cancel, then=back)

    def feed(self, kind: str, start: Callable, each: Callable[[Future], None]) -> None:
        """Items another thread pushes (``start(put, end)``), each to ``each`` on the loop.

        Out until its last: the future whose result is None, or that raised.
        """
        self._out[kind] += 1

        def back(f: Future) -> None:
            if f.exception() is not None or f.result() is None:
                self._out[kind] -= 1
            each(f)
        self.feed_in(start, back)


def timed(fn: Callable, now: Callable[[], float]) -> Callable:
    """``fn`` returning its result and the clock when it came (stamped where it ran).

    The stamp comes back as a value with the job's result: only the call's loop writes the
    turn's timeline.
    """

    def run(*args):
        return fn(*args), now()
    return run
