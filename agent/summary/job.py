"""One post-call summary: the request to the profile's LLM, its reply read into notes.

Runs on a worker of the process scheduler (:meth:`~models.scheduler.Scheduler.submit`) at the
priority its submitter set, background, so each of its model steps waits for any caller's
work. The LLM is the profile's own, already loaded for its calls. A backend that constrains
its sampling (:attr:`~models.llm.base.LLM.constrains`) is held to the JSON object by its
grammar; another gets the same request and its free text is parsed leniently
(:func:`~agent.summary.notes.parse`). Imports no database code.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agent.summary.notes import Notes, NotesError, max_tokens, parse, request, shape
from dialplan.profile import Profile
from models.llm.base import LLM
from models.priority import Cancellable, JobCancelled


@dataclass(frozen=True)
class Outcome:
    """What one try made of a call."""

    state: str
    """``done`` or ``failed`` (the reply was not the notes asked for)."""
    notes: Notes | None
    detail: str = ""
    """Why it failed."""
    seconds: float = 0.0
    """From the request to the reply's end."""
    tokens: int = 0
    prompt_tokens: int = 0
    text: str = ""
    """The LLM's reply as it came."""


def make_notes(llm: LLM, profile: Profile, turns: Sequence[tuple[str, str]],
               cancel: Cancellable | None = None, grammar: bool = True,
               alone: Callable[[], bool] | None = None) -> Outcome:
    """Ask ``llm`` for ``profile``'s notes on a call of ``turns``.

    ``grammar`` False asks a constraining backend for free text too (``bench summary``'s
    baseline: what the grammar is worth). ``alone()``: no call is up (see
    :meth:`~models.llm.base.LLM.complete`).

    Raises:
        JobCancelled: ``cancel`` was set before the reply ended (nothing is recorded: the
            call's summary is tried again later).
        Exception: whatever the LLM raised (a server down): the caller retries later.
    """
    obj = shape(profile)
    limit = max_tokens(obj)
    budget = llm.options.n_ctx - limit if llm.options is not None else None
    messages = request(profile, turns, llm.count_tokens, budget)
    started = time.monotonic()
    stream = llm.complete(messages, limit, obj if llm.constrains and grammar else None,
                          alone=alone)
    try:
        text = "".join(stream)
    finally:
        stream.close()
    if cancel is not None and cancel.is_set():
        # llama-batch ends a cancelled reply quietly: what came is not the whole reply.
        raise JobCancelled("summary")
    m = stream.metrics
    took = time.monotonic() - started
    try:
        notes = parse(text, obj)
    except NotesError as e:
        return Outcome("failed", None, str(e), took, m.tokens, m.prompt_tokens, text)
    return Outcome("done", notes, "", took, m.tokens, m.prompt_tokens, text)
