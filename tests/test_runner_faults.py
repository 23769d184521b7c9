"""A reply under injected faults: errors surface, cancellation and the gate hold."""

import threading

import pytest

from agent.turn.runner import TurnRunner
from dialplan.profile import Profile
from models.llm.base import Message
from models.priority import Cancel
from tests.fakes import FakeLLM, FakeTTS, fake_stages
from tests.replies import answer

pytestmark = pytest.mark.unit


def run(runner, history, gate=None, cancel=None):
    out = []
    result, timeline = answer(runner, history, out.append, gate=gate, cancel=cancel)
    return result, out, timeline


def test_llm_error_is_raised_not_swallowed():
    stages = fake_stages(llm=FakeLLM(fail_with=RuntimeError("llm down")), tts=FakeTTS())
    runner = TurnRunner(stages, Profile(name="t"))
    with pytest.raises(RuntimeError, match="llm down"):
        run(runner, [])


def test_reply_is_spoken_and_history_grows():
    runner = TurnRunner(fake_stages(tts=FakeTTS()), Profile(name="t"))
    history: list[Message] = []
    result, out, timeline = run(runner, history)
    assert result.reply_text and out and sum(map(len, out)) / 8000 == result.audio_out_s
    assert [m.role for m in history] == ["user", "assistant"]
    assert timeline.asr_done_at <= timeline.llm_first_token_at <= timeline.tts_first_audio_at


def test_turn_cancelled_before_its_gate_opens_leaves_no_trace():
    runner = TurnRunner(fake_stages(tts=FakeTTS()), Profile(name="t"))
    history: list[Message] = []
    gate, cancel = threading.Event(), Cancel()
    threading.Timer(0.3, cancel.set).start()
    result, out, _ = run(runner, history, gate=gate, cancel=cancel)
    assert out == [] and history == [] and result.cancelled


def test_speculative_turn_with_empty_reply_waits_for_its_verdict():
    runner = TurnRunner(fake_stages(llm=FakeLLM(reply=""), tts=FakeTTS()), Profile(name="t"))
    history: list[Message] = []
    gate = threading.Event()
    threading.Timer(0.2, gate.set).start()
    result, out, _ = run(runner, history, gate=gate)
    assert gate.is_set() and out == [] and not result.reply_text
    assert [m.role for m in history] == ["user"]
