"""The end-of-turn model in the call's turn-taking, on fake stages in real time.

A scripted :class:`fakes.FakeEOT` says whether the caller has finished at the speculative
pause; the session must end the turn there when it says so, fall back to the VAD hangover when
it does not, and make one turn of a pause it got wrong.
"""

from __future__ import annotations

import time

import pytest
from fakes import FakeASR, FakeEOT, FakeLLM, fake_stages, silence, tone
from test_session import close, make

from agent.turn.load import LoadPolicy
from db.records import TurnRecord
from tests.waiting import wait_until

pytestmark = pytest.mark.unit


def test_a_finished_turn_ends_at_the_pause_not_the_hangover():
    stages = fake_stages(asr=FakeASR(["what time do you open?"]), eot=FakeEOT([0.95]))
    session, line, calllog, _ = make(stages, speculate_s=0.2, endpoint_silence_s=0.6)
    assert wait_until(lambda: session.state == "listening")
    line.say(tone(0.8))
    assert wait_until(lambda: calllog.of(TurnRecord))
    turn = calllog.of(TurnRecord)[0]
    # 200 ms of silence (+ one 32 ms VAD chunk and the resampler's release), not 600.
    assert 0.18 <= turn.endpoint_s <= 0.40, turn
    close(session, line)


@pytest.mark.parametrize("words_rule, endpoint, logged", [
    # The hangover decides; why the turn waited is in the log, with the model's verdict.
    (False, (0.55, 0.9), "event=end-of-turn-wait call={} probability=0.1"),
    # The quick transcript is a finished question: the turn ends when it arrives (the pause
    # + the ASR pass), not after the 0.6 s hangover.
    (True, (0.25, 0.5), "event=end-of-turn call={} by=words"),
])
def test_when_the_model_says_not_finished(caplog, words_rule, endpoint, logged):
    stages = fake_stages(asr=FakeASR(["what time do you open?"], delay_s=0.1),
                         eot=FakeEOT([0.1]))
    session, line, calllog, _ = make(stages, speculate_s=0.2, endpoint_silence_s=0.6,
                                     end_of_turn_words=words_rule)
    assert wait_until(lambda: session.state == "listening")
    with caplog.at_level("INFO", logger="callagent"):
        line.say(tone(0.8))
        assert wait_until(lambda: calllog.of(TurnRecord))
    turn = calllog.of(TurnRecord)[0]
    assert endpoint[0] <= turn.endpoint_s <= endpoint[1], turn
    assert turn.transcript == "what time do you open?" and turn.reply_text
    assert logged.format(session.call_id) in caplog.text
    close(session, line)


@pytest.mark.parametrize("words", ["I would like to book a room for.", "what time do you open",
                                   "so I was wondering..."])
def test_words_that_are_not_a_whole_sentence_wait_for_the_hangover(words):
    stages = fake_stages(asr=FakeASR([words], delay_s=0.1), eot=FakeEOT([0.1]))
    session, line, calllog, _ = make(stages, speculate_s=0.2, endpoint_silence_s=0.6,
                                     pause_tolerance_s=0.0, end_of_turn_words=True)
    assert wait_until(lambda: session.state == "listening")
    line.say(tone(0.8))
    assert wait_until(lambda: calllog.of(TurnRecord))
    assert 0.55 <= calllog.of(TurnRecord)[0].endpoint_s <= 0.9
    close(session, line)


def test_a_pause_the_model_took_for_an_end_is_still_one_turn():
    # The model says "finished" at the pause, the words do not ("...for"), the caller goes on.
    asr = FakeASR(["I would like to book a room for", "I would like to book a room for two."])
    llm = FakeLLM("Sure.")
    stages = fake_stages(asr=asr, llm=llm, eot=FakeEOT([0.95]))
    session, line, calllog, _ = make(stages, speculate_s=0.2, endpoint_silence_s=0.5)
    assert wait_until(lambda: session.state == "listening")
    line.say(tone(0.8))
    line.say(silence(0.45))  # past the model's verdict, inside the pause tolerance
    line.say(tone(0.6))
    assert wait_until(lambda: calllog.of(TurnRecord))
    time.sleep(0.5)
    whole = "I would like to book a room for two."
    assert [t.transcript for t in calllog.of(TurnRecord)] == [whole]
    assert [m.content for m in session.history] == [whole, "Sure."]
    close(session, line)


def test_the_verdict_does_not_wait_for_the_turns_asr_pass():
    # ASR takes 0.6 s (a scheduler job), the model 0.3 s beside it: the turn ends 0.3 s into
    # the pass and 0.3 s of it is left (one after the other, the whole 0.6 s was left).
    stages = fake_stages(asr=FakeASR(["what time do you open?"], delay_s=0.6),
                         eot=FakeEOT([0.95], delay_s=0.3))
    session, line, calllog, _ = make(stages, speculate_s=0.2, endpoint_silence_s=0.9)
    assert wait_until(lambda: session.state == "listening")
    line.say(tone(0.8))
    assert wait_until(lambda: calllog.of(TurnRecord), timeout=10)
    turn = calllog.of(TurnRecord)[0]
    assert 0.45 <= turn.endpoint_s <= 0.75, turn  # the pause + the model
    assert 0.2 <= turn.asr_s <= 0.45, turn  # the rest of the pass
    close(session, line)


def test_a_failing_model_leaves_the_hangover_to_end_the_turn():
    stages = fake_stages(asr=FakeASR(["what time do you open?"]),
                         eot=FakeEOT(fail_with=RuntimeError("onnx session lost")))
    session, line, calllog, _ = make(stages, speculate_s=0.2, endpoint_silence_s=0.6,
                                     end_of_turn_words=False)
    assert wait_until(lambda: session.state == "listening")
    line.say(tone(0.8))
    assert wait_until(lambda: calllog.of(TurnRecord))
    turn = calllog.of(TurnRecord)[0]
    assert 0.55 <= turn.endpoint_s <= 0.9 and turn.transcript == "what time do you open?"
    close(session, line)


def test_no_model_while_other_callers_wait_for_their_answers(caplog):
    # Another call's turn is still waiting for its first audio: this turn waits behind it
    # anyway, so the model is not run beside the CPU's job; the hangover ends the turn.
    eot = FakeEOT([0.95])
    stages = fake_stages(asr=FakeASR(["what time do you open?"]), eot=eot)
    load = LoadPolicy(stages.llm.scheduler)
    session, line, calllog, _ = make(stages, speculate_s=0.2, endpoint_silence_s=0.6,
                                     end_of_turn_words=False, load=load)
    other = object()
    ticket, _ = load.backlog.enter(other)
    try:
        assert wait_until(lambda: session.state == "listening")
        with caplog.at_level("DEBUG", logger="callagent"):
            line.say(tone(0.8))
            assert wait_until(lambda: calllog.of(TurnRecord))
    finally:
        load.backlog.leave(ticket)
    turn = calllog.of(TurnRecord)[0]
    assert eot.calls == 0
    assert 0.55 <= turn.endpoint_s <= 0.9 and turn.reply_text, turn
    assert f"event=end-of-turn-skipped call={session.call_id} ahead=1" in caplog.text
    close(session, line)
