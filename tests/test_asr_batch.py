"""Callers' utterances that wait for the CPU together are transcribed in one Whisper pass."""

from __future__ import annotations

import threading
from contextlib import contextmanager

import numpy as np
import pytest

from dialplan.options import ASROptions
from models.audio import ASR_RATE, PHONE_RATE, pcm16_to_float, resample, through_phone_line
from models.priority import Cancel, JobCancelled, Priority, cancel_on, priority
from models.scheduler import Scheduler
from testkit.samples import spoken
from tests.waiting import hold_the_slot, wait_until

pytestmark = [pytest.mark.model, pytest.mark.tool]  # espeak-ng says the questions

QUESTIONS = (
    "What time does the library open on Saturday?",
    "Can I renew my books over the phone?",
    "Is the library open on Sunday?",
    "Do you have any books about gardening for children?",
)


def _line(text: str, voice: str) -> np.ndarray:
    audio, rate = spoken(text, voice=voice)
    return resample(pcm16_to_float(through_phone_line(audio, rate)), PHONE_RATE, ASR_RATE)


@contextmanager
def observing(scheduler: Scheduler, observer):
    """``observer`` sees the scheduler's jobs (the model's) inside the block only."""
    scheduler.observe(observer)
    try:
        yield
    finally:
        scheduler.unobserve(observer)


@pytest.fixture(scope="module")
def lines():
    # Two voices; three share an encoder window (8 s), one has its own (9 s).
    return [_line(q, "en-us" if i % 2 else "en+f3") for i, q in enumerate(QUESTIONS)]


@pytest.mark.parametrize("model", ["base", "tiny.en"])
def test_a_batch_hears_what_each_utterance_alone_hears(stage_cache, lines, model):
    asr = stage_cache.models.asr(ASROptions(model=model))
    alone = [asr.transcribe_batch([line])[0] for line in lines]
    together = asr.transcribe_batch(lines)
    assert [t.text for t in together] == [t.text for t in alone]
    assert "library" in together[0].text.lower(), together[0].text
    assert [t.metrics.batch_size for t in together] == [4] * 4
    windows = [asr._window_frames(line) for line in lines]
    assert sorted(windows) == [800, 800, 800, 900]  # one pass of three, one alone
    for a, b in zip(alone, together, strict=True):
        assert b.avg_logprob == pytest.approx(a.avg_logprob, abs=0.05)
        assert b.no_speech_prob == pytest.approx(a.no_speech_prob, abs=0.05)


def test_silence_in_a_batch_is_heard_as_nothing(stage_cache, lines):
    asr = stage_cache.models.asr(ASROptions(model="base"))
    quiet = np.zeros(2 * ASR_RATE, np.float32)
    alone = asr.transcribe_batch([quiet])[0].text
    texts = [t.text for t in asr.transcribe_batch([lines[0], quiet, np.zeros(0, np.float32)])]
    assert texts[1] == alone and texts[2] == ""
    assert "library" in texts[0].lower()


def test_calls_waiting_for_the_cpu_share_one_pass(stage_cache, lines):
    """Those of one encoder window share a pass; the other window is a job of its own.

    The scheduler may run it beside them on a core each (it would run after them in one job).
    """
    asr = stage_cache.models.asr(ASROptions(model="tiny.en"))
    assert asr.narrow
    alone = [asr.transcribe(line).text for line in lines]
    notes: list[str] = []

    def seen(job):
        if job.stage == "asr":
            notes.append(job.note)

    with observing(asr.scheduler, seen):
        release = hold_the_slot(asr.scheduler)
        notes.clear()
        heard: dict[int, str] = {}

        def caller(i: int) -> None:
            heard[i] = asr.transcribe(lines[i]).text

        callers = [threading.Thread(target=caller, args=(i,)) for i in range(len(lines))]
        for t in callers:
            t.start()
        # All four queued behind the other call's job: three in one group, one in another.
        assert wait_until(lambda: sum(len(g.members) for g in asr._coalescer._open.values()) == 4,
                          timeout=10)
        assert sorted(len(g.members) for g in asr._coalescer._open.values()) == [1, 3]
        assert asr.scheduler.stats().waiting == 2
        release.set()
        for t in callers:
            t.join(30)
        assert [heard[i] for i in range(len(lines))] == alone
        assert sorted(notes) == ["", "utterances=3"]


@pytest.mark.parametrize("model", ["base", "tiny.en"])
def test_a_background_pass_in_two_jobs_hears_what_one_job_hears(stage_cache, lines, model):
    # The words so far (cut at 1.2 s and 2.4 s of the line) and whole questions, two voices.
    asr = stage_cache.models.asr(ASROptions(model=model))
    jobs = []
    for line in lines:
        for audio in (line[:int(1.2 * ASR_RATE)], line[:int(2.4 * ASR_RATE)], line):
            one = asr.transcribe_batch([audio])[0]
            jobs.clear()
            with observing(asr.scheduler, jobs.append):
                steps = asr.transcribe_in_steps(audio)
            assert steps.text == one.text
            assert [(j.stage, j.note) for j in jobs] == [("asr", "encode"), ("asr", "decode")]


def test_a_background_pass_cancelled_after_its_encoder_never_decodes(stage_cache, lines):
    asr = stage_cache.models.asr(ASROptions(model="base"))
    cancel, jobs = Cancel(), []

    def seen(trace):
        jobs.append(trace.note)
        if trace.note == "encode":
            cancel.set()  # the caller stopped speaking: their turn's own pass takes over

    with (observing(asr.scheduler, seen), priority(Priority.BACKGROUND), cancel_on(cancel),
          pytest.raises(JobCancelled)):
        asr.transcribe_in_steps(lines[0])
    assert jobs == ["encode"]
