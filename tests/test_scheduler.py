"""The process scheduler hands its slot to waiting model jobs in priority order."""

from __future__ import annotations

import threading
import time

import pytest

from models.priority import Cancel, JobCancelled, Priority, cancel_on, priority
from models.scheduler import HANDOFF_S, Scheduler

pytestmark = pytest.mark.unit


def _job(sched: Scheduler, order: list[str], name: str, prio, hold: threading.Event | None = None):
    def run():
        with priority(prio), sched.job("tts"):
            order.append(name)
            if hold is not None:
                hold.wait(5)

    t = threading.Thread(target=run)
    t.start()
    return t


def _wait_queued(sched: Scheduler, n: int) -> None:
    deadline = time.monotonic() + 5
    while sched.stats().waiting < n:
        assert time.monotonic() < deadline
        time.sleep(0.001)


def test_a_first_clause_job_overtakes_a_later_sentence_job():
    sched, order, hold = Scheduler(), [], threading.Event()
    threads = [_job(sched, order, "busy", Priority.PLAYOUT, hold)]
    _wait_queued(sched, 0)
    while not order:
        time.sleep(0.001)
    threads.append(_job(sched, order, "later sentence", Priority.PLAYOUT))
    _wait_queued(sched, 1)
    threads.append(_job(sched, order, "speculative asr", Priority.SPECULATIVE))
    _wait_queued(sched, 2)
    threads.append(_job(sched, order, "first clause", Priority.FIRST_AUDIO))
    _wait_queued(sched, 3)
    hold.set()
    for t in threads:
        t.join(5)
    assert order == ["busy", "first clause", "speculative asr", "later sentence"]
    stats = sched.stats()
    assert (stats.jobs, stats.running, stats.waiting, stats.max_waiting) == (4, 0, 0, 3)


def test_a_waiting_job_whose_priority_rises_moves_up():
    sched, order, hold = Scheduler(), [], threading.Event()
    endpointed = threading.Event()
    threads = [_job(sched, order, "busy", Priority.FIRST_AUDIO, hold)]
    while not order:
        time.sleep(0.001)
    threads.append(_job(sched, order, "reply", Priority.PLAYOUT))
    _wait_queued(sched, 1)
    threads.append(_job(sched, order, "asr", lambda: Priority.FIRST_AUDIO if endpointed.is_set()
                        else Priority.BACKGROUND))
    _wait_queued(sched, 2)
    endpointed.set()  # the speculation became the real turn while it waited
    hold.set()
    for t in threads:
        t.join(5)
    assert order == ["busy", "asr", "reply"]


def test_jobs_never_overlap_and_nest_without_deadlock():
    sched = Scheduler()
    inside, peak = [0], [0]
    lock = threading.Lock()

    def work():
        for _ in range(20):
            with sched.job("asr"):
                with lock:
                    inside[0] += 1
                    peak[0] = max(peak[0], inside[0])
                with sched.job("asr"):  # e.g. transcribe() calling transcribe_batch()
                    time.sleep(0.0005)
                with lock:
                    inside[0] -= 1

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert peak[0] == 1
    assert sched.stats().jobs == 80


def test_within_a_level_the_caller_who_stopped_speaking_first_goes_first():
    sched, order, hold = Scheduler(), [], threading.Event()
    threads = [_job(sched, order, "busy", Priority.FIRST_AUDIO, hold)]
    while not order:
        time.sleep(0.001)
    # Call B's ASR queued first, but call A's caller stopped speaking earlier (deadline 10.0).
    threads.append(_job(sched, order, "asr of call B", (Priority.FIRST_AUDIO, 12.0)))
    _wait_queued(sched, 1)
    threads.append(_job(sched, order, "llm step of call A", (Priority.FIRST_AUDIO, 10.0)))
    _wait_queued(sched, 2)
    threads.append(_job(sched, order, "rest of a reply", (Priority.PLAYOUT, 1.0)))
    _wait_queued(sched, 3)
    hold.set()
    for t in threads:
        t.join(5)
    assert order == ["busy", "llm step of call A", "asr of call B", "rest of a reply"]


def test_a_queued_job_whose_caller_went_on_never_runs():
    """A speculative pass still waiting when its turn is cancelled leaves the queue unrun.

    One whose turn is cancelled only once it runs finishes (the model cannot be stopped).
    """
    sched, order, hold = Scheduler(), [], threading.Event()
    dropped, late = Cancel(), Cancel()
    outcome: dict[str, str] = {}

    def run(name, cancel, prio):
        try:
            with priority(prio), cancel_on(cancel), sched.job("asr"):
                order.append(name)
                if name == "late":
                    late.set()  # cancelled while it computes
            outcome[name] = "ran"
        except JobCancelled:
            outcome[name] = "cancelled"

    threads = [_job(sched, order, "busy", Priority.FIRST_AUDIO, hold)]
    while not order:
        time.sleep(0.001)
    for name, cancel, prio in (("speculation", dropped, Priority.SPECULATIVE),
                               ("late", late, Priority.FIRST_AUDIO)):
        threads.append(threading.Thread(target=run, args=(name, cancel, prio)))
        threads[-1].start()
    _wait_queued(sched, 2)
    dropped.set()  # the caller went on while the pass waited behind another call's work
    deadline = time.monotonic() + 5
    while "speculation" not in outcome:  # it leaves at once, not when the slot frees
        assert time.monotonic() < deadline
        time.sleep(0.001)
    assert sched.stats().waiting == 1
    hold.set()
    for t in threads:
        t.join(5)
    assert order == ["busy", "late"]
    assert outcome == {"speculation": "cancelled", "late": "ran"}
    stats = sched.stats()
    assert (stats.running, stats.waiting) == (0, 0)



def test_a_cancel_wakes_a_job_waiting_for_the_slot_without_a_timed_wait(monkeypatch):
    # The waiting job blocks untimed on its grant; its cancel's wake-up ends the wait (no
    # polling period to wait out).
    from models import pairing

    timeouts: list[float | None] = []

    class Recorded(threading.Event):
        def wait(self, timeout=None):
            timeouts.append(timeout)
            return super().wait(timeout)

    made = pairing.Waiter.__init__

    def init(self, *args, **kwargs):
        made(self, *args, **kwargs)
        self.event = Recorded()

    monkeypatch.setattr(pairing.Waiter, "__init__", init)
    sched, order, hold = Scheduler(), [], threading.Event()
    threads = [_job(sched, order, "busy", Priority.FIRST_AUDIO, hold)]
    while not order:
        time.sleep(0.001)
    cancel, ended = Cancel(), []

    def run():
        try:
            with priority(Priority.SPECULATIVE), cancel_on(cancel), sched.job("asr"):
                order.append("speculation")
        except JobCancelled:
            ended.append(time.perf_counter())

    threads.append(threading.Thread(target=run))
    threads[-1].start()
    _wait_queued(sched, 1)
    time.sleep(0.05)
    at = time.perf_counter()
    cancel.set()
    threads[-1].join(5)
    assert ended and ended[0] - at < 0.05, ended and ended[0] - at
    assert sched.stats().waiting == 0
    hold.set()
    for t in threads:
        t.join(5)
    assert order == ["busy"]
    assert timeouts and set(timeouts) == {None}, timeouts


def test_a_cancel_wakes_each_watcher_once_outside_its_lock():
    cancel, woke = Cancel(), []
    unwatch = cancel.watch(lambda: woke.append("dropped"))
    unwatch()
    cancel.watch(lambda: woke.append((1, cancel.is_set())))
    # A wake-up may use the cancel itself: it runs after the set, outside its lock.
    cancel.watch(lambda: woke.append((2, cancel.watch(lambda: woke.append("late")) and 0)))
    assert woke == []
    cancel.set()
    cancel.set()
    assert woke == [(1, True), "late", (2, 0)]
    cancel.watch(lambda: woke.append("after"))  # watched once set: woken at once
    assert woke[-1] == "after"
    unwatch()  # late: harmless
    with pytest.raises(TypeError):
        cancel.clear()


def test_quiet_only_after_urgent_work_has_stopped_for_a_while():
    # Optional background work (the caller's words so far) starts only in real idle time,
    # not in the gap between two jobs of a turn; background jobs themselves do not count.
    sched = Scheduler()
    assert sched.quiet_for(0.05)
    hold = threading.Event()
    order: list[str] = []
    t = _job(sched, order, "asr", Priority.FIRST_AUDIO, hold)
    while not order:
        time.sleep(0.001)
    assert not sched.quiet_for(0.0)  # running
    waiting = _job(sched, order, "tts", Priority.PLAYOUT)
    _wait_queued(sched, 1)
    hold.set()
    t.join(5)
    waiting.join(5)
    assert not sched.quiet_for(0.05)  # just ended
    time.sleep(0.06)
    assert sched.quiet_for(0.05)
    with sched.job("llm", priority=Priority.BACKGROUND):
        assert sched.quiet_for(0.05)


def test_an_observer_sees_each_job_that_ran_with_its_wait_run_time_and_note():
    sched, seen, hold = Scheduler(), [], threading.Event()
    sched.observe(seen.append)
    first = _job(sched, [], "busy", Priority.PLAYOUT, hold)
    while sched.stats().running == 0:
        time.sleep(0.001)

    def noted():
        with priority(Priority.FIRST_AUDIO), sched.job("llm"):
            sched.note("tokens=4 sequences=2")
            time.sleep(0.05)

    second = threading.Thread(target=noted, name="llm-batch")
    second.start()
    _wait_queued(sched, 1)
    time.sleep(0.1)
    hold.set()
    first.join(5)
    second.join(5)
    busy, llm = seen
    assert (busy.stage, busy.level, busy.note) == ("tts", Priority.PLAYOUT, "")
    assert (llm.stage, llm.level, llm.thread, llm.note) == (
        "llm", Priority.FIRST_AUDIO, "llm-batch", "tokens=4 sequences=2")
    assert llm.waited_s >= 0.1 and 0.05 <= llm.ran_s < 1.0
    with sched.job("asr"):
        pass
    assert seen[-1].note == ""  # a note is the job's own, not left over from the last one


def test_a_turns_next_first_audio_job_is_not_beaten_to_the_slot_by_a_speculative_one():
    """Its ASR pass ends, and its LLM prompt is queued a few ms later: the slot waits for it."""
    sched, order, hold = Scheduler(), [], threading.Event()
    threads = [_job(sched, order, "asr of an ended turn", Priority.FIRST_AUDIO, hold)]
    while not order:
        time.sleep(0.001)
    threads.append(_job(sched, order, "another caller's speculative asr", Priority.SPECULATIVE))
    _wait_queued(sched, 1)
    hold.set()
    time.sleep(HANDOFF_S / 3)  # the turn builds its prompt
    threads.append(_job(sched, order, "its llm prompt", Priority.FIRST_AUDIO))
    for t in threads:
        t.join(5)
    assert order == ["asr of an ended turn", "its llm prompt", "another caller's speculative asr"]


def test_without_first_audio_work_to_follow_a_lower_job_starts_after_the_hand_off():
    sched, order, hold = Scheduler(), [], threading.Event()
    threads = [_job(sched, order, "first clause tts", Priority.FIRST_AUDIO, hold)]
    while not order:
        time.sleep(0.001)
    started = []

    def playout() -> None:
        with priority(Priority.PLAYOUT), sched.job("llm"):
            started.append(time.monotonic())

    threads.append(threading.Thread(target=playout))
    threads[-1].start()
    _wait_queued(sched, 1)
    hold.set()
    ended = time.monotonic()
    for t in threads:
        t.join(5)
    assert started and HANDOFF_S * 0.8 <= started[0] - ended < HANDOFF_S + 0.5
    # A job of the first level itself is never held back.
    sched2, order2, waits = Scheduler(), [], []
    sched2.observe(lambda trace: waits.append(trace.waited_s))
    _job(sched2, order2, "a", Priority.FIRST_AUDIO).join(5)
    _job(sched2, order2, "b", Priority.FIRST_AUDIO).join(5)
    assert order2 == ["a", "b"] and max(waits) < HANDOFF_S / 3


@pytest.mark.parametrize("became_first_audio", [False, True])
def test_the_first_caller_to_stop_keeps_the_slot_between_its_asr_pass_and_its_prompt(
        became_first_audio):
    """Another caller's speculative pass waits out the hand-off; an earlier caller's does not.

    Its pass ran speculative (granted before its endpoint); as it ends the turn is either
    still speculative (its prompt is too) or has reached its endpoint (first audio).
    """
    sched, order, hold, ended = Scheduler(), [], threading.Event(), threading.Event()
    turn = lambda: (Priority.FIRST_AUDIO if ended.is_set() else Priority.SPECULATIVE, 1.0)  # noqa: E731
    threads = [_job(sched, order, "its asr", turn, hold)]
    while not order:
        time.sleep(0.001)
    threads.append(_job(sched, order, "a later caller's pass", (Priority.SPECULATIVE, 2.0)))
    _wait_queued(sched, 1)
    if became_first_audio:
        ended.set()
    hold.set()
    time.sleep(HANDOFF_S / 3)  # the turn builds its prompt
    threads.append(_job(sched, order, "its prompt", turn))
    for t in threads:
        t.join(5)
    assert order == ["its asr", "its prompt", "a later caller's pass"]

    # A caller who stopped sooner is more urgent: their pass is not held back.
    order, hold, started = [], threading.Event(), []
    first = _job(sched, order, "its asr", (Priority.SPECULATIVE, 1.0), hold)
    while not order:
        time.sleep(0.001)

    def earlier() -> None:
        with priority((Priority.SPECULATIVE, 0.5)), sched.job("asr"):
            started.append(time.monotonic())

    threads = [first, threading.Thread(target=earlier)]
    threads[1].start()
    _wait_queued(sched, 1)
    hold.set()
    released = time.monotonic()
    for t in threads:
        t.join(5)
    assert started and started[0] - released < HANDOFF_S * 0.8
