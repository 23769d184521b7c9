"""The caller's words so far into the LLM's cache while they still speak (background work).

A turn's prompt is the call's history plus the question; read after the caller stops, the
question's tokens delay the first token (``bench call``, one call). Every ``audio.prefill_every_s``
of speech the call's worker hands the audio so far here: it is transcribed and its words (less the
last, which the audio may end inside) evaluated into the call's KV sequence, so the turn reads only
its last words. Only where the backend can (``LLM.can_prefill``), and only in idle time
(:meth:`~agent.turn.load.LoadPolicy.may_prefill`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from agent.turn.runner import TurnRunner
from models.llm.base import Message
from models.priority import Cancellable


def prefill_words(runner: TurnRunner, audio: np.ndarray | None, history: list[Message],
                  cancel: Cancellable, may: Callable[[bool], bool]) -> int:
    """ASR of the speech so far, then its words into the LLM's cache; tokens evaluated.

    ``audio`` None: no words, the history alone, up to where the next turn's words go (the
    last reply's end and the chat template's opening of a caller's message).

    Dropped at ``cancel`` (the turn starts), or when ``may`` (the load policy's
    :meth:`~agent.turn.load.LoadPolicy.may_prefill`) says no, before the ASR pass and again
    before the LLM's. Runs as a background job of the scheduler (priority and cancel
    set by whoever submitted it).

    Raises:
        JobCancelled: ``cancel`` was set while the ASR pass waited for the CPU.
    """
    stages = runner.stages
    if not stages.llm.can_prefill or not may(False):
        return 0
    if audio is None:
        return stages.llm.prefill(runner.prompt(history, ""), cancel)
    words = stages.asr.transcribe_in_steps(audio).text.split()[:-1]
    if not words or cancel.is_set() or not may(True):
        return 0
    return stages.llm.prefill(runner.prompt(history, " ".join(words)), cancel)
