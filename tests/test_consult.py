"""Attended transfer (issue 61) on fake stages in real time: every ending, every record.

The caller's line is :class:`fakes.FakeCall`; the SIP side of the transfer is a recording
stand-in (:class:`FakeLegs`) whose consult leg is driven by the test: it answers, sends keys,
refuses, hangs up, and its audio is a second simulated line. The real SIP side (REFER with
Replaces, the bridge, sipp peers) is tested in test_sip_consult.py.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from fakes import FakeASR, FakeCall, FakeLLM, FakeTTS, ListLog, fake_stages, tone

from agent.call.announce import answer_of, call_so_far, one_sentence
from agent.call.hold import HoldAudio, soft_tone
from agent.call.legs import ConsultLine, LegInputs
from agent.call.session import CallSession
from agent.turn.runner import TurnRunner
from db.records import (
    CallEnded,
    CallStarted,
    EventRecord,
    MessageRecord,
    ToolCallRecord,
    TurnRecord,
)
from dialplan import parse_config
from models.llm.base import Message
from tests.waiting import wait_until

pytestmark = pytest.mark.unit

AUDIO = {"endpoint_silence_s": 0.3, "pause_tolerance_s": 0.7, "max_endpoint_wait_s": 1.0,
         "min_speech_s": 0.1, "end_of_turn_words": False}
PROFILE = {
    "greeting": "Hi.", "audio": AUDIO, "tools": ["transfer", "take_message"],
    "directory": {"front-desk": {"uri": "sip:desk@127.0.0.1:5999", "attended": True}},
    "keypad": {"0": "transfer:front-desk"}, "consult_ring_s": 3, "consult_answer_s": 3,
}
LEG = 77


class FakeLegs:
    """The SIP side of attended transfers: what was asked of it, and the leg's inputs."""

    def __init__(self, free: bool = True):
        self.free = free
        self.dialled: list[str] = []
        self.hangups: list[int] = []
        self.replaces: list[int] = []
        self.bridges: list[int] = []
        self.inputs: LegInputs | None = None
        self.line: FakeCall | None = None

    def consult_line(self) -> ConsultLine:
        return ConsultLine(dial=self._dial, hangup=self.hangups.append,
                           replaces=self.replaces.append, bridge=self.bridges.append)

    def _dial(self, uri, link, inputs) -> int | None:
        if not self.free:
            return None
        self.dialled.append(uri)
        self.inputs = inputs
        self.line = FakeCall(link)
        return LEG

    def answer(self) -> None:
        self.line.start()
        self.inputs.media_active("PCMU")


class Call:
    """A caller's session with attended transfers to a :class:`FakeLegs`."""

    def __init__(self, stages, legs: FakeLegs | None = None, **over):
        self.profile = parse_config({"profiles": {"p": {**PROFILE, **over}},
                                     "dialplan": {"1": "p"}}).profiles["p"]
        self.log = ListLog()
        self.hangups: list[float] = []
        self.refers: list[str] = []
        self.legs = legs or FakeLegs()
        self.tts = stages.tts
        self.session = CallSession(
            self.profile, stages, self.log, hangup=lambda: self.hangups.append(time.time()),
            phrase=TurnRunner(stages, self.profile).prepare_phrases(),
            transfer=self.refers.append, consult=self.legs.consult_line())
        self.line = FakeCall(self.session.link)
        self.session.start()
        self.line.start()
        self.session.media_active("PCMU")
        assert wait_until(lambda: self.session.state == "listening")

    def transfer(self) -> None:
        """The caller presses 0; the agent announces the transfer and dials the target."""
        self.session.dtmf("0")
        assert wait_until(lambda: self.legs.dialled, timeout=10)

    def answered(self) -> None:
        """Wait for the caller's turn to be answered and heard."""
        assert wait_until(lambda: self.log.of(TurnRecord), timeout=10)
        assert wait_until(lambda: self.session.state == "listening" and not
                          self.session.playout.busy, timeout=10)

    def rows(self) -> list[tuple[str, str]]:
        return [(r.outcome, r.detail) for r in self.log.of(ToolCallRecord)]

    def outcome(self) -> str:
        return self.log.of(ToolCallRecord)[-1].outcome

    def leg_records(self, cls) -> list:
        return [r for r in self.log.of(cls) if r.call_id == self.legs.inputs.call_id]

    def close(self) -> CallEnded:
        self.session.disconnected(by_local=bool(self.hangups))
        assert self.session.join(5.0)
        self.line.stop()
        if self.legs.line is not None and self.legs.line._thread.is_alive():
            self.legs.line.stop()
        return [r for r in self.log.of(CallEnded) if r.call_id == self.session.call_id][0]


def stages(*heard: str, llm=None):
    return fake_stages(asr=FakeASR(list(heard or ["hello"])), tts=FakeTTS(s_per_char=0.01),
                       llm=llm or FakeLLM("The caller wants to renew a library card."))


def test_accepted_by_key_1_sends_refer_with_replaces_and_hangs_up_on_200():
    call = Call(stages())
    call.transfer()
    assert call.legs.dialled == ["sip:desk@127.0.0.1:5999"]
    # The caller is on hold: the soft tone, not silence, while the target's phone rings.
    at = time.monotonic()
    assert wait_until(lambda: any(np.abs(f).max() > 500 for t, f in call.line.out if t > at))
    call.legs.answer()
    assert wait_until(lambda: call.legs.line.speech_spans(), timeout=10)  # the announcement
    call.legs.inputs.dtmf("1")
    assert wait_until(lambda: call.legs.replaces == [LEG])
    call.session.transfer_status(100, "Accepted", final=False)
    call.session.transfer_status(200, "OK", final=True)
    assert wait_until(lambda: call.hangups)
    assert call.close().end_reason == "transferred"
    assert call.refers == []  # no blind REFER
    leg = call.legs.inputs.call_id
    details = [d for _, d in call.rows()]
    assert all(d.startswith(f"attended, consult call {leg}: ") for d in details)
    assert call.outcome() == "ok" and details[-1].endswith("REFER with Replaces: 200 OK")
    assert any("accepted (key 1)" in d for d in details)
    # The leg's own row: outbound, to the target, linked to the caller's call both ways.
    (started,) = call.leg_records(CallStarted)
    assert (started.direction, started.caller_uri) == ("outbound", "sip:desk@127.0.0.1:5999")
    events = {e.kind: e.detail for e in call.leg_records(EventRecord)}
    assert events["consult-for"].startswith(f"call {call.session.call_id}: ")
    # Nothing was said before the transfer: the template sentence, not the LLM's.
    assert events["summary"] == ("template: the caller has said nothing yet: "
                                 "I have a caller on the line for the front desk.")
    assert ("consult", f"call {leg} to front-desk (sip:desk@127.0.0.1:5999)") in [
        (e.kind, e.detail) for e in call.log.of(EventRecord)
        if e.call_id == call.session.call_id]
    assert call.legs.hangups == [LEG]  # the agent's leg ends with the caller's call
    (ended,) = call.leg_records(CallEnded)
    assert ended.end_reason == "transferred"


def test_the_summary_is_the_llms_sentence_about_the_call():
    llm = FakeLLM("The caller wants to renew a library card. More words.")
    call = Call(stages("I would like to renew my library card", llm=llm))
    call.line.say(tone(0.8))
    call.answered()
    call.transfer()
    call.legs.answer()
    assert wait_until(lambda: "The caller wants to renew a library card." in call.tts.texts,
                      timeout=10)
    prompt = llm.prompts[-1]
    assert "Caller: I would like to renew my library card" in prompt[-1].content
    events = {e.kind: e.detail for e in call.leg_records(EventRecord)}
    assert events["summary"] == "llm: The caller wants to renew a library card."
    call.close()
    assert call.outcome() == "caller-gone"


def test_a_failing_llm_leaves_the_template_sentence():
    llm = FakeLLM("Fine.")
    call = Call(stages("I need the front desk", llm=llm))
    call.line.say(tone(0.8))
    call.answered()
    llm.fail_with = RuntimeError("model gone")
    call.transfer()
    call.legs.answer()
    assert wait_until(lambda: call.legs.line.speech_spans(), timeout=10)
    events = {e.kind: e.detail for e in call.leg_records(EventRecord)}
    assert events["summary"].startswith("template: the LLM failed (RuntimeError")
    call.close()


def test_refer_refused_bridges_the_calls_until_the_target_hangs_up():
    call = Call(stages())
    call.transfer()
    call.legs.answer()
    call.legs.inputs.dtmf("1")
    assert wait_until(lambda: call.legs.replaces)
    call.session.transfer_status(501, "Not Implemented", final=True)
    assert wait_until(lambda: call.legs.bridges == [LEG])
    call.legs.inputs.bridged(True, "bridged")
    assert wait_until(lambda: call.outcome() == "bridged")
    assert call.rows()[-1][1].endswith(
        "REFER with Replaces: 501 Not Implemented; the calls' audio bridged")
    # Bridged: the hold audio stops, and the caller's words are not turns.
    call.line.say(tone(1.0))
    time.sleep(1.5)
    assert not call.hangups and call.session.turns == 0
    call.legs.inputs.disconnected(by_local=False)
    assert wait_until(lambda: call.hangups)
    assert call.close().end_reason == "callee-bye"
    assert call.leg_records(CallEnded)[0].end_reason == "callee-bye"


@pytest.mark.parametrize(("act", "outcome", "said"), [
    ("key 2", "declined", "Sorry, the front desk can't take your call right now."),
    ("hang up", "declined", "Sorry, the front desk can't take your call right now."),
    ("486", "sip-486", "Sorry, the front desk is busy right now."),
    ("480", "no-answer", "Sorry, the front desk is not answering right now."),
    ("no answer", "no-answer", "Sorry, the front desk is not answering right now."),
    ("no decision", "timeout", "Sorry, the front desk can't take your call right now."),
])
def test_a_transfer_that_fails_offers_a_message_and_the_call_goes_on(act, outcome, said):
    call = Call(stages())
    call.transfer()
    if act in ("key 2", "hang up", "no decision"):
        call.legs.answer()
        assert wait_until(lambda: call.legs.line.speech_spans(), timeout=10)
    if act == "key 2":
        call.legs.inputs.dtmf("2")
    elif act == "hang up":
        call.legs.inputs.disconnected(by_local=False)
    elif act in ("486", "480"):
        call.legs.inputs.disconnected(by_local=False, code=int(act))
    assert wait_until(lambda: call.outcome() == outcome, timeout=10), call.rows()
    offer = f"{said} Would you like to leave a message?"
    assert wait_until(lambda: offer in call.tts.texts, timeout=10)
    assert wait_until(lambda: call.session.state == "listening", timeout=10)
    assert not call.hangups
    if act in ("key 2", "no decision", "no answer"):
        assert call.legs.hangups == [LEG]  # the agent ended the leg itself
    prompt = call.session.history[-1]
    assert prompt == Message("assistant", offer)
    call.close()


def test_yes_to_the_offer_takes_a_message():
    call = Call(stages("yes please", "Tell them I called about my card."))
    call.transfer()
    call.legs.inputs.disconnected(by_local=False, code=486)
    assert wait_until(lambda: call.session.state == "listening" and not
                      call.session.playout.busy, timeout=10)
    call.line.say(tone(0.6))
    assert wait_until(lambda: ("take_message", "offer", "ok") in [
        (r.name, r.source, r.outcome) for r in call.log.of(ToolCallRecord)], timeout=10)
    assert call.log.of(TurnRecord)[0].unanswered == "message-offer"
    assert call.session.runner.stages.llm.prompts == []  # "yes" decided, not the model
    call.line.say(tone(0.8))  # the message
    assert wait_until(lambda: call.log.of(MessageRecord), timeout=10)
    assert call.log.of(MessageRecord)[0].text == "Tell them I called about my card."
    call.close()


def test_the_targets_yes_accepts():
    call = Call(stages("Yes, put them through."))
    call.transfer()
    call.legs.answer()
    assert wait_until(lambda: call.legs.line.speech_spans(), timeout=10)
    assert wait_until(lambda: not call.session.actions._consult.playout.busy, timeout=10)
    call.legs.line.say(tone(0.8))
    assert wait_until(lambda: call.legs.replaces, timeout=10)
    heard = [e.detail for e in call.leg_records(EventRecord) if e.kind == "heard"]
    assert heard == ["yes: Yes, put them through."]
    call.close()
    assert call.outcome() == "caller-gone"


def test_the_caller_hanging_up_ends_the_leg_and_the_row_says_caller_gone():
    call = Call(stages())
    call.transfer()
    call.legs.answer()
    call.session.disconnected(by_local=False)
    assert call.session.join(5.0)
    call.line.stop()
    call.legs.line.stop()
    assert call.outcome() == "caller-gone"
    assert "the call ended (caller-bye) while " in call.rows()[-1][1]
    assert call.legs.hangups == [LEG]
    assert call.leg_records(CallEnded)[0].end_reason == "caller-gone"
    assert call.legs.inputs.join(0) is False  # until its disconnect, or OWNER_GONE_S


def test_no_call_slot_free_makes_it_blind():
    call = Call(stages(), legs=FakeLegs(free=False))
    call.session.dtmf("0")
    assert wait_until(lambda: call.refers == ["sip:desk@127.0.0.1:5999"], timeout=10)
    call.session.transfer_status(200, "OK", final=True)
    assert call.close().end_reason == "transferred"
    assert call.rows()[-1] == ("ok", "200 OK (attended asked; made blind)")


def test_words_and_helpers():
    assert [answer_of(t) for t in ("Yes.", "yeah sure", "No, sorry.", "I'm busy",
                                   "hmm", "yes no")] == ["yes", "yes", "no", "no", None, None]
    assert one_sentence("The caller wants a refund. Then more.") == "The caller wants a refund."
    assert one_sentence("<tool_call>{}") is None and one_sentence("Okay.") is None
    history = [Message("user", "I want to book a room\n\n[facts]"),
               Message("assistant", 'Sure.<tool_call>{"name": "x"}</tool_call>'),
               Message("user", "<tool_response>\n{}\n</tool_response>")]
    assert call_so_far(history) == "Caller: I want to book a room\nAgent: Sure."
    tone_ = soft_tone(8000)
    assert 0 < np.abs(tone_).max() < 0.06 * 32768 and len(tone_) == 3 * 8000
    hold = HoldAudio("", 8000)
    assert np.array_equal(np.concatenate([hold.next(2.0), hold.next(2.0)])[:3 * 8000], tone_)


def test_the_consult_leg_is_one_of_the_servers_calls_and_takes_a_slot():
    from agent.server import Server
    from agent.sip.events import Bridged, CallDisconnected, DtmfReceived

    config = parse_config({"sip": {"max_calls": 2}, "profiles": {"p": PROFILE},
                           "dialplan": {"1": "p"}})
    server = Server(config, ListLog())
    dialled: list[str] = []
    server.sip.dial = lambda uri, link: dialled.append(uri) or 40 + len(dialled)
    line = server._consult_line(lambda: 1)
    server.sessions[1] = object()  # the caller's call
    news: list[tuple] = []
    inputs = LegInputs("leg-1", lambda *a: news.append(a))
    assert line.dial("sip:desk@127.0.0.1:5999", None, inputs) == 41
    assert server.sessions[41] is inputs
    # sip.max_calls = 2: the caller and this leg; a second leg gets no slot and no INVITE.
    assert line.dial("sip:desk@127.0.0.1:5999", None, LegInputs("leg-2", print)) is None
    assert dialled == ["sip:desk@127.0.0.1:5999"]
    server._handle(DtmfReceived(41, "1", 0.0))
    server._handle(Bridged(1, 41, True, "bridged", 0.0))
    server._handle(CallDisconnected(41, 200, "Normal call clearing", False, 0.0))
    assert news == [("leg-1", "dtmf", "1"), ("leg-1", "bridged", "bridged"),
                    ("leg-1", "gone", "remote", 200)]
    assert 41 not in server.sessions and inputs.join(0)
