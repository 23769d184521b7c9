"""What a model job is to the scheduler: its priority and its cancel event, set by the caller.

The turn runner knows what the caller is waiting for; the models do not. So the agent sets a
priority (and an event that drops the job while it still waits) on its thread's context, and
every model job started in that context carries them to :mod:`models.scheduler`. A priority
may be a callable, evaluated each time a slot is handed out (a speculative ASR pass that
becomes the real one moves up). Imports nothing from the project.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import IntEnum


class Priority(IntEnum):
    """Lower runs first."""

    END_OF_TURN = 0
    FIRST_AUDIO = 1
    SPECULATIVE = 2
    PLAYOUT = 3
    BACKGROUND = 4


Rank = int | tuple[int, float]
"""A priority level, or (level, deadline): within a level the earliest deadline goes first."""
PriorityLike = Rank | Callable[[], Rank]
_current: contextvars.ContextVar[PriorityLike] = contextvars.ContextVar(
    "callagent_priority", default=Priority.FIRST_AUDIO)
_cancel: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar(
    "callagent_cancel", default=None)


def rank_of(p: PriorityLike) -> tuple[int, float]:
    """``(level, deadline)`` of a priority now (a callable is evaluated)."""
    p = p() if callable(p) else p
    level, deadline = p if isinstance(p, tuple) else (p, 0.0)
    return int(level), deadline


class JobCancelled(Exception):
    """The job's cancel event was set while it waited for a slot: its work never ran."""


@contextmanager
def priority(value: PriorityLike) -> Iterator[None]:
    """Model jobs started by this thread (in this context) get ``value``."""
    token = _current.set(value)
    try:
        yield
    finally:
        _current.reset(token)


@contextmanager
def cancel_on(event: threading.Event) -> Iterator[None]:
    """Model jobs started in this context never run if ``event`` is set while they wait.

    They raise :class:`JobCancelled` instead.
    """
    token = _cancel.set(event)
    try:
        yield
    finally:
        _cancel.reset(token)


def current_priority() -> PriorityLike:
    """The priority this context's model jobs get (for threads the caller starts)."""
    return _current.get()


def current_cancel() -> threading.Event | None:
    """The event this context's model work is cancelled by (:func:`cancel_on`), if any."""
    return _cancel.get()
