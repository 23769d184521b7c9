"""A reply's opening word ("Yes,") is spoken first only while no other call is up.

Alone, the rest of the reply decodes faster than it is spoken, so "Yes," gets the answer
started several decode steps sooner. With other callers waiting, the rest would wait for decode
steps shared with them and a long pause would follow, so the first clause is spoken whole
(callers who are still speaking want the CPU soon, so a call that is up counts).
"""

from __future__ import annotations

import time

import pytest

from agent.call.jobs import CallJobs
from agent.call.worker import TurnWorker
from agent.turn.backlog import Backlog
from agent.turn.load import LoadPolicy
from agent.turn.runner import TurnRunner
from dialplan import parse_config
from dialplan.config import ConfigError
from tests.fakes import FakeLLM, FakeTTS, fake_stages
from tests.replies import answer

pytestmark = pytest.mark.unit

REPLY = "Yes, the library is open on Easter Monday."


def _profile(**tts):
    return parse_config({"profiles": {"p": {"tts": tts}}, "dialplan": {"1": "p"}}).profiles["p"]


def _first_chunk(profile, alone: bool) -> str:
    tts = FakeTTS(s_per_char=0.001)
    runner = TurnRunner(fake_stages(llm=FakeLLM(reply=REPLY), tts=tts), profile)
    answer(runner, [], alone=lambda: alone)
    return tts.texts[0]


def test_by_default_the_opener_is_spoken_first_only_while_alone():
    profile = _profile()
    assert profile.tts.first_chunk_opener == "alone"
    assert _first_chunk(profile, alone=True) == "Yes,"
    assert _first_chunk(profile, alone=False) == "Yes, the library is open"


@pytest.mark.parametrize("setting, alone, first", [
    (True, False, "Yes,"),                          # always
    (False, True, "Yes, the library is open"),      # never
])
def test_true_and_false_ignore_the_other_callers(setting, alone, first):
    assert _first_chunk(_profile(first_chunk_opener=setting), alone) == first


def test_any_other_value_fails_naming_the_key():
    with pytest.raises(ConfigError, match=r"profiles\.p\.tts\.first_chunk_opener: 'yes'"):
        _profile(first_chunk_opener="yes")


class _Call:
    """A call's worker (the backlog keeps its calls by weak reference)."""


def test_a_call_is_alone_until_another_is_up_and_again_once_it_ends():
    backlog, a, b = Backlog(), _Call(), _Call()
    backlog.join(a)
    assert backlog.alone(a)
    backlog.join(b)
    assert not backlog.alone(a) and not backlog.alone(b)
    backlog.part(b)
    backlog.part(b)  # idempotent
    assert backlog.alone(a)
    c = _Call()
    backlog.join(c)
    assert not backlog.alone(a)
    del c  # a worker that is gone has ended too: a leak cannot keep the opener off forever
    assert backlog.alone(a)


def test_the_worker_of_a_call_is_up_from_its_start_to_close():
    backlog, other = Backlog(), _Call()
    runner = TurnRunner(fake_stages(), _profile())
    jobs = CallJobs(runner.stages.llm.scheduler, post=lambda m: None)
    worker = TurnWorker(runner, [], playout=None, post=lambda m: None, jobs=jobs,
                        now=time.monotonic, load=LoadPolicy(jobs.scheduler, backlog))
    backlog.join(other)
    assert not backlog.alone(other)
    worker.close()
    assert backlog.alone(other)
