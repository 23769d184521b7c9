"""The clause splitter speaks a short first clause, then whole sentences."""

import pytest

from agent.textsplit import ClauseSplitter, speakable

pytestmark = pytest.mark.unit


def split(text: str, step: int = 1) -> list[str]:
    s = ClauseSplitter(first_words=4)
    out = []
    for i in range(0, len(text), step):
        out += s.push(text[i : i + step])
    return out + s.flush()


def test_first_clause_then_sentences():
    assert split("On Saturday, we open at ten, and close at four. Anything else? Bye") == [
        "On Saturday, we open at ten,",
        "and close at four.",
        "Anything else?",
        "Bye",
    ]


def test_numbers_and_abbreviations_do_not_split():
    assert split("We open at 9.30 a.m. on weekdays. Dr. Smith runs it.") == [
        "We open at 9.30 a.m. on weekdays.",
        "Dr. Smith runs it.",
    ]


def test_speakable_strips_markdown():
    assert speakable("**Hours:**\n- Mon: 9 am\n- *Sat*: 10 am") == "Hours: Mon: 9 am Sat: 10 am"
