"""A turn answered outside a call (agent.answer): what the benches answer through.

Fakes stand in for the models (scripted words, pushed by a thread of the fake engine's as
llama-batch pushes them, or stepped): the reply is a real Reply and its loop is the call's.
"""

from __future__ import annotations

import pytest
from fakes import FakeLLM, FakeTTS, fake_stages

from agent.answer import answer
from agent.turn.runner import TurnRunner
from dialplan.profile import Profile
from models.asr.base import Transcript
from models.metrics import ASRMetrics

pytestmark = pytest.mark.unit


def heard(text: str) -> Transcript:
    return Transcript(text, ASRMetrics(model="fake", started_at=0.0, ended_at=0.0,
                                       audio_s=1.0), avg_logprob=-0.1)


@pytest.mark.parametrize("pushes", [False, True], ids=["stepped", "pushed"])
def test_a_turn_is_answered_and_joins_the_history(pushes):
    llm = FakeLLM("We open at ten today.", token_s=0.005, pushes=pushes)
    runner = TurnRunner(fake_stages(llm=llm, tts=FakeTTS()), Profile(name="t"))
    history: list = []
    audio: list = []
    result, t = answer(runner, heard("When do you open?"), history, audio_in_s=1.2,
                       emit=audio.append)
    assert result.reply_text == "We open at ten today."
    assert result.transcript == "When do you open?" and result.audio_in_s == 1.2
    assert [m.role for m in history] == ["user", "assistant"]
    assert history[-1].content == "We open at ten today."
    assert t.asr_done_at <= t.llm_first_token_at <= t.first_chunk_text_at
    assert t.tts_first_audio_at is not None and sum(len(a) for a in audio) > 0
    assert (llm.threads == {"fake-engine"}) is pushes
    again, _ = answer(runner, heard("And on Sunday?"), history)  # a follow-up reads it
    assert [m.content for m in llm.prompts[-1][-3:]] == [
        "When do you open?", "We open at ten today.", "And on Sunday?"]
    assert again.reply_text and len(history) == 4


def test_a_reply_past_its_deadline_is_a_timeout_not_a_hang():
    llm = FakeLLM("Never.", hang=True)
    runner = TurnRunner(fake_stages(llm=llm, tts=FakeTTS()), Profile(name="t"))
    with pytest.raises(TimeoutError, match="no reply to 'Hello' in 0.3 s"):
        answer(runner, heard("Hello"), timeout_s=0.3)
    llm.release.set()
