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
from models.scheduler import SCHEDULER, Priority, cancel_on, priority

PREFILL_QUIET_S = 0.3
"""The words so far are transcribed and prefilled only after the CPU has had no other work
for this long (and none waits): a background job is not preempted, and started in the gap
between two jobs of another caller's turn it delays that turn. Measured, bench call, 4
callers at once, without this: voice-to-voice p95 6.45 s against 5.31 s with no prefill."""

# Nor while another call has a turn waiting for its first audio: that turn wants the CPU now,
# and its next job would queue behind this pass. Other callers who are still speaking do not
# stop it: while four callers ask at once the CPU is idle until the first of them stops, and
# the words go into the model their turn will run on (the profile's ``under_load`` one, chosen
# by the worker). Before, no words were prefilled while another call was busy, and none at all
# while first-audio work had lately waited for the CPU (p90 over 0.1 s in 30 s): under load
# no turn's prompt was ever prefilled.


def prefill_words(runner: TurnRunner, audio: np.ndarray, history: list[Message],
                  cancel: threading.Event, others_idle: Callable[[], bool]) -> int:
    """ASR of the speech so far, then its words into the LLM's cache; tokens evaluated.

    Dropped at ``cancel`` (the turn starts), or when ``others_idle`` says another call's turn
    waits for its answer.

    Raises:
        JobCancelled: ``cancel`` was set while the ASR pass waited for the CPU.
    """
    stages = runner.stages
    if not stages.llm.can_prefill or not others_idle() or not SCHEDULER.quiet_for(PREFILL_QUIET_S):
        return 0
    with priority(Priority.BACKGROUND), cancel_on(cancel):
        words = stages.asr.transcribe_in_steps(audio).text.split()[:-1]
        if (not words or cancel.is_set() or not others_idle()
                or not SCHEDULER.quiet_for(PREFILL_QUIET_S)):
            return 0
        return stages.llm.prefill(runner.prompt(history, " ".join(words)), cancel)
