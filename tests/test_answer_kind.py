"""A reply's first sentence gives what the question asks for; a fact restated is founded.

Questions and facts here are a ferry line's and a hair salon's, written for these tests: the
checks know no business's words, and no bench question is reused.
"""

from __future__ import annotations

import pytest

from agent.turn.guard import Instructions
from agent.turn.knowledge import Knowledge
from agent.turn.wording import another_day, asked_for, days_named, misses_the_question
from dialplan.knowledge import Fact

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("words", "sentence", "why"), [
    # An answer of another kind: a neighbour's fact.
    ("How long is the crossing to the island?", "A return ticket costs 18 dollars.",
     "gives no duration"),
    ("What time does the last boat leave?", "Bikes travel free on every boat.", "gives no time"),
    ("How much is a ticket for my dog?", "Dogs must stay on a lead on deck.", "gives no amount"),
    ("How many cars fit on the ferry?", "The ferry carries cars and vans.", "gives no number"),
    # The kind asked for, in any of its forms.
    ("How long is the crossing to the island?", "The crossing takes about forty minutes.", ""),
    ("How long is the crossing to the island?", "It takes an hour in winter.", ""),
    ("What time does the last boat leave?", "The last boat leaves at 9:30 pm.", ""),
    ("What time does the first boat leave on Sunday?", "There is no boat on Sunday: we are "
     "closed.", ""),
    ("When does the ticket office open?", "It opens at seven every weekday.", ""),
    ("How early should I be at the pier?", "Please come 20 minutes before it leaves.", ""),
    ("How much is a ticket for my dog?", "Dogs travel free.", ""),
    ("How much is a ticket for my dog?", "A dog's ticket is 3 dollars.", ""),
    ("How much does a haircut cost?", "A wash is included in the price of a haircut.", ""),
    ("How many cars fit on the ferry?", "The ferry carries up to 40 cars.", ""),
    # A clock time answers "how long" too: how long a place stays open is when it closes.
    ("How long is the ticket office open on Sunday?", "On Sunday it is open from 8 am to noon.",
     ""),
    ("How long is the ticket office open on Sunday?", "It stays open until 2.", ""),
    # Not knowing, or handing on, is no wrong kind; nor is any answer to other questions.
    ("How long is the crossing to the island?", "I don't know that, sorry.", ""),
    ("How much is a ticket for my dog?", "I can transfer you to the ticket office.", ""),
    ("Do you take dogs on the ferry?", "Yes, dogs travel free.", ""),
    ("Can I pay by card?", "You can pay by card or cash.", ""),
])
def test_a_first_sentence_that_gives_no_answer_of_the_kind_asked_is_named(words, sentence, why):
    assert misses_the_question(words, sentence) == why


def test_only_questions_of_a_kind_have_one():
    assert asked_for("what time do you close tonight") == "a time"
    assert asked_for("What are your opening hours?") == "a time"
    assert asked_for("how soon can you fit me in") == "a duration"
    assert asked_for("what does a colour cost") == "an amount"
    assert asked_for("Is there parking?") == asked_for("Where are you?") == ""


SALON = (Fact("A women's cut costs 45 dollars and a men's cut 25 dollars.", "Prices"),
         Fact("Cuts for children under 10 are free on Mondays.", "Prices"),
         Fact("A colour costs from 70 dollars.", "Prices"))


def test_a_sentence_of_one_fact_s_words_is_founded_even_strictly():
    k = Knowledge(SALON, "You answer the phone for a hair salon.")
    before = "How much is a men's cut? A men's cut costs 25 dollars."
    # A follow-up in other words ("kids"): the fact itself, restated, is said.
    assert k.restates("Cuts for children under 10 are free on Mondays.")
    assert k.unfounded("Cuts for children under 10 are free on Mondays.", "And for kids?",
                       strict=True, before=before) == set()
    # "Free" of what a fact prices, or a fact's number lent to another thing, is not.
    assert not k.restates("A colour is free.")
    assert k.unfounded("A colour is free.", "How much is a colour?", strict=True) == {"free"}
    assert not k.restates("A perm costs 45 dollars.")


def test_a_reply_that_answers_another_question_is_asked_again_then_not_said():
    """The first sentence gives no duration: asked again with the facts, then ``dont_know``."""
    result, asked, dont_know, said = _ask("Printing costs 10 cents a page in black and white.",
                                          "How long may I hold on to a borrowed audiobook?")
    assert result.unfounded.endswith("(gives no duration)"), result.unfounded
    assert asked == 2 and result.reply_text == dont_know == said


def _ask(reply: str, words: str, before: tuple[str, str] | None = None):
    from agent.turn.runner import TurnRunner
    from dialplan import load_config
    from tests.fakes import FakeASR, FakeLLM, FakeTTS, fake_stages
    from tests.replies import answer
    from tests.test_knowledge import ROOT

    profile = load_config(ROOT / "config.toml").profiles["default"]
    from models.llm.base import Message

    llm, history = FakeLLM(reply=reply), []
    if before:  # the call's last exchange: the caller's words and the reply
        history = [Message("user", before[0]), Message("assistant", before[1])]
    result, _ = answer(TurnRunner(fake_stages(asr=FakeASR([words]), llm=llm, tts=FakeTTS()),
                                  profile), history)
    return result, len(llm.prompts), profile.dont_know, history[-1].content


def test_a_sentence_refused_for_the_callers_own_unknown_thing_is_not_asked_again():
    """The facts its words match are about something else: asked again, one of them is said."""
    result, asked, dont_know, _ = _ask("No, we do not lend out telescopes.",
                                    "Do you lend out telescopes for stargazing?")
    assert result.unfounded == "No, we do not lend out telescopes. (lend, telescopes)"
    assert asked == 1 and result.reply_text == dont_know
    # A price denied that a fact states is asked again, the facts before the words.
    result, asked, _, _ = _ask("No, there is no fee for that.",
                            "If my DVD comes back a bit late, is there a fee?")
    assert result.unfounded.startswith("No, there is no fee for that. (free") and asked == 2


FERRY = (Fact("A return ticket costs 18 dollars, and children under 5 travel free.", "Tickets"),
         Fact("Dogs travel free but must stay on a lead on deck.", "Pets"),
         Fact("Bikes travel free on every boat; there is a rack on the car deck.", "Bikes"))


def test_a_yes_or_no_about_what_the_caller_named_and_no_fact_holds_is_unfounded():
    """"You can take your horse", "the ferry does not carry horses": whichever way, made up."""
    k = Knowledge(FERRY, "You answer the phone for a ferry line.")
    assert k.unfounded("Yes, you can take your horse on board.",
                       "Can I take my horse on the boat?") == {"horse"}
    assert k.unfounded("No, the ferry does not carry horses.", "Does the ferry carry horses?"
                       ) == {"horses"}
    assert k.unfounded("You need to bring a helmet for your bike.",
                       "Do I need to bring a helmet?") == {"helmet"}
    # The caller's own verb is no claimed thing; a fact's thing is known.
    assert k.unfounded("Yes, you can take your dog, on a lead.",
                       "Can I take my dog on the boat?") == set()
    assert k.unfounded("Yes, you need to leave your bike in the rack on the car deck.",
                       "Do I need to leave my bike somewhere?") == set()


def test_how_a_caller_points_at_a_thing_is_no_unknown_subject():
    """"Bring it back", "for her", "is there something": no thing no fact knows."""
    k = Knowledge(FERRY, "You answer the phone for a ferry line.")
    assert k.unknown_words("Is there something for her? Can she bring it back out again?"
                           ) == {"bring"}
    assert k.unknown_words("I have to take the boat back with my horse.") == {"take", "horse"}


def test_numbers_units_and_how_many_are_no_unknown_subject():
    """"At nine", "six weeks", "what time", "at all": asked of a thing, never the thing."""
    k = Knowledge(FERRY, "You answer the phone for a ferry line.")
    assert k.unknown_words("What time is the boat at nine in the morning?") == {"morning"}
    assert k.unknown_words("I'll be away for six weeks. Can you keep my bike?") == {"keep"}
    assert k.unknown_words("Is tomorrow's boat free at all?") == set()
    assert k.unknown_words("Do you take each horse for three hours?") == {"take", "horse"}


def test_five_words_of_the_instructions_in_a_row_are_the_prompt_read_out():
    prompt = ("You answer the phone for a ferry line. Never guess a time: offer to transfer "
              "the caller to the staff who know.")
    rules = Instructions(prompt, [f.text for f in FERRY])
    assert rules.echoed("I can transfer you to the staff who know.")
    assert not rules.echoed("I can put you through to someone who knows.")
    assert not rules.echoed("Dogs travel free but must stay on a lead.")  # a fact's words


@pytest.mark.parametrize(("words", "sentence", "before", "why"), [
    ("What time does the first boat sail on Sundays?", "We are closed every Monday.", "",
     "of another day"),
    ("And how late does it run?", "On weekdays the last boat leaves at 9 pm.",
     "Is there a boat on Saturday evening?", "of another day"),
    # The day asked, a range or "weekends" that holds it, or no day at all: no other day.
    ("What time does the first boat sail on Sundays?", "On Sunday the first boat is at 8.", "",
     ""),
    ("Is the ticket office open on Thursday?", "It is open Monday to Friday, 7 to 7.", "", ""),
    ("Do boats run on Saturday?", "Yes, every weekend, twice a day.", "", ""),
    ("And how late does it run?", "The last boat leaves at 9 pm.",
     "Is there a boat on Saturday evening?", ""),
    # A follow-up that asks no time is about its own subject, not the last turn's day.
    ("And how much is a ticket?", "A return costs 18 dollars on weekdays.",
     "Is there a boat on Saturday?", ""),
    ("What time does the first boat sail on Sundays?", "I don't know the Sunday times.", "", ""),
])
def test_a_first_sentence_about_another_day_than_the_one_asked_is_named(words, sentence, before,
                                                                        why):
    assert another_day(words, sentence, before) == why


def test_days_named_spell_out_ranges_and_weekdays():
    assert days_named("From Tuesday to Friday") == {1, 2, 3, 4}
    assert days_named("every Wednesday and Saturday") == {2, 5}
    assert days_named("Friday through Monday") == {4, 5, 6, 0}
    assert days_named("on weekdays, and Sundays") == {0, 1, 2, 3, 4, 6}
    assert days_named("open every day") == set(range(7)) and days_named("at 9 am") == set()


def test_a_reply_about_another_day_is_asked_again_then_not_said():
    result, asked, dont_know, said = _ask("We open at 9 am on Monday.",
                                          "Sunday mornings, when do your doors open?")
    assert result.unfounded.endswith("(of another day)"), result.unfounded
    assert asked == 2 and result.reply_text == dont_know == said


def test_a_follow_up_that_names_no_subject_is_looked_up_with_the_last_words():
    k = Knowledge(FERRY, "You answer the phone for a ferry line.")
    assert k.relevant("What's the price for that?", before="Can I bring my dog along?")[0] == \
        FERRY[1]
    # A question of its own keeps its own facts first.
    assert k.relevant("Is there a rack for bikes?", before="Can I bring my dog along?")[0] == \
        FERRY[2]


TIMETABLE = (Fact("From Monday to Friday the first boat leaves at 6 am and the last at 10 pm.",
                  "Timetable"),
             Fact("On Saturday and Sunday boats run from 8 am to 8 pm.", "Timetable"),
             Fact("A return ticket costs 18 dollars.", "Tickets"),
             Fact("The ticket office's number is 555 0199.", "Phone"))


def test_a_time_said_of_a_day_whose_fact_does_not_hold_it_is_unfounded():
    """Saturday's hours lent to a Tuesday: the numbers are the facts', the day is not theirs."""
    k = Knowledge(TIMETABLE, "You answer the phone for a ferry line.")
    asked = "Is there a boat at seven on Tuesday morning?"
    assert k.unfounded("Yes, boats run from 8 am to 8 pm on Tuesday.", asked) == {"8"}
    assert k.unfounded("On Tuesday the first boat leaves at 6 am.", asked) == set()
    # The caller's own number, a fact of no day, or a range that holds the day: founded.
    assert k.unfounded("No, on Tuesday 7 am is too late: the first leaves at 6.", asked) == set()
    assert k.unfounded("A return ticket on Tuesday costs 18 dollars.", asked) == set()
    assert k.unfounded("From Monday to Friday the last boat is at 10 pm.", asked) == set()


def test_a_follow_up_answered_about_another_thing_is_asked_again():
    """"What's the price for that?" after teeth whitening, answered a white filling's price."""
    k = Knowledge(SALON, "You answer the phone for a hair salon.")
    before = "Do you do colours? Yes, we do colours."
    assert k.strays("Cuts for children under 10 are free on Mondays.", "What's the price?",
                    before)
    assert not k.strays("A colour costs from 70 dollars.", "What's the price?", before)
    assert not k.strays("It costs from 70 dollars.", "What's the price?", before)
    # A question with a thing of its own is answered about it, whatever came before.
    assert not k.strays("A men's cut costs 25 dollars.", "And a men's cut?", before)
    result, asked, dont_know, said = _ask(
        "Printing costs 10 cents a page in black and white.", "And what does that cost?",
        ("Can I get a new card if I lose mine?", "Yes, we replace lost cards."))
    assert result.unfounded.endswith("(of another thing)"), result.unfounded
    assert asked == 2 and result.reply_text == dont_know == said
