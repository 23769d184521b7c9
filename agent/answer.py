"""One turn answered outside a call: a transcript in, the turn's result and its stamps out.

Beside :mod:`agent.simulate` (a call without a phone line), this is a turn without a call.
What a call's loop does for a turn, on a loop of its own: a real
:class:`~agent.turn.reply.Reply` on the runner's stages (the same prompt, tools, checks and
under-load escalation), its model work in the process scheduler, its completions and the
pieces a pushing LLM hands over taken here one message at a time. The benches that ask typed
or transcribed questions (``bench tools``, ``bench answers``) answer through this, not through
the call's internals.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable

import numpy as np

from agent.call.jobs import CallJobs
from agent.turn.reply import Reply
from agent.turn.result import TurnResult
from agent.turn.runner import TurnRunner
from agent.turn.timeline import TurnTimeline
from models.asr.base import Transcript
from models.priority import Cancel


def answer(runner: TurnRunner, tr: Transcript, history: list | None = None, *,
           audio_in_s: float = 0.0, escalate: TurnRunner | None = None,
           emit: Callable[[np.ndarray], None] | None = None,
           timeout_s: float = 300.0) -> tuple[TurnResult, TurnTimeline]:
    """Answer ``tr`` as a call's turn does; its result and its stamps from ``tr`` on.

    Args:
        runner: the profile's stages and prompt (its under-load one's, to answer as under load).
        tr: what the caller said.
        history: the call's messages so far, which the reply reads and appends this turn to
            (as a call's does); None: a fresh list, the call's first turn.
        audio_in_s: how long the caller spoke (the result's ``audio_in_s``).
        escalate: the profile's own runner where ``runner`` is its under-load one.
        emit: receives the reply's audio (int16 at the runner's line rate), as the line would.
        timeout_s: the whole reply's deadline: past it, :class:`TimeoutError`.

    Raises what the reply failed with.
    """
    inbox: queue.SimpleQueue = queue.SimpleQueue()
    jobs = CallJobs(runner.stages.llm.scheduler, inbox.put)
    out: dict = {}
    t0 = time.monotonic()
    timeline = TurnTimeline(speech_end_at=t0, endpoint_at=t0, asr_done_at=t0)
    reply = Reply(runner, timeline, [] if history is None else history, jobs.submit,
                  (lambda pcm, clause: emit(pcm)) if emit else (lambda pcm, clause: None),
                  Cancel(), on_done=lambda r, e: out.update(result=r, error=e),
                  audio_in_s=audio_in_s, escalate=escalate, feed=jobs.feed)
    reply.start(tr)
    deadline = t0 + timeout_s
    while "result" not in out:
        try:
            jobs.done(inbox.get(timeout=max(0.0, deadline - time.monotonic())))
        except queue.Empty:
            raise TimeoutError(f"no reply to {tr.text!r} in {timeout_s:g} s") from None
        reply.urgency.refresh()  # as a call's loop does after each message
    if out["error"] is not None:
        raise out["error"]
    return out["result"], timeline
