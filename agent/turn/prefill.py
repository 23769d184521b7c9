"""The caller's words so far into the LLM's cache while they still speak (background work).

A turn's prompt is the call's history plus the question; read after the caller stops, the
question's ~25 tokens cost ~0.4 s on 2 cores. Every ``audio.prefill_every_s`` of speech the
call's worker hands the audio so far here: it is transcribed and its words (less the last,
which the audio may end inside) evaluated into the call's KV sequence, so the turn reads only
its last words. Only where the backend can (``LLM.can_prefill``), and only in idle time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np

from agent.turn.runner import TurnRunner
from models.llm.base import Message
from models.priority import Priority
from models.scheduler import Scheduler

PREFILL_QUIET_S = 0.3
"""The words so far are transcribed and prefilled only after the CPU has had no other work
for this long (and none waits): a background job is not preempted, and started in the gap
between two jobs of another caller's turn it delays that turn. Measured, bench call, 4
callers at once, without this: voice-to-voice p95 6.45 s against 5.31 s with no prefill."""
PREFILL_MAX_WAIT_S = 0.1
PREFILL_LOAD_WINDOW_S = 30.0
"""Nor, while other calls are up, when callers' first-audio work has lately waited for the CPU
(p90 over more than ``PREFILL_MAX_WAIT_S``, over this window): under load the idle moments are
short and a background pass that starts in one still delays the next turn. Measured, bench
call, 4 callers at once, with the idle-time rule alone: p95 5.93 s against 5.31 s with no
prefill (one call: p50 1.20 s against 1.32 s, first token 0.26 s against 0.42 s). A call alone
ignores it: the waits it then sees are its own reply's jobs queued behind each other (a clause's
TTS behind the next decode step), and with it a quarter of a lone caller's questions were
never prefilled.

Nor while another call is busy (its caller speaks, or its turn waits for its first audio):
its turn will want the CPU within the second, and this turn will run on the profile's
``under_load`` models, not the ones prefilled. Measured, bench call, 4 callers at once,
before this rule: of ~60 attempts in 40 calls none was prefilled, yet 3-13 ran their ASR pass
first, and 1-2 of those a run held up another turn's first-audio work by ~150 ms."""


def prefill_words(runner: TurnRunner, audio: np.ndarray, history: list[Message],
                  cancel: threading.Event, others_idle: Callable[[], bool],
                  alone: Callable[[], bool], scheduler: Scheduler) -> int:
    """ASR of the speech so far, then its words into the LLM's cache; tokens evaluated.

    Dropped at ``cancel`` (the turn starts), or when ``others_idle`` says another call is busy;
    ``alone`` (no other call is up) lifts the measured-load rule. Runs as a background job of
    ``scheduler`` (priority and cancel event set by whoever submitted it).

    Raises:
        JobCancelled: ``cancel`` was set while the ASR pass waited for the CPU.
    """
    stages = runner.stages
    if (not stages.llm.can_prefill or not others_idle()
            or not scheduler.quiet_for(PREFILL_QUIET_S)
            or (not alone() and scheduler.recent_wait(Priority.FIRST_AUDIO,
                                                      PREFILL_LOAD_WINDOW_S)
                > PREFILL_MAX_WAIT_S)):
        return 0
    words = stages.asr.transcribe_in_steps(audio).text.split()[:-1]
    if (not words or cancel.is_set() or not others_idle()
            or not scheduler.quiet_for(PREFILL_QUIET_S)):
        return 0
    return stages.llm.prefill(runner.prompt(history, " ".join(words)), cancel)
