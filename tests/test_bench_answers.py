"""``bench answers``: its question files, its judge, its plan and tables, a call on small models.

The model run checks what the bench measures and prints and that a call's turns share one
history, not accuracy: SmolLM2-135M is not expected to answer well.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agent.turn.runner import TurnRunner
from bench.answers import personas_for
from bench.answers_report import report, wilson
from bench.answers_run import GROUPS, ModelRun, Persona, Turn, measure, plan
from bench.conversations import (
    ACTION,
    FACT,
    FRESH,
    HELDOUT,
    TUNED,
    UNKNOWN,
    ConversationsError,
    load,
)
from bench.conversations import Turn as Spec
from bench.judge import Leaks, invented_action, judge, spliced
from bench.scoring import invented_numbers, known_numbers, stated_numbers
from dialplan import parse_config

ROOT = Path(__file__).resolve().parent.parent
LIBRARY = str(ROOT / "dialplan" / "personas" / "library.md")
FIXTURES = Path(__file__).resolve().parent / "bench_answers"
DIRECTORY = {
    "front-desk": {"uri": "sip:200@127.0.0.1", "description": "library cards, general questions"},
    "accounts": {"uri": "sip:220@127.0.0.1", "description": "late fees, fines and payments"},
}


def library_config(**llm) -> dict:
    return {"profiles": {"default": {
        "knowledge": LIBRARY, "tools": ["end_call", "transfer", "take_message"],
        "directory": DIRECTORY,
        # The small models, and hibari's voice: the smallest that load.
        **({"llm": llm, "asr": {"model": "tiny.en"}, "tts": {"backend": "hibari", "lead": ""},
            "audio": {"end_of_turn": "off"}} if llm else {})}}}


def rows(table: str) -> list[list[str]]:
    """A markdown table's body rows, cell by cell."""
    lines = table.strip().splitlines()[2:]
    return [[c.strip() for c in line.strip("|").split(" | ")] for line in lines]


# ---- question files -----------------------------------------------------------------------

@pytest.mark.unit
def test_a_question_file_is_read_into_calls_of_turns():
    c = load(FIXTURES / "library.calls.toml")
    assert (c.persona, c.split, c.profile) == ("library", TUNED, "default")
    assert [call.name for call in c.calls] == ["saturday", "front-desk"]
    first, follow = c.calls[0].turns
    assert (first.kind, first.answer, first.follow_up) == (FACT, r"\bten\b", False)
    assert (follow.say, follow.follow_up, follow.expected) == (
        "And when do you close that day?", True, r"\bfour\b")
    assert c.calls[1].turns[0].expected == "transfer:front-desk"
    assert c.transfer_targets() == {"front-desk": "calls[1].turns[0].action"}
    assert load(FIXTURES / "library.heldout.toml").split == HELDOUT


TURN = '[[calls]]\nname = "a"\n[[calls.turns]]\nsay = "Hello?"\n'


@pytest.mark.unit
@pytest.mark.parametrize(("text", "key", "why"), [
    (TURN + 'kind = "fact"\nanswer = "x"\n', "profile", "missing"),
    ('profile = "default"\n', "calls", "missing"),
    ('profile = "default"\n' + TURN + 'kind = "fact"\n', "calls[0].turns[0].answer", "missing"),
    ('profile = "default"\n' + TURN + 'kind = "fact"\nanswer = "(ten"\n',
     "calls[0].turns[0].answer", "not a regular expression"),
    ('profile = "default"\n' + TURN + 'kind = "guess"\n', "calls[0].turns[0].kind", "'guess'"),
    ('profile = "default"\n' + TURN + 'kind = "action"\naction = "call_back"\n',
     "calls[0].turns[0].action", "'call_back'"),
    ('profile = "default"\n' + TURN + 'kind = "unknown"\nanswer = "x"\n',
     "calls[0].turns[0].answer", "only a fact turn"),
    ('profile = "default"\n' + TURN + 'kind = "unknown"\nfollow_up = true\n',
     "calls[0].turns[0].follow_up", "first turn"),
    ('profile = "default"\n' + TURN + 'kind = "unknown"\nsays = "x"\n',
     "calls[0].turns[0].says", "unknown key"),
    ('profile = "default"\n' + TURN + 'kind = "unknown"\n' + TURN + 'kind = "unknown"\n',
     "calls[1].name", "another call's name"),
    ('profile = "default"\n[[calls]]\nname = "a"\n', "calls[0].turns", "missing"),
])
def test_a_bad_question_file_is_refused_naming_the_file_and_the_key(tmp_path, text, key, why):
    path = tmp_path / "dental.calls.toml"
    path.write_text(text)
    with pytest.raises(ConversationsError) as e:
        load(path)
    assert str(e.value).startswith(f"{path}: {key}: ") and why in str(e.value), str(e.value)


@pytest.mark.unit
def test_not_toml_and_a_bad_name_are_refused_by_path(tmp_path):
    (tmp_path / "bikes.calls.toml").write_text("profile = \n")
    with pytest.raises(ConversationsError, match=r"bikes\.calls\.toml: not valid TOML"):
        load(tmp_path / "bikes.calls.toml")
    with pytest.raises(ConversationsError, match=r"bikes\.toml: not a question file's name"):
        load(tmp_path / "bikes.toml")


@pytest.mark.unit
def test_personas_are_found_by_folder_and_checked_against_their_profile(tmp_path):
    config = parse_config(library_config())
    [p] = personas_for(config, ["library"], [TUNED, HELDOUT], [FIXTURES])
    assert [x.name for x in p.profiles] == ["default"]
    assert {s: len(c.calls) for s, c in p.splits.items()} == {TUNED: 2, HELDOUT: 1}
    with pytest.raises(ConversationsError, match="persona dental: no tuned question file"):
        personas_for(config, ["dental"], [TUNED], [FIXTURES])
    bare = parse_config({"profiles": {"default": {
        "knowledge": LIBRARY, "tools": ["transfer"],
        "directory": {"accounts": DIRECTORY["accounts"]}}}})
    with pytest.raises(ConversationsError, match=r"calls\[1\]\.turns\[0\]\.action: front-desk is "
                                                 r"not in profile default's directory"):
        personas_for(bare, ["library"], [TUNED], [FIXTURES])
    (tmp_path / "library.calls.toml").write_text(
        (FIXTURES / "library.calls.toml").read_text().replace('"default"', '"nope"'))
    with pytest.raises(ConversationsError, match=r"library\.calls\.toml: profile: unknown 'nope'"):
        personas_for(config, ["library"], [TUNED], [tmp_path])


@pytest.mark.unit
def test_the_shipped_personas_have_three_splits_their_profiles_can_serve():
    from dialplan import load_config

    config = load_config(ROOT / "config.toml")
    personas = personas_for(config, ["library", "dental", "bikes"], [TUNED, HELDOUT, FRESH])
    for p in personas:
        counts = {s: len(c.calls) for s, c in p.splits.items()}
        assert all(n >= 14 for n in counts.values()), (p.name, counts)
        fresh = [t for c in p.splits[FRESH].calls for t in c.turns]
        assert {t.kind for t in fresh} == {FACT, UNKNOWN, ACTION}
        assert sum(t.follow_up for t in fresh) >= 4, p.name
        # No question of the fresh split repeats one of the others word for word.
        seen = {t.say for s in (TUNED, HELDOUT) for c in p.splits[s].calls for t in c.turns}
        assert not seen & {t.say for t in fresh}, p.name


# ---- the judge ----------------------------------------------------------------------------

KNOWN = known_numbers(["The library opens at 10 am on Saturday and closes at 4 pm.",
                       "The library's main phone number is 555 0142."])
SAT = Spec("What time do you open on Saturday?", FACT, r"\bten\b")
AUDITORIUM = Spec("How much does it cost to rent the auditorium?", UNKNOWN)
DESK = Spec("Can I speak to someone at the front desk?", ACTION, action="transfer:front-desk")
BYE = Spec("That's all, goodbye.", ACTION, action="end_call")


@pytest.mark.unit
def test_numbers_are_read_as_digits_words_and_phone_numbers_digit_by_digit():
    assert stated_numbers("Ten cents, or 50 cents; forty-two, 1,250") == [
        ("50", ""), ("1250", ""), ("10", ""), ("42", "")]
    assert stated_numbers("a new one") == [] and stated_numbers("one dollar a day") == [("1", "")]
    assert stated_numbers("two hundred and ten") == [("210", "")]
    assert stated_numbers("five five five, zero one four two") == [("5550142", "5550142")]
    assert invented_numbers("Call us on five five five, zero one four two.", KNOWN) == set()
    assert invented_numbers("Our number is 555-0142.", KNOWN) == set()
    assert invented_numbers("Call five five five, one two three four.", KNOWN) == {"5551234"}
    assert invented_numbers("It costs 75 dollars, or twenty five.", KNOWN) == {"75", "25"}


@pytest.mark.unit
def test_a_fact_is_right_with_its_answer_no_invented_number_and_no_action_but_a_transfer():
    assert judge(SAT, "We open at 10 am on Saturday.", "none", KNOWN).right
    assert judge(SAT, "We open at ten. I can transfer you to the front desk if you like.",
                 "transfer:front-desk", KNOWN).right
    assert not judge(SAT, "We open at 11 am on Saturday.", "none", KNOWN).right
    wrong = judge(SAT, "We open at 10 am, and close at 7 pm.", "none", KNOWN)
    assert not wrong.right and wrong.invented == ("7",)
    assert not judge(SAT, "We open at ten. Goodbye!", "end_call", KNOWN).right
    claimed = judge(SAT, "We open at ten. I'm transferring you to the front desk.", "none", KNOWN)
    assert not claimed.right and claimed.claim == "transferring you"


@pytest.mark.unit
def test_an_unknown_is_right_when_the_reply_says_so_or_hands_on_inventing_nothing():
    assert judge(AUDITORIUM, "Sorry, I don't know that.", "none", KNOWN).right
    assert judge(AUDITORIUM, "I can put you through to the front desk.", "none", KNOWN).right
    assert judge(AUDITORIUM, "Transferring you to the front desk now.", "transfer:front-desk",
                 KNOWN).right
    assert judge(AUDITORIUM, "Please leave your message now, and I will pass it on.",
                 "take_message", KNOWN).right
    assert not judge(AUDITORIUM, "It costs 75 dollars.", "none", KNOWN).right
    assert not judge(AUDITORIUM, "I don't know, maybe 75 dollars.", "none", KNOWN).right
    assert not judge(AUDITORIUM, "The auditorium is available.", "none", KNOWN).right
    assert not judge(AUDITORIUM, "I'll transfer you now.", "none", KNOWN).right


@pytest.mark.unit
def test_an_action_is_right_when_the_call_takes_it_with_its_target():
    assert judge(DESK, "Transferring you to the front desk now.", "transfer:front-desk",
                 KNOWN).right
    assert not judge(DESK, "Transferring you to accounts now.", "transfer:accounts", KNOWN).right
    assert not judge(DESK, "The front desk is open until six.", "none", KNOWN).right
    assert judge(BYE, "Goodbye!", "end_call", KNOWN).right
    assert not judge(BYE, "Goodbye!", "take_message", KNOWN).right


@pytest.mark.unit
def test_an_invented_action_is_a_claim_of_an_action_the_call_did_not_take():
    assert invented_action("I'll transfer you to accounts now.", "none") == "I'll transfer"
    assert invented_action("Transferring you to accounts now.", "transfer:accounts") == ""
    assert invented_action("I have passed your message on.", "transfer:accounts") == (
        "I have passed")
    assert invented_action("I can transfer you if you like.", "none") == ""  # an offer
    assert invented_action(DONT_KNOW, "none") == ""  # "I can put you through": an offer too
    assert invented_action("If you like, I'll put you through.", "none") == "I'll put you through"
    assert invented_action("Okay, hanging up now.", "end_call") == ""


DONT_KNOW = "Sorry, I don't know that. I can put you through to someone who does."
PHRASES = (DONT_KNOW, "Sorry, I'm having trouble answering right now. Please try again.",
           "Sorry, I didn't catch that. Could you say it again?")


@pytest.mark.unit
def test_a_fallback_phrase_after_other_words_of_the_reply_is_spliced():
    assert spliced("Yes, Sorry, I don't know that.", PHRASES) == DONT_KNOW
    assert spliced("The library is located Sorry, I don't know that.", PHRASES) == DONT_KNOW
    assert spliced("Sorry, I don't know that.", PHRASES) == ""
    assert spliced(DONT_KNOW, PHRASES) == ""
    assert spliced("Well, sorry, I didn't catch that.", PHRASES) == PHRASES[2]
    assert spliced("We are sorry you could not come.", PHRASES) == ""


@pytest.mark.unit
def test_prompt_text_read_out_is_leaked_unless_a_fact_or_phrase_holds_it():
    prompt = ("You are the phone assistant of a public library. Never make up phone numbers, "
              "prices, times or amounts.")
    notes = ("Facts you know:\nThe library opens at 10 am.\n"
             "Anything not in these facts, you don't know.")
    leaks = Leaks(["The library opens at 10 am.", DONT_KNOW])
    assert leaks.leaked("Anything not in these facts you don't know.", [prompt, notes]) == (
        "anything not in these facts you dont know")
    assert leaks.leaked("I am the phone assistant of a public library.", [prompt]) == (
        "the phone assistant of a public library")
    assert leaks.leaked("The library opens at 10 am.", [prompt, notes]) == ""  # a fact
    assert leaks.leaked("We never make up prices.", [prompt]) == ""  # four words in a row
    assert leaks.leaked("Do you open at ten am on Saturday?", [notes],
                        caller=["do you open at ten am"]) == ""
    # The end of one fact and the start of the next are no instruction.
    facts = "- On Friday we close at 1 pm.\n- On Saturday we open at 9 am."
    leaks = Leaks(["On Friday we close at 1 pm.", "On Saturday we open at 9 am."])
    assert leaks.leaked("We close at 1 pm on Friday.", [facts]) == ""


# ---- plan and tables ----------------------------------------------------------------------

@pytest.mark.unit
def test_each_call_is_made_once_per_group_by_one_voice_for_all_its_turns():
    calls = load(FIXTURES / "library.calls.toml").calls * 3
    planned = plan(calls, ["espeak-ng", "typed"])
    assert len(planned) == 12
    assert [v for _, v, _ in planned[:5]] == [*GROUPS["espeak-ng"], GROUPS["espeak-ng"][0]]
    assert {v for _, v, g in planned if g == "typed"} == {"text:typed"}


def turn(kind: str, right: bool, answer_s: float, split: str = TUNED, index: int = 0,
         follow: bool = False, group: str = "hibari", **faults) -> Turn:
    voice = "text:typed" if group == "typed" else "hibari:heart"
    values = {"invented": [], "claim": "", "spliced": "", "leaked": "", "objected": ""} | faults
    return Turn(persona="library", split=split, call="c", index=index, say=f"say {split} {kind}",
                kind=kind, expected="x", follow_up=follow, voice=voice, group=group,
                heard=f"heard {split} {kind}", wer=0.0, words=3, reply=f"reply {split} {kind}",
                action="none",
                repeat=False, right=right, asr_s=0.0, first_audio_s=answer_s, **values)


@pytest.mark.unit
def test_the_tables_count_per_persona_split_and_rung_and_hide_held_out_texts():
    tuned = [turn(FACT, True, 1.0), turn(FACT, False, 2.0, index=1, follow=True),
             turn(UNKNOWN, True, 3.0, invented=["75"]), turn(ACTION, True, 4.0, claim="x"),
             turn(FACT, True, 0.1, group="typed")]
    held = [turn(FACT, False, 1.0, HELDOUT, spliced="Sorry"),
            turn(UNKNOWN, True, 1.0, HELDOUT, leaked="a b c d e")]
    runs = [ModelRun("library", TUNED, "default model", "default", "big", "base", tuned),
            ModelRun("library", HELDOUT, "default model", "default", "big", "base", held)]
    config = parse_config(library_config())
    persona = Persona("library", [config.profiles["default"]],
                      {TUNED: load(FIXTURES / "library.calls.toml"),
                       HELDOUT: load(FIXTURES / "library.heldout.toml")})
    text = report(runs, [persona], ["hibari", "typed"])
    assert re.match(r"## bench answers: \d{4}-\d\d-\d\d, .+, \d+ cores?\n", text)
    table = rows(text.split("\n\n")[3])
    assert table[0][:3] == ["library", "tuned", "default model: big"]
    # facts 2/3 (one typed), unknowns 1/1, actions 1/1, follow-ups 0/1, first turns 4/4;
    # invented numbers 1, invented actions 1; answer time over the spoken turns only.
    assert [c.split(" (")[0] for c in table[0][3:8]] == ["2/3", "1/1", "1/1", "0/1", "4/4"]
    assert table[0][8:] == ["1", "1", "0", "0", "2.50 s", "3.70 s"]
    assert table[1][1] == "held-out" and table[1][10:12] == ["1", "1"]
    assert [r[:2] for r in table[2:]] == [["**all 1**", "tuned"], ["**all 1**", "held-out"]]
    assert "|\n\n|" not in text  # no blank line between rows: markdown tables
    assert "heard tuned fact" in text and "reply tuned fact" in text  # the wrong turn, listed
    assert not re.search(r"(say|heard|reply) heldout", text)
    assert "1 of 2 turns wrong, 1 right with a fault (texts hidden" in text
    shown = report(runs, [persona], ["hibari"], show_heldout=True)
    assert "**Wrong: library, held-out, default model** (1)" in shown
    assert "heard heldout fact" in shown and "reply heldout unknown" in shown  # leaked, listed
    lo, hi = wilson(1, 3)
    assert (round(100 * lo), round(100 * hi)) == (6, 79)


# ---- a call on the small models -----------------------------------------------------------

@pytest.mark.model
def test_a_calls_second_turn_is_asked_with_the_first_in_its_prompt(stage_cache, monkeypatch):
    config = parse_config(library_config(model="smollm2-135m", max_tokens=16))
    [persona] = personas_for(config, ["library"], [TUNED, HELDOUT], [FIXTURES])
    llm = stage_cache.stages(persona.profiles[0]).llm
    asked: list[list] = []
    real = llm.stream
    monkeypatch.setattr(llm, "stream", lambda messages: asked.append(messages) or real(messages))
    # The warm-up times nothing here (the ASR's alone took minutes on two shared cores).
    monkeypatch.setattr(TurnRunner, "warm_up", lambda self: None)
    lines: list[str] = []
    runs = measure(persona, ["typed"], stage_cache, None, lines.append)
    assert [(r.split, len(r.turns)) for r in runs] == [(TUNED, 3), (HELDOUT, 1)]
    first, second, desk = runs[0].turns
    assert (second.index, second.follow_up, second.heard) == (
        1, True, "And when do you close that day?")
    # The follow-up's prompt holds the first turn: its words and the reply the caller heard.
    prompt = next(p for p in asked if any(
        m.role == "user" and m.content.startswith(second.say) for m in p))
    said = [(m.role, m.content) for m in prompt[1:]]
    assert said[0][0] == "user" and said[0][1].startswith(first.say)
    assert ("assistant", first.reply) in said
    assert desk.right == (desk.action == "transfer:front-desk" and not desk.claim)
    for t in [*runs[0].turns, *runs[1].turns]:
        assert t.reply.strip() or t.repeat, t
        assert t.asr_s == 0.0 and t.wer == 0.0
    held = [line for line in lines if " heldout " in line]
    assert held and not any("auditorium" in line.lower() for line in held)
    assert not any("auditorium" in line.lower() for line in lines if "said" in line)
