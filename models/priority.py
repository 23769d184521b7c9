"""What a model job is to the scheduler: its priority and its cancel, set by the caller.

The turn runner knows what the caller is waiting for; the models do not. So the agent sets a
priority (and a :class:`Cancel` that drops the job while it still waits) on its thread's
context, and every model job started in that context carries them to :mod:`models.scheduler`.
A priority may change while its job waits (a speculative ASR pass that becomes the real one
moves up): it is then a :class:`Ranked`, a value its owner (the call's loop) sets again as
the turn moves on, and that the scheduler reads each time a slot is handed out; the scheduler
never evaluates the turn's state itself. A cancel tells whoever waits on its behalf (the
scheduler's queue, an LLM engine's reader) the moment it is set: nothing waits on a timeout to
look again. Imports nothing from the project.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import IntEnum
from typing import Protocol


class Priority(IntEnum):
    """Lower runs first."""

    END_OF_TURN = 0
    FIRST_AUDIO = 1
    SPECULATIVE = 2
    PLAYOUT = 3
    BACKGROUND = 4


class Cancellable(Protocol):
    """What a model wait needs of a cancel: whether it is set, and a wake-up when it is."""

    def is_set(self) -> bool: ...

    def watch(self, wake: Callable[[], None]) -> Callable[[], None]:
        """Call ``wake`` once when set (at once if it is already); returns the unwatch."""
        ...


class Cancel(threading.Event):
    """A turn's (or a job's) cancel: an event, set once, that wakes its watchers when set.

    A model wait done for a cancellable job (a scheduler slot, an engine's next token) hands
    :meth:`watch` a wake-up that notifies what it waits on, and so ends the moment :meth:`set`
    is called, from whatever thread calls it. The wake-ups run on the setter's thread, after
    the event is set and outside the cancel's own lock: a wake-up only notifies (it takes the
    waiter's lock briefly, never one the setter could hold while it waits). Never cleared.
    """

    def __init__(self) -> None:
        super().__init__()
        self._watch_lock = threading.Lock()
        self._wakes: dict[object, Callable[[], None]] = {}

    def set(self) -> None:
        with self._watch_lock:
            if self.is_set():
                return
            super().set()
            wakes, self._wakes = list(self._wakes.values()), {}
        for wake in wakes:
            wake()

    def clear(self) -> None:
        raise TypeError("a Cancel is never cleared: the next job gets a new one")

    def watch(self, wake: Callable[[], None]) -> Callable[[], None]:
        """Call ``wake`` once when this is set (at once, here, if it is already).

        Returns the unwatch: call it when the wait is over (calling it late is harmless).
        """
        with self._watch_lock:
            if not self.is_set():
                key = object()  # this registration's own (one wake-up may watch twice)
                self._wakes[key] = wake
                return lambda: self._unwatch(key)
        wake()
        return _nothing

    def _unwatch(self, key: object) -> None:
        with self._watch_lock:
            self._wakes.pop(key, None)


def _nothing() -> None:
    pass


Rank = int | tuple[int, float]
"""A priority level, or (level, deadline): within a level the earliest deadline goes first."""


class Ranked:
    """A priority that changes while its work waits: one value, set by its owner's thread.

    The owner (a call's loop) works the rank out from its own state and sets :attr:`value`;
    the scheduler and the LLM engine read it (calling it) when they choose what runs next.
    A rank is an immutable value, so a reader sees the old one or the new one, never a mix.
    """

    __slots__ = ("value",)

    def __init__(self, value: Rank):
        self.value = value

    def __call__(self) -> Rank:
        return self.value


PriorityLike = Rank | Callable[[], Rank]
_current: contextvars.ContextVar[PriorityLike] = contextvars.ContextVar(
    "callagent_priority", default=Priority.FIRST_AUDIO)
_cancel: contextvars.ContextVar[Cancellable | None] = contextvars.ContextVar(
    "callagent_cancel", default=None)


def rank_of(p: PriorityLike) -> tuple[int, float]:
    """``(level, deadline)`` of a priority now (a callable is evaluated)."""
    p = p() if callable(p) else p
    level, deadline = p if isinstance(p, tuple) else (p, 0.0)
    return int(level), deadline


class JobCancelled(Exception):
    """The job's cancel was set while it waited for a slot: its work never ran."""


@contextmanager
def priority(value: PriorityLike) -> Iterator[None]:
    """Model jobs started by this thread (in this context) get ``value``."""
    token = _current.set(value)
    try:
        yield
    finally:
        _current.reset(token)


@contextmanager
def cancel_on(cancel: Cancellable) -> Iterator[None]:
    """Model jobs started in this context never run if ``cancel`` is set while they wait.

    They raise :class:`JobCancelled` instead.
    """
    token = _cancel.set(cancel)
    try:
        yield
    finally:
        _cancel.reset(token)


@contextmanager
def watching(cancel: Cancellable | None, wake: Callable[[], None]) -> Iterator[None]:
    """While the block runs, ``cancel`` being set calls ``wake`` (at once if it is already).

    For a wait on something else (a condition) that must also end when the cancel is set:
    ``wake`` notifies it. Nothing when ``cancel`` is None.
    """
    unwatch = None if cancel is None else cancel.watch(wake)
    try:
        yield
    finally:
        if unwatch is not None:
            unwatch()


def current_priority() -> PriorityLike:
    """The priority this context's model jobs get (for threads the caller starts)."""
    return _current.get()


def current_cancel() -> Cancellable | None:
    """What this context's model work is cancelled by (:func:`cancel_on`), if any."""
    return _cancel.get()
