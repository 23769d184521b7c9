"""A silent caller and a caller who asks the agent to wait (issue 61), on fake stages.

:class:`~agent.call.idle.Quiet` on hand-made stamps: the idle prompt once at
``limits.idle_prompt_s``, the goodbye at ``max_silence_s`` from the same start, the wait a
caller asks for (``hold_s``) and the SIP hold. Then whole calls on a fake line in real time: a
silent caller hears ``still_there`` and then the goodbye; "hold on a second" gets ``hold_ack``
without the model and ``hold_s`` of quiet, and speaking again resumes the call. Real SIP callers
are test_sip_quiet.py; the words that ask for a wait, test_intent_wait.py.
"""

from __future__ import annotations

import time

import pytest
from fakes import FakeASR, FakeLLM, ListLog, fake_stages, tone
from test_session import close, make

from agent.call.idle import Quiet
from agent.call.recorder import CallRecorder
from db.records import CallEnded, EventRecord, TurnRecord
from dialplan.options import LimitOptions
from tests.waiting import wait_until

pytestmark = pytest.mark.unit

LIMITS = LimitOptions(idle_prompt_s=2.0, max_silence_s=5.0, hold_s=10.0)


def quiet(limits: LimitOptions = LIMITS) -> tuple[Quiet, ListLog]:
    log = ListLog()
    return Quiet(limits, 100.0, CallRecorder(log, "c1")), log


def verdicts(q: Quiet, start: float, end: float, step: float = 0.02) -> list[tuple[float, str]]:
    """(time, verdict) of every verdict that is not None, polled as a call's frames would."""
    out, t = [], start
    while t <= end + 1e-9:
        v = q.check(round(t, 3))
        if v is not None:
            out.append((round(t, 2), v))
        t += step
    return out


def test_the_prompt_comes_once_and_the_goodbye_counts_from_the_same_silence():
    q, log = quiet()
    assert verdicts(q, 100.0, 102.0) == [(102.0, "prompt")]
    q.agent_done(103.1)  # the prompt has played: it does not restart the silence
    after = verdicts(q, 102.02, 106.0)
    assert after[0] == (105.0, "goodbye") and {v for _, v in after} == {"goodbye"}
    events = [(e.kind, e.detail) for e in log.of(EventRecord)]
    assert events == [("idle-prompt", "after 2.0 s of silence")]


def test_the_caller_speaking_or_a_reply_restarts_the_silence():
    q, _ = quiet()
    assert verdicts(q, 100.0, 102.0) == [(102.0, "prompt")]
    q.caller_spoke(102.5, over_agent=True)  # they answered over the prompt
    q.agent_done(104.0)  # and heard the reply to it
    assert verdicts(q, 104.0, 106.0) == [(106.0, "prompt")]


def test_a_wait_keeps_quiet_for_hold_s_then_checks_in_at_once():
    q, log = quiet()
    q.hold(101.0, "hold on a second")
    q.agent_done(102.0)  # the acknowledgement played
    assert verdicts(q, 102.0, 110.98) == []
    # At 111 the wait is over: the prompt now, the goodbye 5 - 2 = 3 s later.
    assert verdicts(q, 111.0, 114.0)[:2] == [(111.0, "prompt"), (114.0, "goodbye")]
    assert [(e.kind, e.detail) for e in log.of(EventRecord)] == [
        ("hold", "asked: 'hold on a second'; quiet up to 10 s"),
        ("idle-prompt", "after 2.0 s of silence")]


def test_speaking_ends_the_wait_but_speech_under_the_agent_does_not():
    q, _ = quiet()
    q.hold(101.0, "hold on")
    q.caller_spoke(101.5, over_agent=True)  # "thanks" under the acknowledgement
    assert verdicts(q, 101.5, 110.0) == []
    q.caller_spoke(110.0, over_agent=False)  # back: "OK, my card number is..."
    assert verdicts(q, 110.0, 112.0) == [(112.0, "prompt")]


def test_a_call_on_hold_is_never_prompted_and_counts_from_the_resume():
    q, _ = quiet()
    q.sip_hold(True, 100.5)
    assert verdicts(q, 100.5, 140.0, step=0.5) == []
    q.sip_hold(False, 140.0)
    assert verdicts(q, 140.0, 142.0) == [(142.0, "prompt")]


@pytest.mark.parametrize("idle_prompt_s", [0.0, 5.0, 8.0])
def test_no_prompt_when_off_or_not_before_the_goodbye(idle_prompt_s):
    q, _ = quiet(LimitOptions(idle_prompt_s=idle_prompt_s, max_silence_s=5.0))
    assert verdicts(q, 100.0, 105.0)[0] == (105.0, "goodbye")


# ---- whole calls on a fake line ----------------------------------------------------------

QUICK = {"max_call_s": 60, "idle_prompt_s": 1.0, "max_silence_s": 2.5, "hold_s": 3.0}


def spans(line) -> list[tuple[float, float]]:
    """What the agent said, phrase by phrase.

    Runs of speech less than 0.35 s apart are one phrase: a loaded machine's fake line may drop
    frames mid-phrase (seen here), and these tests' phrases are 0.5 s apart or more.
    """
    out: list[list[float]] = []
    for start, end in line.speech_spans():
        if out and start - out[-1][1] < 0.35:
            out[-1][1] = end
        else:
            out.append([start, end])
    return [(a, b) for a, b in out if b - a > 0.1]


def kinds(calllog) -> list[str]:
    return [e.kind for e in calllog.of(EventRecord) if e.kind in ("idle-prompt", "hold")]


def test_a_silent_caller_hears_still_there_then_the_goodbye():
    session, line, calllog, hangups = make(limits=QUICK)
    assert wait_until(lambda: hangups, timeout=8)
    greeting, prompt, goodbye = spans(line)
    # FakeTTS: 0.05 s a character, so each phrase is as long as its text says.
    assert prompt[1] - prompt[0] == pytest.approx(0.05 * len("Are you still there?"), abs=0.1)
    assert prompt[0] - greeting[1] == pytest.approx(1.0, abs=0.25)
    assert goodbye[0] - greeting[1] == pytest.approx(2.5, abs=0.25)
    session.disconnected(by_local=True)
    assert session.join(5)
    line.stop()
    assert kinds(calllog) == ["idle-prompt"]
    assert calllog.of(CallEnded)[0].end_reason == "silence"


def test_hold_on_is_acknowledged_without_the_model_and_the_agent_waits():
    stages = fake_stages(asr=FakeASR(["Hold on a second."]), llm=FakeLLM("Never said."))
    session, line, calllog, hangups = make(stages, limits=QUICK)
    assert wait_until(lambda: session.state == "listening")
    line.say(tone(0.8))
    assert wait_until(lambda: hangups, timeout=12)
    greeting, ack, prompt, goodbye = spans(line)
    assert stages.llm.prompts == []
    (turn,) = calllog.of(TurnRecord)
    assert (turn.transcript, turn.reply_text) == ("Hold on a second.", "Sure, take your time.")
    assert turn.voice_to_voice_s < 0.8  # a cached phrase after the endpoint, no model
    # hold_s of quiet from the request (its turn's end, as the ack starts), then the prompt;
    # without the wait the prompt would have come idle_prompt_s after the ack.
    assert 3.0 - 0.1 <= prompt[0] - ack[0] <= 3.0 + 0.3
    assert goodbye[0] - prompt[0] == pytest.approx(2.5 - 1.0, abs=0.15)
    session.disconnected(by_local=True)
    assert session.join(5)
    line.stop()
    assert kinds(calllog) == ["hold", "idle-prompt"]


def test_speaking_again_during_the_wait_resumes_the_call():
    stages = fake_stages(asr=FakeASR(["Give me a minute.", "When do you open?"]))
    session, line, calllog, hangups = make(stages, limits={**QUICK, "hold_s": 30.0})
    assert wait_until(lambda: session.state == "listening")
    line.say(tone(0.8))
    assert wait_until(lambda: len(calllog.of(TurnRecord)) == 1 and session.state == "listening",
                      timeout=5)
    time.sleep(1.5)  # past idle_prompt_s, within the wait: nothing said
    line.say(tone(0.8))
    assert wait_until(lambda: hangups, timeout=12)
    greeting, ack, reply, prompt, goodbye = spans(line)
    assert calllog.of(TurnRecord)[1].reply_text == "The library opens at ten."
    assert prompt[0] - reply[1] == pytest.approx(1.0, abs=0.15)  # the usual silence again
    close(session, line)
    assert kinds(calllog) == ["hold", "idle-prompt"]
