"""What a sentence says, read without any facts: its numbers, a price, "free", "I don't know".

The words :mod:`agent.turn.knowledge` and :mod:`agent.turn.guard` read in a reply (and in the
facts, for their numbers): English wording, no business's.
"""

from __future__ import annotations

import re

_ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
         "fifteen sixteen seventeen eighteen nineteen").split()
_TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()
NUMBER_WORDS = frozenset(_ONES + _TENS + ["hundred", "thousand", "million", "half", "quarter"])
_UNIT = re.compile(r"\bone (dollar|cent|hour|day|week|month|year|minute|pm|am|o'?clock)")


def numbers(text: str) -> set[str]:
    """The numbers ``text`` states, each as its digits (``"ten"`` and ``"10"`` are ``"10"``).

    "one" counts only beside a unit: it is also a pronoun ("a new one").
    """
    t = text.lower().replace(",", "")
    out = set(re.findall(r"\d+", t))
    words = re.findall(r"[a-z]+", t)
    for w in words:
        if w in _ONES and w != "one":
            out.add(str(_ONES.index(w)))
        elif w in _TENS:
            out.add(str(20 + 10 * _TENS.index(w)))
        elif w in NUMBER_WORDS - {"one"} and w not in _ONES:
            out.add(w)
    if _UNIT.search(t):
        out.add("1")
    return out


def known_numbers(texts) -> set[str]:
    """The numbers ``texts`` state, each also as its digits and without leading zeros.

    A number may be read out digit by digit ("five five five, zero one four two").
    """
    known = set().union(*(numbers(t) for t in texts))
    return known | {d for n in known if n.isdigit() for d in n} | {
        str(int(n)) for n in known if n.isdigit()}


FREE = re.compile(r"\bfree\b|\bno (?:extra )?(?:fee|charge|cost)s?\b|\bfree of charge\b|"
                   r"\b(?:don't|do not|doesn't|does not|won't|will not) (?:charge|cost)\b|"
                   r"\bnothing\b", re.I)
"""A reply's words that something costs nothing."""
MONEY = re.compile(r"\$\s?\d|\b\d+(?:\.\d+)? ?(?:dollars?|cents?|euros?|pounds?)\b", re.I)
"""A fact's price."""

UNSURE = re.compile(r"\b(?:don't|do not|doesn't|does not) know\b|\bnot sure\b", re.I)


def unsure(text: str) -> bool:
    """Whether ``text`` says the agent does not know ("I don't know the exact time")."""
    return bool(UNSURE.search(text.replace("’", "'")))


_SLOT = re.compile(r"\[[^\]]*\]|\{[^}]*\}|<[^>]*>|\b[xX]{3,}\b")


def placeholder(text: str) -> bool:
    """Whether ``text`` holds a slot a template leaves to fill ("[insert email address]").

    A small model writes one ("{name}", "555-XXXX") where it has no fact (bench answers), and
    read out it is nonsense to a caller.
    """
    return bool(_SLOT.search(text))


_REFUSES = re.compile(
    r"\b(?:can'?t|cannot|can not|(?:am|are|is) (?:unable|not able) to) (?:assist|help)"
    r"(?: you)?(?=\s*(?:with\b|[.,!]|$))", re.I)
"""Read on the sentence so far, so a first clause that ends there ("We're sorry, but I can't
assist") is not said either."""


def refuses(text: str) -> bool:
    """Whether ``text`` turns the caller away ("I'm sorry, but I can't assist with that.").

    The under-load 0.5B says so to questions its facts answer and to ones they do not (bench
    answers): a dead end, where ``dont_know`` offers the caller someone who knows.
    """
    return bool(_REFUSES.search(text))


PRICE_WORDS = frozenset("charge charges fee fees cost costs price prices pay".split())
"""The words a price is asked in: how a question asks, not what it is about."""
ASKS_AMOUNT = re.compile(r"\bhow (?:much|many|long|late|early|soon|far|old)\b|\bwhat time\b|"
                         rf"\b(?:{'|'.join(sorted(PRICE_WORDS | {'deposit'}))})\b", re.I)
"""A question whose answer is a number or a price: its every sentence is checked whole before
any of it is said (a first clause said early, "The <thing> costs", was followed by a refused
number, and the caller heard it spliced with ``dont_know``: bench answers)."""


def asks_amount(words: str) -> bool:
    """Whether ``words`` ask how much, how many, how long, what time, or what it costs."""
    return bool(ASKS_AMOUNT.search(words))
