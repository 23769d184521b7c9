"""A call's actions on fake stages in real time.

Hang up, transfer (and its failure), the keypad map, typed digits, a message, a recording.
The line is :class:`fakes.FakeCall`; transfers go to a recording stand-in for the SIP side
(the real REFER is tested in test_sip_transfer.py and end to end in test_sip_actions.py).
"""

from __future__ import annotations

import time

import pytest
from fakes import FakeASR, FakeCall, FakeLLM, FakeTTS, ListLog, fake_stages, tone
from test_tools import CALL, ScriptedLLM

from agent.call.session import CallSession
from agent.turn.runner import TurnRunner
from db.records import CallEnded, MessageRecord, ToolCallRecord, TurnRecord
from dialplan import parse_config
from tests.waiting import wait_until

pytestmark = pytest.mark.unit

AUDIO = {"endpoint_silence_s": 0.3, "pause_tolerance_s": 0.7, "max_endpoint_wait_s": 1.0,
         "min_speech_s": 0.1, "end_of_turn_words": False}
PROFILE = {
    "greeting": "Hi.", "goodbye": "Bye now.", "audio": AUDIO,
    "tools": ["end_call", "transfer", "take_message", "collect_digits"],
    "directory": {
        "front-desk": {"uri": "sip:desk@127.0.0.1:5999", "description": "general"},
        "children": {"uri": "sip:kids@127.0.0.1:5999", "description": "children's books"},
    },
    "keypad": {"0": "transfer:front-desk", "9": "end", "5": "say:We open at nine."},
}


class Call:
    """A session on a fake line, with the SIP side's hang-ups and REFERs recorded."""

    def __init__(self, tmp_path, stages, send_dtmf=None, **over):
        self.profile = parse_config({"profiles": {"p": {**PROFILE, **over}},
                                     "dialplan": {"1": "p"}}).profiles["p"]
        self.log = ListLog()
        self.hangups: list[float] = []
        self.refers: list[str] = []
        self.tts = stages.tts
        self.session = CallSession(
            self.profile, stages, self.log, hangup=lambda: self.hangups.append(time.time()),
            phrase=TurnRunner(stages, self.profile).prepare_phrases(),
            transfer=self.refers.append, send_dtmf=send_dtmf, media_dir=str(tmp_path))
        self.line = FakeCall(self.session.link)
        self.session.start()
        self.line.start()
        self.session.media_active("PCMU")
        assert wait_until(lambda: self.session.state == "listening")

    def tools(self) -> list[tuple[str, str, str]]:
        return [(r.name, r.source, r.outcome) for r in rows(self.log)]

    def close(self):
        self.session.disconnected(by_local=bool(self.hangups))
        assert self.session.join(5.0)
        self.line.stop()
        return self.log.of(CallEnded)[0]


def rows(log: ListLog) -> list[ToolCallRecord]:
    """The ``tool_calls`` rows the records make: a started action's last news is its row."""
    out: dict[object, ToolCallRecord] = {}
    for i, r in enumerate(log.of(ToolCallRecord)):
        out[i if r.seq is None else ("seq", r.seq)] = r
    return list(out.values())


def stages_saying(*replies: str, heard=("caller words",)):
    return fake_stages(llm=ScriptedLLM(list(replies)), asr=FakeASR(list(heard)),
                       tts=FakeTTS(s_per_char=0.01))


def test_end_call_says_goodbye_then_hangs_up_with_reason_agent(tmp_path):
    end = '<tool_call>\n{"name": "end_call", "arguments": {}}\n</tool_call>'
    call = Call(tmp_path, stages_saying(end, heard=("that's all, thanks",)))
    call.line.say(tone(0.8))
    assert wait_until(lambda: call.hangups, timeout=10)
    assert call.session.end_reason == "agent"
    assert "Bye now." in call.tts.texts  # the goodbye was said before the BYE
    ended = call.close()
    assert ended.end_reason == "agent"
    assert call.tools() == [("end_call", "llm", "ok")]


def test_transfer_sends_refer_after_its_phrase_and_hangs_up_on_200(tmp_path):
    call = Call(tmp_path, stages_saying(CALL))
    call.line.say(tone(0.8))
    assert wait_until(lambda: call.refers, timeout=10)
    assert call.refers == ["sip:kids@127.0.0.1:5999"]
    assert not call.session.playout.busy  # the phrase had played out first
    call.session.transfer_status(100, "Trying", final=False)
    call.session.transfer_status(200, "OK", final=True)
    assert wait_until(lambda: call.hangups)
    assert call.close().end_reason == "transferred"
    # One row, written when the REFER went out and updated by each NOTIFY.
    news = [(r.seq, r.name, r.arguments, r.outcome, r.detail) for r in call.log.of(ToolCallRecord)]
    assert news == [(1, "transfer", '{"target": "children"}', "pending", "REFER sent"),
                    (1, "transfer", '{"target": "children"}', "pending", "100 Trying"),
                    (1, "transfer", '{"target": "children"}', "ok", "200 OK")]
    assert len({r.at for r in call.log.of(ToolCallRecord)}) == 1  # ``at``: when it started


def test_a_transfer_asked_for_by_name_is_made_without_the_model(tmp_path):
    stages = stages_saying("Sure, I can take you to the children's section.",
                           heard=("Could you put me through to the children's section?",))
    call = Call(tmp_path, stages)
    call.line.say(tone(0.8))
    assert wait_until(lambda: call.refers, timeout=10)
    assert call.refers == ["sip:kids@127.0.0.1:5999"]
    assert stages.llm.prompts == []  # the words decided: the model was not asked
    assert "Transferring you to the children now." in call.tts.texts
    call.session.transfer_status(200, "OK", final=True)
    assert call.close().end_reason == "transferred"
    assert call.tools() == [("transfer", "caller", "ok")]
    (turn,) = call.log.of(TurnRecord)
    assert turn.reply_text == "Transferring you to the children now."


def test_a_failed_transfer_is_said_and_the_call_goes_on(tmp_path):
    call = Call(tmp_path, stages_saying(CALL, "We open at nine.",
                                        heard=("put me through", "when do you open")))
    call.line.say(tone(0.8))
    assert wait_until(lambda: call.refers, timeout=10)
    said = len(call.line.speech_spans())
    call.session.transfer_status(486, "Busy Here", final=True)
    assert wait_until(lambda: len(call.line.speech_spans()) > said and
                      call.session.state == "listening", timeout=10)
    assert not call.hangups
    assert call.tools() == [("transfer", "llm", "sip-486")]
    # The model is told, and the caller's next question is answered as usual.
    call.line.say(tone(0.8))
    assert wait_until(lambda: len(call.log.of(TurnRecord)) >= 2, timeout=10)
    prompt = call.session.runner.stages.llm.prompts[-1]
    assert any("failed" in m.content and "<tool_response>" in m.content for m in prompt)
    assert call.close().end_reason == "caller-bye"


def test_keypad_zero_transfers_and_nine_ends_and_five_speaks(tmp_path):
    call = Call(tmp_path, stages_saying())
    call.session.dtmf("5")
    assert wait_until(lambda: call.session.state == "speaking")
    assert wait_until(lambda: call.session.state == "listening", timeout=10)
    call.session.dtmf("0")
    assert wait_until(lambda: call.refers == ["sip:desk@127.0.0.1:5999"], timeout=10)
    call.session.transfer_status(503, "Service Unavailable", final=True)
    assert wait_until(lambda: call.session.state == "listening", timeout=10)
    call.session.dtmf("9")
    assert wait_until(lambda: call.hangups, timeout=10)
    assert call.close().end_reason == "agent"
    assert call.tools() == [("say", "keypad", "ok"), ("transfer", "keypad", "sip-503"),
                            ("end_call", "keypad", "ok")]


def test_typed_digits_reach_the_llm_as_the_callers_words(tmp_path):
    stages = fake_stages(llm=FakeLLM("Thank you, account 4729 found."),
                         tts=FakeTTS(s_per_char=0.01))
    call = Call(tmp_path, stages)
    for d in "4729#":
        call.session.dtmf(d)
    assert wait_until(lambda: call.log.of(TurnRecord), timeout=10)
    turn = call.log.of(TurnRecord)[0]
    assert turn.transcript == "keypad: 4729#"
    assert turn.reply_text == "Thank you, account 4729 found."
    assert stages.llm.prompts[-1][-1].content == "keypad: 4729#"
    call.close()


def test_a_message_keeps_the_callers_next_words_and_audio(tmp_path):
    take = '<tool_call>\n{"name": "take_message", "arguments": {}}\n</tool_call>'
    call = Call(tmp_path, stages_saying(take, heard=("I'd like to leave a message",
                                                     "please call me back about my card")))
    call.line.say(tone(0.8))
    # The words ask for it: taken without the model (agent.turn.intent.leaves_message).
    assert wait_until(lambda: call.tools() == [("take_message", "caller", "ok")], timeout=10)
    assert wait_until(lambda: call.session.state == "listening", timeout=10)
    call.line.say(tone(1.0))
    assert wait_until(lambda: call.log.of(MessageRecord), timeout=15)
    (msg,) = call.log.of(MessageRecord)
    assert msg.text == "please call me back about my card"
    assert 1.0 <= msg.duration_s <= 1.7  # the utterance with its pre-roll and tail
    assert msg.audio_path and (tmp_path / "messages").exists()
    # The words of the message were not answered, and their turn says why.
    turns = call.log.of(TurnRecord)
    assert turns[-1].unanswered == "message"
    assert wait_until(lambda: "Thank you, I have passed your message on. Anything else?"
                      in call.tts.texts or call.session.state == "speaking")
    call.close()


def test_a_recorded_call_has_the_caller_left_and_the_agent_right(tmp_path):
    import numpy as np
    import soundfile as sf

    call = Call(tmp_path, stages_saying("We open at nine."), recording="stereo")
    call.line.say(tone(0.8))
    assert wait_until(lambda: call.log.of(TurnRecord), timeout=10)
    assert wait_until(lambda: call.session.state == "listening", timeout=10)
    ended = call.close()
    audio, rate = sf.read(ended.recording_path, dtype="int16")
    assert rate == 8000 and audio.shape[1] == 2
    assert ended.recording_s == pytest.approx(len(audio) / rate)

    def loud(channel):  # 20 ms frames louder than silence
        frames = channel[: len(channel) // 160 * 160].reshape(-1, 160).astype(np.float64)
        return np.sqrt((frames ** 2).mean(axis=1)) > 500

    left, right = loud(audio[:, 0]), loud(audio[:, 1])
    # The greeting is on the right before the caller speaks on the left, then the reply.
    first_left, first_right = np.argmax(left), np.argmax(right)
    assert left.any() and right.any() and first_right < first_left
    assert right[first_left + 40:].any()  # the reply, after the caller's 0.8 s
    assert not (left & right)[:first_left].any()


def test_send_digits_presses_keys_down_the_line_and_says_nothing(tmp_path):
    press = '<tool_call>\n{"name": "send_digits", "arguments": {"digits": "2#"}}\n</tool_call>'
    sent: list[str] = []  # a line that can send DTMF (an outbound call through a menu)
    call = Call(tmp_path, stages_saying(press), send_dtmf=sent.append, tools=["send_digits"])
    spoken = len(call.tts.texts)
    call.line.say(tone(0.8))
    assert wait_until(lambda: sent == ["2#"], timeout=10)
    assert call.tools() == [("send_digits", "llm", "ok")]
    assert call.tts.texts[spoken:] == []  # the tones are what the other side hears
    call.close()


def test_a_failed_tool_is_an_error_event_and_a_tool_calls_row_with_the_turn():
    from agent.call.recorder import CallRecorder
    from agent.call.turn import Turn
    from agent.turn.result import ToolUse, TurnResult
    from agent.turn.timeline import TurnTimeline
    from db.records import EventRecord
    from tests.replies import utterance

    log = ListLog()
    rec = CallRecorder(log, "c1")
    turn = Turn(index=0, utterance=utterance(), timeline=TurnTimeline(), history_len=0)
    turn.result = TurnResult(transcript="is moby dick in?", reply_text="Sorry.", tools=[
        ToolUse("book_status", '{"title": "Moby Dick"}', "timeout", 0.3, "no answer in 0.3 s")],
        tool_error="book_status: timeout")
    rec.turn(turn, 0.0)
    (row,) = log.of(ToolCallRecord)
    assert (row.name, row.outcome, row.latency_s, row.turn_index, row.source) == (
        "book_status", "timeout", 0.3, 0, "llm")
    assert [(e.kind, e.detail) for e in log.of(EventRecord)] == [
        ("error", "turn 0: tool book_status: timeout")]
