"""The clause splitter speaks a short first clause, then whole sentences."""

import pytest

from agent.turn.textsplit import ClauseSplitter, speakable

pytestmark = pytest.mark.unit


def split(text: str, step: int = 1) -> list[str]:
    s = ClauseSplitter(first_words=4)
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
    # Too few words before the phrase word: wait for more.
    assert split("We open at ten. Thanks!")[0] == "We open at ten."
    assert split("Yes, and we also lend films.") == ["Yes, and we also lend films."]


def test_numbers_and_abbreviations_do_not_split():
    assert split("We opened at 9.30 a.m. today. Dr. Smith runs it.") == [
        "We opened at 9.30 a.m. today.",
        "Dr. Smith runs it.",
    ]


def test_speakable_strips_markdown():
    assert speakable("**Hours:**\n- Mon: 9 am\n- *Sat*: 10 am") == "Hours: Mon: 9 am Sat: 10 am"
