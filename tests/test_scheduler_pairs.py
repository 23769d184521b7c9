"""Two callers' urgent jobs share the cores, one each; everything else keeps the whole slot."""

from __future__ import annotations

import threading
import time

import pytest

from models.priority import Priority, priority
from models.scheduler import RECHECK_S, Scheduler
from tests.waiting import wait_until

pytestmark = pytest.mark.unit


class _Log:
    """What each job saw: when it ran and on how many cores."""

    def __init__(self):
        self.lock = threading.Lock()
        self.runs: dict[str, tuple[float, float, int, int]] = {}
        """name: (started, ended, cores, jobs running as it ended)"""
        self.order: list[str] = []


def _job(sched: Scheduler, log: _Log, name: str, prio, narrow: bool = True,
         hold: threading.Event | None = None, run_s: float = 0.05,
         patient: bool = False) -> threading.Thread:
    def run():
        with priority(prio), sched.job("asr", narrow=narrow, patient=patient):
            start = time.monotonic()
            with log.lock:
                log.order.append(name)
            if hold is not None:
                hold.wait(5)
            time.sleep(run_s)
            log.runs[name] = (start, time.monotonic(), sched.cores(), sched.stats().running)

    t = threading.Thread(target=run)
    t.start()
    return t


def _overlap(log: _Log, a: str, b: str) -> bool:
    (s1, e1, *_), (s2, e2, *_) = log.runs[a], log.runs[b]
    return s1 < e2 and s2 < e1


def _behind_busy(sched: Scheduler, log: _Log,
                 jobs: list[tuple]) -> tuple[threading.Event, list[threading.Thread]]:
    """Queue ``jobs`` behind a job holding the whole slot until the event is set."""
    hold = threading.Event()
    threads = [_job(sched, log, "busy", Priority.BACKGROUND, narrow=False, hold=hold, run_s=0)]
    while not log.order:
        time.sleep(0.001)
    for i, args in enumerate(jobs):
        threads.append(_job(sched, log, *args))
        assert wait_until(lambda n=i + 1: sched.stats().waiting >= n, timeout=5, every=0.001)
    return hold, threads


def _busy_then(sched: Scheduler, log: _Log, jobs: list[tuple]) -> None:
    """Queue ``jobs`` behind a job holding the whole slot, then let them all run."""
    hold, threads = _behind_busy(sched, log, jobs)
    hold.set()
    for t in threads:
        t.join(5)


def test_two_callers_first_audio_jobs_run_side_by_side_on_a_core_each():
    sched, log = Scheduler(), _Log()
    _busy_then(sched, log, [("asr of caller 1", (Priority.FIRST_AUDIO, 1.0)),
                            ("llm of caller 2", (Priority.FIRST_AUDIO, 2.0))])
    assert _overlap(log, "asr of caller 1", "llm of caller 2")
    assert log.runs["asr of caller 1"][2] == log.runs["llm of caller 2"][2] == 1
    assert max(log.runs["asr of caller 1"][3], log.runs["llm of caller 2"][3]) == 2
    assert log.runs["busy"][2] == 0  # a job alone has the whole slot
    assert sched.cores() == 0  # outside a job


def test_one_turns_jobs_never_pair_and_a_lone_job_keeps_both_cores():
    """The same deadline is the same turn: its first clause's TTS at full speed, then on."""
    sched, log = Scheduler(), _Log()
    _busy_then(sched, log, [("first clause tts", (Priority.FIRST_AUDIO, 1.0)),
                            ("its next decode step", (Priority.FIRST_AUDIO, 1.0))])
    assert not _overlap(log, "first clause tts", "its next decode step")
    assert log.runs["first clause tts"][2] == log.runs["its next decode step"][2] == 0


def test_less_urgent_work_never_pairs():
    """The rest of a reply (playout) and priming keep the old order on the whole slot."""
    sched, log = Scheduler(), _Log()
    _busy_then(sched, log, [("a reply's later sentence", (Priority.PLAYOUT, 1.0)),
                            ("another reply's", (Priority.PLAYOUT, 2.0)),
                            ("a speculative asr", (Priority.SPECULATIVE, 3.0))])
    assert log.order[1:] == ["a speculative asr", "a reply's later sentence", "another reply's"]
    assert all(log.runs[n][2] == 0 for n in log.order)
    assert not _overlap(log, "a reply's later sentence", "another reply's")


def test_a_job_that_cannot_narrow_waits_for_the_whole_slot():
    sched, log = Scheduler(), _Log()
    _busy_then(sched, log, [("caller 1", (Priority.FIRST_AUDIO, 1.0), True, None, 0.15),
                            ("caller 2", (Priority.FIRST_AUDIO, 2.0), True, None, 0.05),
                            ("kokoro of caller 3", (Priority.FIRST_AUDIO, 3.0), False),
                            ("caller 4", (Priority.FIRST_AUDIO, 4.0))])
    wide = log.runs["kokoro of caller 3"]
    assert wide[2] == 0 and wide[0] >= log.runs["caller 1"][1] - 0.005
    # The core caller 2 left went to no one behind the wide job: it was more urgent.
    assert log.runs["caller 4"][0] >= wide[1] - 0.005


def test_a_core_freed_by_one_of_a_pair_goes_to_the_next_callers_job():
    sched, log = Scheduler(), _Log()
    _busy_then(sched, log, [("caller 1", (Priority.FIRST_AUDIO, 1.0), True, None, 0.3),
                            ("caller 2", (Priority.FIRST_AUDIO, 2.0), True, None, 0.05),
                            ("caller 1 again", (Priority.FIRST_AUDIO, 1.0)),
                            ("caller 3", (Priority.SPECULATIVE, 3.0))])
    # Caller 1's next job cannot pair with its own running one: caller 3's takes the core.
    assert _overlap(log, "caller 1", "caller 3") and log.runs["caller 3"][2] == 1
    assert log.runs["caller 1 again"][0] >= log.runs["caller 1"][1] - 0.005


def test_pairs_off_runs_one_job_at_a_time():
    sched, log = Scheduler(pairs=False), _Log()
    _busy_then(sched, log, [("caller 1", (Priority.FIRST_AUDIO, 1.0)),
                            ("caller 2", (Priority.FIRST_AUDIO, 2.0))])
    assert not _overlap(log, "caller 1", "caller 2")
    assert log.runs["caller 1"][2] == log.runs["caller 2"][2] == 0


def _one_narrow_alone(sched: Scheduler, log: _Log, prio, run_s: float = 0.6) -> list:
    """Leave a job of ``prio`` running alone on one core: it paired with one that ended."""
    hold, threads = _behind_busy(sched, log, [
        ("alone", prio, True, None, run_s),
        ("its partner", (Priority.FIRST_AUDIO, 0.1), True, None, 0.02)])
    hold.set()
    assert wait_until(lambda: "its partner" in log.runs, timeout=5, every=0.001)
    return threads


@pytest.mark.parametrize("alone_is_less_urgent", [True, False])
def test_a_prompt_takes_the_core_a_less_urgent_job_left_free(alone_is_less_urgent):
    # A prompt would rather have both cores (patient), but beside another caller's
    # speculative pass it would wait for that pass's end with one core idle: 4 callers at
    # once, 1.1-2.9 s a run of first-audio work waited so. Beside a more urgent job it waits.
    sched, log = Scheduler(), _Log()
    alone = (Priority.SPECULATIVE, 3.0) if alone_is_less_urgent else (Priority.FIRST_AUDIO, 1.0)
    threads = _one_narrow_alone(sched, log, alone)
    threads.append(_job(sched, log, "prompt", (Priority.FIRST_AUDIO, 2.0), patient=True))
    for t in threads:
        t.join(5)
    if alone_is_less_urgent:
        assert _overlap(log, "alone", "prompt") and log.runs["prompt"][2] == 1
    else:
        assert log.runs["prompt"][0] >= log.runs["alone"][1] - 0.005
        assert log.runs["prompt"][2] == 0


def test_a_job_whose_priority_rises_takes_the_free_core_without_waiting_for_an_event():
    # The rest of a reply (playout: it may not pair) waits while one narrow job runs alone;
    # its audio runs low and it is first audio again, and the idle core is its within a
    # recheck, not when the running job ends.
    sched, log = Scheduler(), _Log()
    threads = _one_narrow_alone(sched, log, (Priority.SPECULATIVE, 3.0), run_s=0.8)
    level = [Priority.PLAYOUT]
    threads.append(_job(sched, log, "reply", lambda: (level[0], 2.0)))
    assert wait_until(lambda: sched.stats().waiting >= 1, timeout=5, every=0.001)
    time.sleep(0.1)
    assert "reply" not in log.order  # playout does not pair
    risen = time.monotonic()
    level[0] = Priority.FIRST_AUDIO
    for t in threads:
        t.join(5)
    assert log.runs["reply"][2] == 1
    assert log.runs["reply"][0] - risen <= 10 * RECHECK_S  # slack for a loaded CI machine
    assert log.runs["reply"][0] < log.runs["alone"][1]


def test_no_recheck_runs_while_only_jobs_that_cannot_narrow_wait():
    # A recheck is a timer thread every 20 ms; a job that needs both cores takes the free one
    # only when the running job ends, so rereading its priority meanwhile does nothing.
    sched, log = Scheduler(), _Log()
    threads = _one_narrow_alone(sched, log, (Priority.SPECULATIVE, 3.0), run_s=0.5)
    threads.append(_job(sched, log, "wide", (Priority.FIRST_AUDIO, 2.0), narrow=False))
    assert wait_until(lambda: sched.stats().waiting >= 1, timeout=5, every=0.001)
    time.sleep(5 * RECHECK_S)
    assert not [t for t in threading.enumerate() if isinstance(t, threading.Timer)]
    for t in threads:
        t.join(5)
    assert log.runs["wide"][0] >= log.runs["alone"][1] - 0.005 and log.runs["wide"][2] == 0
