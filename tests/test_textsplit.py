"""The clause splitter speaks a short first clause, then whole sentences."""

import pytest

from agent.turn.textsplit import ClauseSplitter, speakable

pytestmark = pytest.mark.unit


def split(text: str, step: int = 1, hurry=None, openers: bool = False) -> list[str]:
    s = ClauseSplitter(first_words=4, hurry=hurry, openers=openers)
    out = []
    for i in range(0, len(text), step):
        out += s.push(text[i : i + step])
    return out + s.flush()


def test_first_clause_then_sentences():
    assert split("Sure thing, we open late, and close at four. Anything else? Bye") == [
        "Sure thing, we open late,",
        "and close at four.",
        "Anything else?",
        "Bye",
    ]
    assert split("On Saturday, we open at ten, and close at four.") == [
        "On Saturday, we open",
        "at ten, and close at four.",
    ]


def test_first_chunk_ends_before_a_phrase_when_no_comma_comes():
    assert split("The library opens at 10 am on Saturday. Bye now.") == [
        "The library opens",
        "at 10 am on Saturday.",
        "Bye now.",
    ]
    assert split("To cancel your booking through the website, log in.")[0] == \
        "To cancel your booking"
    assert split("The library is located near the station.")[0] == "The library is located"
    # Too few words before the phrase word: wait for more.
    assert split("We open at ten. Thanks!")[0] == "We open at ten."


@pytest.mark.parametrize("step", [1, 3, 5])  # streamed, as tokens come
def test_first_chunk_ends_before_a_number(step):
    # Digits decode one token each: "472918" is six more steps before anything is heard.
    assert split("Your library card number is 472918. Anything else?", step)[0] == \
        "Your library card number is"
    assert split("The late fee is $1 a day.", step)[0] == "The late fee is"
    # Not inside a phrase ("at 9.30"), nor after a word it belongs to, nor too soon.
    assert split("Your study room is room 3 today.", step) == ["Your study room is room 3 today."]
    assert split("The book you named the 8 is due.", step)[0] == "The book you named the 8 is due."
    assert split("We opened at 9.30 a.m. today.", step) == ["We opened at 9.30 a.m. today."]
    assert split("It costs 5 dollars.", step) == ["It costs 5 dollars."]
    # A long number is read out after its noun ("card number"), never after "the" or "at".
    assert split("You can use your library card number 472918 to check out books.", step) == \
        ["You can use your library card number", "472918 to check out books."]
    assert split("Please call extension 4021 for help.", step)[0] == "Please call extension"
    assert split("Please ask for room 12 today.", step) == ["Please ask for room 12 today."]
    assert split("We have the 2024 edition here.", step) == ["We have the 2024 edition here."]
    assert split("Your booking starts at 10.30 today.", step)[0] == "Your booking starts"


@pytest.mark.parametrize("step", [1, 3, 5])
def test_first_chunk_ends_before_a_relative_clause_a_quote_or_a_long_run_of_words(step):
    # Replies of bench call that ran on for 9-14 words before their first chunk could end.
    assert split("The fine for a book that you did not return is $1.", step)[0] == \
        "The fine for a book"
    assert split('I have a book titled "The Great Gatsby" by Fitzgerald.', step)[0] == \
        "I have a book titled"
    # Five words with nothing to cut at: cut before the next article or possessive...
    assert split("Dr. Lin will be giving a local history talk next week.", step) == \
        ["Dr. Lin will be giving", "a local history talk next week."]
    # ...not sooner, not after a word the phrase belongs to, and not inside a quote.
    assert split("Your friend can join the club.", step) == ["Your friend can join the club."]
    assert split("You can return books as the Westgate branch said.", step)[0] == \
        "You can return books as the Westgate branch said."
    assert split('Just use the "Print" option.', step) == ['Just use the "Print" option.']


def test_a_phrase_word_that_came_as_a_token_of_its_own_ends_the_chunk_before_it_at_once():
    # Streamed as a model's tokens: " at" is a whole word (" attend" would be one token).
    s = ClauseSplitter(first_words=4)
    tokens = ["The", " library", " opens", " at", " ", "10", " am", "."]
    heard = [(token, s.push(token)) for token in tokens]
    assert heard[3] == (" at", ["The library opens"])  # not one decode step later, at " 10"
    assert [c for _, chunk in heard for c in chunk] + s.flush() == \
        ["The library opens", "at 10 am."]
    # "that" may end the sentence: its cut waits for the next token, as before.
    s = ClauseSplitter(first_words=4)
    out = [c for t in ["Sorry", ",", " I", " didn", "'t", " catch", " that", "."]
           for c in s.push(t)]
    assert out + s.flush() == ["Sorry, I didn't catch that."]
    # A word whose last token came without a space before it waits, as before: "o" + "n".
    s = ClauseSplitter(first_words=4)
    heard = [s.push(t) for t in ["The", " library", " is", " open", " o", "n", " Sunday"]]
    assert heard[-2:] == [[], ["The library is open"]]
    # A mark that came alone after a word ends the chunk at once too ("Yes" ","), not
    # after a digit ("9" "." may be "9.30") nor after one letter ("a" "." may be "a.m.").
    s = ClauseSplitter(first_words=4, openers=True)
    assert [s.push(t) for t in ["Yes", ","]] == [[], ["Yes,"]]
    s = ClauseSplitter(first_words=4)
    heard = [s.push(t) for t in ["We", " open", " at", " 9", ".", "30", " a", ".m", ".", " Bye"]]
    assert not any(heard) and s.flush() == ["We open at 9.30 a.m. Bye"]
    # Only the first chunk: a hurried later one waits for the next token, as before.
    s = ClauseSplitter(first_words=4, hurry=lambda: True)
    heard = [s.push(t) for t in ["The", " library", " opens", " at", " nine", ".", " You",
                                 " can", " renew", " books", " online", " at", " the"]]
    assert heard[3] == ["The library opens"] and heard[5] == [] and heard[6] == ["at nine."]
    assert heard[11] == [] and heard[12] == ["You can renew books online"]
    # Not while another call is up (eager false): the token after shows the cut, as before.
    s = ClauseSplitter(first_words=4, eager=lambda: False)
    heard = [s.push(t) for t in ["The", " library", " opens", " at", " 10"]]
    assert heard[3] == [] and heard[4] == ["The library opens"]
    # Nor after a determiner too soon; at once after five words.
    s = ClauseSplitter(first_words=4)
    heard = [s.push(t) for t in ["Dr", ".", " Lin", " will", " be", " giving", " a"]]
    assert heard[-1] == ["Dr. Lin will be giving"] and not any(heard[:-1])


def test_an_opening_word_is_the_first_chunk_when_asked():
    def opened(text: str, step: int = 1) -> list[str]:
        return split(text, step, openers=True)

    assert opened("Yes, and we also lend films.") == ["Yes,", "and we also lend films."]
    assert opened("I'm sorry, we close at six. Bye.") == ["I'm sorry,", "we close at six.", "Bye."]
    assert opened("Sure. The library opens at nine.") == ["Sure.", "The library opens at nine."]
    # Only the first chunk, only an opener: a later "No," waits for its sentence.
    assert opened("The cafe is open. No, not on Sunday.") == ["The cafe is open.",
                                                              "No, not on Sunday."]
    assert opened("Nobody, sadly, is here today.") == ["Nobody, sadly, is here today."]
    # Streamed a token at a time, "Yes" is not cut before its comma shows.
    assert opened("Yes, the library is open on Easter Monday.", step=3)[0] == "Yes,"
    # Off, the default (tts.first_chunk_opener = false): the first clause as before.
    assert split("Yes, and we also lend films.") == ["Yes, and we also lend films."]


def test_a_reply_about_to_fall_silent_is_cut_into_phrases():
    reply = ("The library opens at nine. You can renew your books online at the library "
             "website or by phone at any time.")
    # Playout has audio queued: after the first chunk, whole sentences.
    assert split(reply, hurry=lambda: False) == [
        "The library opens",
        "at nine.",
        "You can renew your books online at the library website or by phone at any time.",
    ]
    # Its audio is running out: each chunk ends before the next phrase.
    assert split(reply, hurry=lambda: True) == [
        "The library opens",
        "at nine.",
        "You can renew your books online",
        "at the library website",
        "or by phone",
        "at any time.",
    ]
    # Only while it hurries: a reply that catches up speaks sentences again.
    state = {"short": True}

    def hurry():
        return state["short"]

    s = ClauseSplitter(first_words=4, hurry=hurry)

    def push(text: str) -> list[str]:  # word by word, as tokens stream
        return [c for word in text.split(" ") for c in s.push(word + " ")]

    out = push("Sure, we open at ten. You can renew your books online at the website.")
    state["short"] = False
    out += push("On Sundays we are closed all day, and on holidays too. Bye.") + s.flush()
    assert out == ["Sure, we open", "at ten.", "You can renew your books online",
                   "at the website.",
                   "On Sundays we are closed all day, and on holidays too.", "Bye."]


def test_numbers_and_abbreviations_do_not_split():
    assert split("We opened at 9.30 a.m. today. Dr. Smith runs it.") == [
        "We opened at 9.30 a.m. today.",
        "Dr. Smith runs it.",
    ]


def test_speakable_strips_markdown():
    assert speakable("**Hours:**\n- Mon: 9 am\n- *Sat*: 10 am") == "Hours: Mon: 9 am Sat: 10 am"
