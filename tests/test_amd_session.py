"""An outbound call's answering-machine detection in the session, on fake stages in real time.

The line is :class:`fakes.FakeCall`; FakeVAD takes loud non-tonal audio for speech, FakeASR's
script is what the callee "said". Checks the session's decisions and their timing.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from fakes import FakeASR, FakeCall, ListLog, fake_stages, silence

from agent.call.recorder import CallInfo
from agent.call.session import CallSession
from agent.turn.runner import TurnRunner
from db.records import CallEnded, EventRecord
from dialplan import parse_config
from tests.waiting import wait_until

pytestmark = pytest.mark.unit


def speech(seconds: float, seed: int = 0) -> np.ndarray:
    """Loud noise: speech to FakeVAD, and no tone."""
    rng = np.random.default_rng(seed)
    return (0.2 * 32767 * rng.standard_normal(int(seconds * 8000))).clip(-32767, 32767).astype(
        np.int16)


def beep(seconds: float, hz: float = 1000.0) -> np.ndarray:
    t = np.arange(int(seconds * 8000)) / 8000
    return (0.3 * 32767 * np.sin(2 * np.pi * hz * t)).astype(np.int16)


def dial(words: str, direction: str = "outbound", amd: bool = True):
    profile = parse_config({"profiles": {"p": {
        "greeting": "Hi.", "amd": amd, "voicemail_message": "Please call back.",
        "limits": {"max_call_s": 60, "max_silence_s": 30}}}}).profiles["p"]
    stages = fake_stages(asr=FakeASR([words]))
    calllog, hangups = ListLog(), []
    session = CallSession(profile, stages, calllog, hangup=lambda: hangups.append(time.time()),
                          phrase=TurnRunner(stages, profile).prepare_phrases(),
                          info=CallInfo(caller_uri="sip:x@127.0.0.1", direction=direction))
    line = FakeCall(session.link)
    return session, line, calllog, hangups


def events(calllog, kind):
    return [e.detail for e in calllog.of(EventRecord) if e.kind == kind]


def test_a_machine_gets_the_message_after_its_beep_and_the_call_ends_voicemail():
    session, line, calllog, hangups = dial("Hi, I can't take your call, leave a message.")
    line.say(np.concatenate([silence(0.3), speech(2.5), silence(0.3), beep(0.4), silence(4)]))
    session.start()
    line.start()
    session.media_active("PCMU")
    assert wait_until(lambda: hangups, timeout=10)
    session.disconnected(by_local=True)
    assert session.join(5)
    line.stop()
    t0 = line.out[0][0]
    spoken = [(a - t0, b - t0) for a, b in line.speech_spans() if b - a > 0.1]
    assert spoken, "the message was not played"
    assert spoken[0][0] >= 3.5 - 0.1  # after the beep ended (0.3 + 2.5 + 0.3 + 0.4 s)
    assert spoken[0][0] < 3.5 + 0.5
    assert [c.new for c in session.states][:2] == ["screening", "speaking"]
    (amd,) = events(calllog, "amd")
    assert amd.startswith("machine at ") and "words 'leave a message'" in amd
    assert events(calllog, "voicemail")[0].startswith("message after beep")
    assert calllog.of(CallEnded)[0].end_reason == "voicemail"


def test_a_person_saying_hello_is_greeted_and_the_call_goes_on():
    session, line, calllog, hangups = dial("Hello?")
    line.say(np.concatenate([silence(0.3), speech(0.5), silence(3)]))
    session.start()
    line.start()
    session.media_active("PCMU")
    assert wait_until(lambda: "listening" in [c.new for c in session.states], timeout=8)
    session.disconnected(by_local=False)
    assert session.join(5)
    line.stop()
    assert [c.new for c in session.states][:3] == ["screening", "greeting", "listening"]
    (amd,) = events(calllog, "amd")
    assert amd.startswith("human at 1.") and "short greeting" in amd
    t0 = line.out[0][0]
    spoken = [a - t0 for a, b in line.speech_spans() if b - a > 0.1]
    assert spoken and spoken[0] >= 1.5  # the greeting after the decision, not over "hello"
    assert not hangups


@pytest.mark.parametrize(("direction", "amd"), [("inbound", True), ("outbound", False)])
def test_without_amd_or_on_an_inbound_call_the_greeting_comes_at_once(direction, amd):
    session, line, calllog, _ = dial("Hello?", direction=direction, amd=amd)
    session.start()
    line.start()
    session.media_active("PCMU")
    assert wait_until(lambda: "greeting" in [c.new for c in session.states], timeout=3)
    session.disconnected(by_local=False)
    assert session.join(5)
    line.stop()
    assert "screening" not in [c.new for c in session.states]
    assert not events(calllog, "amd")


def test_a_call_cancelled_while_it_rings_ends_with_the_owners_reason():
    # A campaign gives up on a call ringing past its ring timeout: shutdown('ring-timeout').
    session, _, calllog, hangups = dial("", amd=False)
    session.start()
    session.shutdown("ring-timeout")
    assert wait_until(lambda: hangups, timeout=5)  # the hangup: a CANCEL on the wire
    session.disconnected(by_local=True, code=487)
    assert session.join(5)
    assert (session.end_reason, session.codec) == ("ring-timeout", "")
    assert calllog.of(CallEnded)[0].end_reason == "ring-timeout"
