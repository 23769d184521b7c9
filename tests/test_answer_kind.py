"""A reply's first sentence gives what the question asks for; a fact restated is founded.

Questions and facts here are a ferry line's and a hair salon's, written for these tests: the
checks know no business's words, and no bench question is reused.
"""

from __future__ import annotations

import pytest

from agent.turn.knowledge import Knowledge
from agent.turn.wording import asked_for, misses_the_question
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


def _ask(reply: str, words: str):
    from agent.turn.runner import TurnRunner
    from dialplan import load_config
    from tests.fakes import FakeASR, FakeLLM, FakeTTS, fake_stages
    from tests.replies import answer
    from tests.test_knowledge import ROOT

    profile = load_config(ROOT / "config.toml").profiles["default"]
    llm, history = FakeLLM(reply=reply), []
    result, _ = answer(TurnRunner(fake_stages(asr=FakeASR([words]), llm=llm, tts=FakeTTS()),
                                  profile), history)
    return result, len(llm.prompts), profile.dont_know, history[-1].content


def test_a_sentence_refused_for_the_callers_own_unknown_thing_is_not_asked_again():
    """The facts its words match are about something else: asked again, one of them is said."""
    result, asked, dont_know, _ = _ask("No, we do not lend out telescopes.",
                                    "Do you lend out telescopes for stargazing?")
    assert result.unfounded == "No, we do not lend out telescopes. (lend, out, telescopes)"
    assert asked == 1 and result.reply_text == dont_know
    # A price denied that a fact states is asked again, the facts before the words.
    result, asked, _, _ = _ask("No, there is no fee for that.",
                            "If my DVD comes back a bit late, is there a fee?")
    assert result.unfounded.startswith("No, there is no fee for that. (free") and asked == 2
