"""Admission control from measured load: calls beyond what the CPU can answer get 503.

The load is the scheduler's own measure (how long work a caller waits on waited for the CPU);
the server refuses new calls while it is too high and calls are in progress.
"""

from __future__ import annotations

import threading
import time

import pytest

from agent.server import Server
from agent.sip.events import IncomingCall
from dialplan import parse_config
from models.priority import Priority, priority
from models.scheduler import Scheduler

pytestmark = pytest.mark.unit


class FakeSip:
    def __init__(self):
        self.rejected: list[tuple[int, int]] = []

    def reject(self, key: int, code: int) -> None:
        self.rejected.append((key, code))


def server(**sip) -> Server:
    config = parse_config({"sip": sip, "profiles": {"p": {}}, "dialplan": {"1": "p"}})
    s = Server(config, call_log=None)
    s.sip = FakeSip()
    return s


def invite(key: int = 7) -> IncomingCall:
    return IncomingCall(key, "1", "sip:caller@127.0.0.1", f"call-{key}", time.monotonic())


def test_a_call_is_refused_with_503_while_callers_wait_too_long_for_the_cpu():
    s = server(admit_max_wait_s=2.0)
    s.sessions[1] = object()  # a call in progress
    s.load_policy.measured_wait = lambda window_s: 4.5
    s._incoming(invite())
    assert s.sip.rejected == [(7, 503)]
    assert s.calls_total == 0


def test_under_the_limit_or_with_no_call_in_progress_nothing_is_refused_for_load():
    s = server(admit_max_wait_s=2.0, overload_code=486)
    s.load_policy.measured_wait = lambda window_s: 4.5
    assert not s._overloaded(invite())  # idle: past waits are history
    s.sessions[1] = object()
    s.load_policy.measured_wait = lambda window_s: 0.5
    assert not s._overloaded(invite())
    s.load_policy.measured_wait = lambda window_s: 2.5
    assert s._overloaded(invite()) and s.sip.rejected == [(7, 486)]
    off = server(admit_max_wait_s=0)
    off.sessions[1] = object()
    off.load_policy.measured_wait = lambda window_s: 99.0
    assert not off._overloaded(invite())


def test_the_scheduler_measures_how_long_first_audio_work_waited():
    sched = Scheduler()
    assert sched.recent_wait() == 0.0
    hold = threading.Event()

    def busy():
        with priority(Priority.PLAYOUT), sched.job("tts"):
            hold.wait(5)

    def waiting():
        with priority(Priority.FIRST_AUDIO), sched.job("asr"):
            pass

    a = threading.Thread(target=busy)
    a.start()
    time.sleep(0.05)
    b = threading.Thread(target=waiting)
    b.start()
    time.sleep(0.3)
    hold.set()
    a.join()
    b.join()
    assert 0.25 <= sched.recent_wait(Priority.FIRST_AUDIO) <= 2.0
    assert sched.recent_wait(Priority.FIRST_AUDIO, window_s=0.0) == 0.0
