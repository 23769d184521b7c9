"""Tools: the scanner, the toolbox's prompt and checks, and a reply that calls a tool.

Fake models and a real scheduler; HTTP tools are in test_http_tools.py.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from fakes import FakeASR, FakeLLM, FakeTTS, fake_stages
from replies import answer

from agent.turn.intent import farewell
from agent.turn.runner import TurnRunner
from agent.turn.tools import Toolbox, ToolCall, ToolCallScanner, target_of
from dialplan.config import parse_config
from dialplan.profile import DirectoryEntry
from models.llm.base import Message, Piece

pytestmark = pytest.mark.unit

LIBRARY = {
    "tools": ["end_call", "transfer", "take_message", "collect_digits"],
    "directory": {
        "front-desk": {"uri": "sip:desk@127.0.0.1", "description": "general questions"},
        "children": {"uri": "sip:kids@127.0.0.1", "description": "children's books"},
        "accounts": {"uri": "sip:fees@127.0.0.1", "description": "fees and fines"},
    },
}


def profile(**over):
    return parse_config({"profiles": {"default": {**LIBRARY, **over}}}).profiles["default"]


def scan(pieces: list[str]) -> tuple[str, ToolCall | None, ToolCallScanner]:
    sc = ToolCallScanner()
    said, call = "", None
    for p in pieces:
        text, c = sc.push(p)
        said += text
        call = call or c
    text, c = sc.flush()
    return said + text, call or c, sc


CALL = '<tool_call>\n{"name": "transfer", "arguments": {"target": "children"}}\n</tool_call>'


@pytest.mark.parametrize("text", [
    CALL,
    '```json\n{"name": "transfer", "arguments": {"target": "children"}}\n```',
    '<tools>\n{"name": "transfer", "arguments": {"target": "children"}}\n</tools>',
    '{"name": "transfer", "arguments": "{\\"target\\": \\"children\\"}"}',
    '<tools><transfer target="children"/></tools>',
])
def test_every_format_the_small_models_use_is_a_call_and_none_of_it_is_spoken(text):
    # Streamed a few characters at a time, as tokens come.
    said, call, _ = scan([text[i:i + 3] for i in range(0, len(text), 3)])
    assert said == ""
    assert call == ToolCall("transfer", {"target": "children"}, raw=CALL)


def test_speech_before_a_call_is_spoken_and_the_call_is_not():
    said, call, _ = scan(["Sure, one moment. ", "<tool", "_call>\n{\"name\": \"end_call\"",
                          ", \"arguments\": {}}\n</tool_call>"])
    assert said == "Sure, one moment. "
    assert call.name == "end_call" and call.arguments == {}


def test_plain_speech_passes_at_once_and_a_stray_bracket_is_spoken_at_the_end():
    sc = ToolCallScanner()
    assert sc.push("We open at ten") == ("We open at ten", None)
    assert sc.push(" <") == (" ", None)  # held: it may open a call
    assert sc.push("3 you") == ("<3 you", None)  # it did not
    said, call, _ = scan(["Press ` to", " go on"])
    assert (said, call) == ("Press ` to go on", None)


def test_an_unfinished_or_nameless_call_is_malformed_and_never_spoken():
    said, call, sc = scan(['<tool_call>\n{"name": "transf'])
    assert (said, call) == ("", None) and sc.malformed.startswith("<tool_call>")
    said, call, sc = scan(['{"arguments": {}}'])
    assert (said, call) == ("", None) and sc.malformed


@pytest.mark.parametrize(("reply", "bye"), [
    ("Goodbye!", True), ("Thank you for calling, goodbye.", True),
    ("You're welcome, have a nice day. Bye!", True), ("Okay, bye bye.", True),
    ("You're welcome! If you have any other questions, feel free to ask.", False),
    ("Before you go, goodbye is not the word I would use.", False), ("", False),
    ("Thank you for using the library. Goodbye!", True), ("Goodbye? Is that all?", False),
])
def test_farewell_when_the_reply_ends_on_a_goodbye_and_asks_nothing(reply, bye):
    assert farewell(reply) is bye


def test_farewell_when_the_caller_only_took_leave_and_the_reply_asks_nothing():
    assert farewell("Thank you! I'll be here if you need anything else.", "Okay thanks bye.")
    assert not farewell("Anything else I can help with?", "Okay thanks bye.")
    assert not farewell("We open at nine.", "Bye the way, when do you open?")
    # The caller's last word was goodbye: "We will hang up now." hangs up.
    assert farewell("Thank you for your call. We will hang up now.",
                    "No, that's everything. Goodbye.")
    assert farewell("We will hang up.",
                    "Thanks, that answers my question. Have a nice day. Goodbye.")
    assert not farewell("Sure.", "Goodbye? No wait, one more thing.")


def test_toolbox_prompt_lists_the_profile_tools_and_directory_in_qwen_format():
    box = Toolbox(profile())
    prompt = box.system_prompt("You are the library.")
    assert prompt.startswith("You are the library.\n\n# Tools\n")
    sigs = [json.loads(line) for line in prompt.split("<tools>\n")[1].split("\n</tools>")[0]
            .splitlines()]
    assert [s["function"]["name"] for s in sigs] == list(LIBRARY["tools"])
    target = sigs[1]["function"]["parameters"]["properties"]["target"]
    assert target["enum"] == ["front-desk", "children", "accounts"]
    assert "accounts: fees and fines" in target["description"]
    assert Toolbox(parse_config({}).profiles["default"]).system_prompt("x") == "x"


def test_toolbox_checks_names_and_targets_forgivingly():
    p = profile()
    box = Toolbox(p)
    assert box.problem(ToolCall("transfer", {"target": "Children's section"})) == ""
    assert target_of(ToolCall("transfer", {"target": "the front desk"}), p) == "front-desk"
    assert "unknown target" in box.problem(ToolCall("transfer", {"target": "zoo"}))
    assert "unknown tool" in box.problem(ToolCall("book_room", {}))


class ScriptedLLM(FakeLLM):
    """One scripted reply per request, in order; pieces of a few characters."""

    def __init__(self, replies: list[str]):
        super().__init__()
        self.replies = list(replies)

    def _stream_impl(self, messages: list[Message]) -> Iterator[Piece]:
        self.prompts.append(list(messages))
        text = self.replies.pop(0)
        for i in range(0, len(text), 4):
            time.sleep(0.002)
            yield Piece(text[i:i + 4])


ASKS = "Can I talk to someone?"
"""Words that may call for a tool: the turn is asked with the tools block."""


def run(replies: list[str], words: str = ASKS, **over):
    llm, tts = ScriptedLLM(replies), FakeTTS(s_per_char=0.001)
    runner = TurnRunner(fake_stages(llm=llm, tts=tts, asr=FakeASR([words])), profile(**over))
    history: list[Message] = []
    result, _ = answer(runner, history)
    return result, history, llm, tts


def test_a_transfer_call_says_its_phrase_and_hands_the_action_to_the_call():
    result, history, llm, tts = run([CALL])
    assert result.action == ToolCall("transfer", {"target": "children"}, raw=CALL)
    assert tts.texts == ["Transferring you to the children now."]
    assert result.reply_text == "Transferring you to the children now."
    # The prompt carried the tools; the history keeps the call, as the model's own words.
    assert "# Tools" in llm.prompts[0][0].content
    assert history[-1] == Message("assistant", CALL)


def test_an_unknown_target_goes_back_to_the_model_which_answers_instead():
    bad = '<tool_call>\n{"name": "transfer", "arguments": {"target": "zoo"}}\n</tool_call>'
    result, history, llm, tts = run([bad, "We have no zoo, sorry."])
    assert result.action is None
    assert [(u.name, u.outcome) for u in result.tools] == [("transfer", "invalid")]
    assert "<tool_response>" in llm.prompts[1][-1].content
    assert "unknown target" in llm.prompts[1][-1].content
    assert " ".join(tts.texts) == "We have no zoo, sorry."
    assert history[-1] == Message("assistant", "We have no zoo, sorry.")


def test_a_spoken_goodbye_ends_the_call():
    result, _, _, _ = run(["Thank you for calling, goodbye!"])
    assert result.action is not None and result.action.name == "end_call"
    assert result.action.implicit
    result, _, _, _ = run(["Thank you for calling, goodbye!"], tools=["transfer"])
    assert result.action is None  # a profile without end_call never hangs up by itself


def test_collect_digits_says_the_model_prompt():
    ask = ('<tool_call>\n{"name": "collect_digits", "arguments": {"prompt": "Please type your '
           'card number, then hash."}}\n</tool_call>')
    result, _, _, tts = run([ask])
    assert result.action.name == "collect_digits"
    assert tts.texts == ["Please type your card number, then hash."]


def test_neither_words_nor_a_call_is_asked_again_without_the_tools():
    result, history, llm, tts = run(["<tools></tools>", "We have many dinosaur books."])
    assert [(u.name, u.outcome) for u in result.tools] == [("?", "malformed")]
    assert "# Tools" in llm.prompts[0][0].content
    assert "# Tools" not in llm.prompts[1][0].content  # the persona alone
    assert llm.prompts[1][-1] == Message("user", ASKS)
    assert " ".join(tts.texts) == "We have many dinosaur books."
    assert result.action is None and not result.tool_error


def test_a_model_that_never_answers_in_words_gets_the_caller_an_apology():
    result, _, llm, tts = run(["<tools></tools>", "<tools></tools>"])
    assert len(llm.prompts) == 2
    assert tts.texts == ["Sorry, I'm having trouble answering right now. Please try again."]
    assert result.tool_error  # recorded as an error event with the turn


@pytest.mark.parametrize("text", [
    '<tools><function name="transfer" arguments={"target": "children"}',  # never closed
    '{"name": "transfer", "arguments": {"target": "children", "type": "obj',  # cut short
])
def test_a_call_cut_short_still_counts_when_it_named_its_tool(text):
    said, call, _ = scan([text])
    assert said == "" and call is not None
    assert (call.name, call.arguments) == ("transfer", {"target": "children"})


def test_end_call_is_refused_when_the_caller_did_not_take_leave_and_asked_without_tools():
    end = '<tool_call>\n{"name": "end_call", "arguments": {}}\n</tool_call>'
    result, _, llm, tts = run([end, "We open at nine."])
    assert result.action is None
    assert [(u.name, u.outcome) for u in result.tools] == [("end_call", "invalid")]
    assert "# Tools" in llm.prompts[0][0].content and "# Tools" not in llm.prompts[1][0].content
    assert llm.prompts[1][-1].content == ASKS  # asked again, not told off
    assert " ".join(tts.texts) == "We open at nine."
    assert farewell("Thank you! I'm here if you need anything else.",
                    "Okay, thanks for your help. Bye.")


@pytest.mark.parametrize(("words", "leave"), [
    ("That's all, thank you. Goodbye!", True), ("Okay, thanks for your help. Bye.", True),
    ("No thanks, that's it.", True), ("Thanks, and when do you close?", False),
    ("Is the library open on Sunday.", False), ("Do you have books about dinosaurs?", False),
])
def test_took_leave(words, leave):
    from agent.turn.intent import took_leave

    assert took_leave(words) is leave


@pytest.mark.unit
@pytest.mark.parametrize("words,asks", [
    ("Can I leave a message for the librarian?", True),
    ("Please tell her I called.", True),
    ("Could you let the manager know I rang?", True),
    ("What time do you open on Saturday?", False),
    ("I lost my library card. How much is a new one?", False),
])
def test_take_message_is_refused_unless_the_caller_asks_to_leave_one(words, asks):
    from agent.turn.intent import asks_for_message
    from agent.turn.tools import Toolbox
    from dialplan.profile import Profile

    assert asks_for_message(words) is asks
    box = Toolbox(Profile(name="p", tools=["take_message"]))
    problem = box.problem(ToolCall("take_message"), words)
    assert (problem == "") is asks


DIRECTORY = {"front-desk": DirectoryEntry("sip:200@x", "memberships and general questions"),
             "children": DirectoryEntry("sip:210@x", "the children's section and story time"),
             "accounts": DirectoryEntry("sip:220@x", "late fees and fines")}


@pytest.mark.parametrize("words, target", [
    ("Can you transfer me to the children's section, please?", "children"),
    ("Could you connect me with someone about my late fees?", "accounts"),
    ("Put me through to the front desk.", "front-desk"),
    ("I'd like to talk to somebody about a fine.", "accounts"),
    ("Can I speak with the children's section?", "children"),
    ("I'd like to talk to a real person, please.", "front-desk"),  # keypad 0: the operator
    # Left to the model: no entry named, a question besides, a negation, talk to *you*.
    ("Transfer me, please.", None),
    ("What time does the children's section close? Can you transfer me?", None),
    ("I don't want to talk to the front desk.", None),
    ("Can I talk to you about story time?", None),
    ("How do I transfer a loan to my daughter's card?", None),
    ("Do you have books for children?", None),
])
def test_a_transfer_request_names_one_entry_or_is_left_to_the_model(words, target):
    from agent.turn.intent import requested_transfer
    assert requested_transfer(words, DIRECTORY, operator="front-desk") == target
    if target == "front-desk" and "desk" not in words:
        assert requested_transfer(words, DIRECTORY) is None  # no operator: the model decides


def test_every_turn_is_asked_with_one_system_prompt_holding_the_tools():
    """A plain question and an action start alike: one prefix, primed once, stays cached."""
    result, _, llm, _ = run(["We open at nine."], words="When do you open on Saturday?")
    assert "# Tools" in llm.prompts[0][0].content and result.reply_text == "We open at nine."
    _, _, other, _ = run(["Sure."], words="Thanks, that's all.")
    assert other.prompts[0][0].content == llm.prompts[0][0].content


def test_a_plain_question_still_acts_when_the_model_calls_a_tool_anyway():
    result, _, llm, tts = run([CALL], words="Do you have books for children?")
    assert result.action == ToolCall("transfer", {"target": "children"}, raw=CALL)


def test_a_message_asked_for_in_words_is_taken_without_the_model():
    result, history, llm, tts = run(["Sure, go ahead."],
                                    words="Can I leave a message for the librarian?")
    assert llm.prompts == [] and result.action.name == "take_message"
    assert result.action.source == "caller" and history[-1].content == result.action.raw


@pytest.mark.unit
@pytest.mark.parametrize("words,leaves", [
    ("Can I leave a message for the librarian?", True), ("Please tell her that I called.", True),
    ("Could you take a message?", True), ("Did you get my message?", False),
    ("I don't want to leave a message.", False), ("What's your phone number?", False),
])
def test_leaves_message(words, leaves):
    from agent.turn.intent import leaves_message
    assert leaves_message(words) is leaves


def test_every_context_is_primed_with_the_one_prefix_of_persona_facts_and_tools():
    class Priming(ScriptedLLM):
        primed: list[tuple[str, bool]] = []

        def prime(self, system_prompt: str, spread: bool = True) -> None:
            self.primed.append((system_prompt, spread))

    llm = Priming([])
    runner = TurnRunner(fake_stages(llm=llm), profile())
    runner.warm_up()
    assert llm.primed == [(runner.system_prompt, True)] and "# Tools" in runner.system_prompt
    runner.prime()  # a call's own priming: the prompt all of its turns start with
    assert llm.primed[-1] == (runner.system_prompt, True)


@pytest.mark.unit
@pytest.mark.parametrize("reply,target", [
    ("I'll transfer you to the staff who can help.", "front-desk"),  # keypad 0's entry
    ("Let me connect you with accounts.", "accounts"),
    ("Transferring you to the children's section now.", "children"),
    ("I can put you through to the front desk.", None),  # an offer, not a promise
    ("I'll put you on hold for a moment.", None),
    ("We open at nine.", None),
])
def test_a_promised_transfer_is_kept(reply, target):
    from agent.turn.intent import promised_transfer
    assert promised_transfer(reply, DIRECTORY, {"0": "transfer:front-desk"}) == target


def test_a_reply_that_promises_a_transfer_without_a_call_makes_it():
    result, history, _, _ = run(["That is for the staff. I'll transfer you to the front desk."],
                                words="Who is the director?", keypad={"0": "transfer:front-desk"})
    assert result.action == ToolCall("transfer", {"target": "front-desk"}, implicit=True)
    assert history[-1].content == result.reply_text  # its words, as said
    # A reply that opens saying it does not know ends there: the profile's dont_know offers
    # the transfer, which the caller's yes makes.
    result, _, _, _ = run(["Sorry, I don't know that. I'll transfer you to the front desk."],
                          words="Who is the director?", keypad={"0": "transfer:front-desk"})
    assert result.action is None and result.reply_text == profile().dont_know
