"""Requests that wait for the scheduler's slot together run as one batch, in priority order."""

from __future__ import annotations

import threading
import time

import pytest

from models.coalesce import Coalescer
from models.priority import Cancel, JobCancelled, Priority, cancel_on, priority
from models.scheduler import Scheduler
from tests.waiting import hold_the_slot, wait_until

pytestmark = pytest.mark.unit


class Batches:
    """A batch function that records the batches it ran, in order (squares its items)."""

    def __init__(self):
        self.ran: list[list[int]] = []

    def __call__(self, items: list[int]) -> list[int]:
        self.ran.append(list(items))
        return [i * i for i in items]


def _submit(coalescer, item, results, prio=Priority.FIRST_AUDIO, cancel=None):
    def run():
        with priority(prio):
            try:
                if cancel is None:
                    results[item] = coalescer.submit(item)
                else:
                    with cancel_on(cancel):
                        results[item] = coalescer.submit(item)
            except JobCancelled:
                results[item] = "cancelled"

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_requests_waiting_together_run_as_one_batch_and_get_their_own_results():
    sched, batches, results = Scheduler(), Batches(), {}
    coalescer = Coalescer(batches, "asr", max_batch=4, scheduler=sched)
    release = hold_the_slot(sched)
    threads = [_submit(coalescer, i, results) for i in (2, 3, 4)]
    assert wait_until(lambda: sched.stats().waiting == 1, timeout=5)  # one job for the three
    time.sleep(0.05)
    assert sched.stats().waiting == 1
    release.set()
    for t in threads:
        t.join(5)
    assert [sorted(b) for b in batches.ran] == [[2, 3, 4]]
    assert results == {2: 4, 3: 9, 4: 16}


def test_a_request_alone_runs_at_once_alone():
    sched, batches = Scheduler(), Batches()
    coalescer = Coalescer(batches, "asr", max_batch=4, scheduler=sched)
    t0 = time.monotonic()
    assert coalescer.submit(5) == 25
    assert time.monotonic() - t0 < 0.05  # no window waiting for company
    assert batches.ran == [[5]]


def test_levels_do_not_mix_and_the_first_audio_batch_goes_first():
    sched, batches, results = Scheduler(), Batches(), {}
    coalescer = Coalescer(batches, "asr", max_batch=4, scheduler=sched)
    release = hold_the_slot(sched)
    threads = [_submit(coalescer, 1, results, Priority.SPECULATIVE)]
    assert wait_until(lambda: sched.stats().waiting == 1, timeout=5)
    threads += [_submit(coalescer, i, results) for i in (2, 3)]
    threads += [_submit(coalescer, 4, results, Priority.SPECULATIVE)]
    assert wait_until(lambda: sched.stats().waiting == 2, timeout=5)
    time.sleep(0.05)
    release.set()
    for t in threads:
        t.join(5)
    assert [sorted(b) for b in batches.ran] == [[2, 3], [1, 4]]
    assert results == {1: 1, 2: 4, 3: 9, 4: 16}


def test_a_full_group_starts_another():
    sched, batches, results = Scheduler(), Batches(), {}
    coalescer = Coalescer(batches, "asr", max_batch=2, scheduler=sched)
    release = hold_the_slot(sched)
    threads = [_submit(coalescer, 1, results)]
    assert wait_until(lambda: sched.stats().waiting == 1, timeout=5)
    threads.append(_submit(coalescer, 2, results))
    time.sleep(0.05)  # joined the first group, which is now full
    threads.append(_submit(coalescer, 3, results))
    assert wait_until(lambda: sched.stats().waiting == 2, timeout=5)
    release.set()
    for t in threads:
        t.join(5)
    assert [sorted(b) for b in batches.ran] == [[1, 2], [3]]
    assert results == {1: 1, 2: 4, 3: 9}


def test_a_member_whose_caller_went_on_is_left_out_and_the_rest_run():
    sched, batches, results = Scheduler(), Batches(), {}
    coalescer = Coalescer(batches, "asr", max_batch=4, scheduler=sched)
    release = hold_the_slot(sched)
    went_on = Cancel()
    threads = [_submit(coalescer, 1, results, cancel=went_on), _submit(coalescer, 2, results)]
    assert wait_until(lambda: sched.stats().waiting == 1, timeout=5)
    time.sleep(0.03)
    went_on.set()
    release.set()
    for t in threads:
        t.join(5)
    assert batches.ran == [[2]]
    assert results == {1: "cancelled", 2: 4}


def test_a_group_whose_callers_all_went_on_never_runs():
    sched, batches, results = Scheduler(), Batches(), {}
    coalescer = Coalescer(batches, "asr", max_batch=4, scheduler=sched)
    release = hold_the_slot(sched)
    went_on = Cancel()
    threads = [_submit(coalescer, i, results, cancel=went_on) for i in (1, 2)]
    assert wait_until(lambda: sched.stats().waiting == 1, timeout=5)
    time.sleep(0.03)
    went_on.set()
    assert wait_until(lambda: len(results) == 2, timeout=5)
    release.set()
    for t in threads:
        t.join(5)
    assert batches.ran == []
    assert results == {1: "cancelled", 2: "cancelled"}
    assert sched.stats().waiting == 0


def test_a_batch_that_fails_fails_each_of_its_requests():
    sched = Scheduler()

    def broken(items):
        raise ValueError("model gone")

    coalescer = Coalescer(broken, "asr", max_batch=4, scheduler=sched)
    with pytest.raises(ValueError, match="model gone"):
        coalescer.submit(1)
    assert sched.stats().running == 0


def test_inside_a_job_a_request_runs_at_once_instead_of_waiting_for_its_own_slot():
    sched, batches = Scheduler(), Batches()
    coalescer = Coalescer(batches, "asr", max_batch=4, scheduler=sched)
    with sched.job("llm"):
        assert coalescer.submit(3) == 9
    assert batches.ran == [[3]]


def test_requests_of_different_keys_wait_as_jobs_that_can_run_side_by_side():
    """Whisper's utterances of other windows: own jobs, which the scheduler pairs."""
    sched, results = Scheduler(), {}
    ran: list[tuple[list[int], int, float]] = []

    def batch(items: list[int]) -> list[int]:
        start = time.monotonic()
        time.sleep(0.1)
        ran.append((sorted(items), sched.cores(), start))
        return [i * i for i in items]

    coalescer = Coalescer(batch, "asr", max_batch=4, scheduler=sched, narrow=True,
                          key=lambda i: i % 2)
    release = hold_the_slot(sched)
    # Two callers' utterances of one window (even), one of another (odd): each waits with
    # its own deadline, as callers' speech ends do.
    threads = [_submit(coalescer, i, results, prio=(Priority.FIRST_AUDIO, float(i)))
               for i in (2, 4, 3)]
    assert wait_until(lambda: sched.stats().waiting == 2, timeout=5)
    release.set()
    for t in threads:
        t.join(5)
    assert results == {2: 4, 3: 9, 4: 16}
    assert sorted((items, cores) for items, cores, _ in ran) == [([2, 4], 1), ([3], 1)]
    assert abs(ran[0][2] - ran[1][2]) < 0.05  # at once
