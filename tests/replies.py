"""Drive one :class:`~agent.turn.reply.Reply` to its end outside a call, for runner-level tests.

A call's loop does this with its inbox; here a small loop of the same shape runs the reply's
jobs on a real scheduler (and takes the pieces a pushing engine hands over, as a call does)
and applies the test's gate and cancel events as they are set.
"""

from __future__ import annotations

import queue
import threading

import numpy as np

from agent.call.jobs import CallJobs
from agent.call.messages import JobDone
from agent.turn.reply import Reply
from agent.turn.result import TurnResult
from agent.turn.runner import TurnRunner
from agent.turn.timeline import TurnTimeline
from models.priority import Cancel
from models.vad.segmenter import Utterance


def utterance(seconds: float = 1.0) -> Utterance:
    return Utterance(audio=np.ones(int(16000 * seconds), np.float32) * 0.1, start_s=0.0,
                     end_s=seconds, endpoint_s=seconds + 0.5, vad=None)


def answer(runner: TurnRunner, history: list, emit=None, gate: threading.Event | None = None,
           cancel: Cancel | None = None, alone=lambda: True,
           timeline: TurnTimeline | None = None, timeout: float = 30.0,
           escalate: TurnRunner | None = None) -> tuple[TurnResult, TurnTimeline]:
    """Transcribe a second of audio and answer it; raises what the reply failed with."""
    timeline = timeline or TurnTimeline(speech_end_at=0.0, endpoint_at=0.0)
    cancel = cancel or Cancel()
    inbox: queue.SimpleQueue = queue.SimpleQueue()
    jobs = CallJobs(runner.stages.llm.scheduler, inbox.put)
    out: dict = {}
    utt = utterance()
    heard = (lambda pcm, clause: emit(pcm)) if emit else (lambda pcm, clause: None)
    reply = Reply(runner, timeline, history, jobs.submit, heard, cancel,
                  on_done=lambda r, e: out.update(result=r, error=e), gated=gate is not None,
                  alone=alone, audio_in_s=utt.duration_s, escalate=escalate, feed=jobs.feed)
    tr = runner.stages.asr.transcribe(utt.audio)
    timeline.asr_done_at = timeline.asr_done_at or 0.0
    reply.start(tr)
    waited = 0.0
    while "result" not in out:
        if gate is not None and gate.is_set():
            reply.open_gate()
        if cancel.is_set() and not reply.done:
            reply.stop()
        try:
            msg = inbox.get(timeout=0.01)
        except queue.Empty:
            waited += 0.01
            assert waited < timeout, "the reply never ended"
            continue
        assert isinstance(msg, JobDone)
        jobs.done(msg)
        reply.urgency.refresh()  # as a call's loop does after each message
    if out["error"] is not None:
        raise out["error"]
    return out["result"], timeline
