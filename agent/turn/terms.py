"""The content words of a text: how a caller's words, a reply's and the facts are compared.

Stemmed, without the words every question is asked in (:data:`STOP`, :data:`GENERIC`) or that
go with any number (:data:`UNITS`): what is left says what a text is about. English words
only, no business's (tests/test_no_persona_words.py).
"""

from __future__ import annotations

import re

from agent.turn.wording import NUMBER_WORDS, PRICE_WORDS

STOP = frozenset("""
a about am an and any are as at be been but by can could did do does doing for from get go
got had has have hello hi how i i'd i'll i'm if in is it it's just know let like may me might
more much my need no not now of on or our please so some tell than thank thanks that the
their them then there these they this to up us want was we what when where which who why
will with would yes you your you're okay ok um uh well hey really until till during since
after before back away out off again still also too even already yet later exactly roughly
something anything everything someone anyone somebody anybody thing things all every each
he him his she her hers its mine yours ours myself yourself
""".split())
"""Words of no subject: how any sentence is put together, and how a caller points at a thing
("bring it back", "something for her") or counts it ("at all", "each")."""

GENERIC = PRICE_WORDS | frozenset("""
usually normally typically generally actually run runs happen happens give gives
charged paying expensive cheap located location situated today tomorrow tonight
""".split())
"""Words of how a question asks ("do you usually run...", "what happens if", "do you charge
for...", "is there a fee", "where are you located", "can you see me today"), not of what it is
about: never an unknown subject (:meth:`Knowledge.unknown_words`). A price is asked in many
words; what it is the price of is the subject."""
UNITS = frozenset("""
dollar dollars cent cents day days week weeks month months year years hour hours minute
minutes am pm time times o'clock daily weekly monthly yearly hourly
""".split())
"""Words that go with any number: no sign of which fact it came from (``Knowledge._unbound``)."""

CONTRACTED = re.compile(r"'(?:s|re|ll|d|ve|m)$")
"""A contraction's ending: "what's" is "what", a stop word."""


def stem(word: str) -> str:
    """A crude English stem: enough for "opens"/"open", "prices"/"price", "children's"."""
    w = word.lower().replace("’", "'").removesuffix("'s").strip("'")
    if re.search(r"(?:[xz]|[cs]h)es$", w):
        w = w[:-2]  # "boxes", "churches" lose "es"; "fines", "fees" (below) only their "s"
    for suffix, keep in (("ies", "y"), ("ing", ""), ("ed", ""), ("s", "")):
        if len(w) > len(suffix) + 2 and w.endswith(suffix) and not w.endswith("ss"):
            w = w[: -len(suffix)] + keep
            break
    return w[:-1] if len(w) > 4 and w.endswith("e") else w


def _content(text: str) -> list[tuple[str, str]]:
    """``(word as written, its stem)`` for each content word of ``text``."""
    words = re.findall(r"[a-z0-9']+", text.lower().replace("’", "'"))
    return [(w, stem(w)) for w in words
            if w not in STOP and CONTRACTED.sub("", w) not in STOP and len(w) > 1]


def terms(text: str) -> list[str]:
    """The content words of ``text``, stemmed."""
    return [s for _, s in _content(text)]


NOT_SUBJECT = frozenset(stem(w) for w in UNITS | GENERIC | NUMBER_WORDS)
"""Stems that say nothing of what a text is about: units, how it asks, numbers."""


def subject_words(text: str) -> list[tuple[str, str]]:
    """``(word as written, its stem)`` for each word of ``text`` that says what it is about.

    No unit, number (in words or digits) or word of how a question asks: "six weeks", "at
    nine", "what time" name no thing. One filter for the subject a text is about and for the
    caller's words no fact knows (:class:`~agent.turn.knowledge.Knowledge`).
    """
    return [(w, s) for w, s in _content(text) if s not in NOT_SUBJECT and not s.isdigit()]
