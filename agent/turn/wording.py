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


_OWN_DOUBT = re.compile(r"\b(?:i|we)\s+(?:really\s+)?(?:don't|do not) know\b|"
                        r"\b(?:i'm|i am|we're|we are)\s+(?:really\s+)?not sure\b", re.I)


def own_doubt(text: str) -> bool:
    """Whether ``text`` says the agent itself does not know: "I don't know", "we're not sure".

    Stricter than :func:`unsure`: "If you're not sure of the size, bring it in" is advice.
    """
    return bool(_OWN_DOUBT.search(text.replace("’", "'")))


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


PRICE_WORDS = frozenset("charge charges fee fees cost costs price prices pay rate rates owe"
                        .split())
"""The words a price is asked in: how a question asks, not what it is about."""
ASKS_AMOUNT = re.compile(r"\bhow (?:much|many|long|late|early|soon|far|old)\b|\bwhat time\b|"
                         rf"\b(?:{'|'.join(sorted(PRICE_WORDS | {'deposit'}))})\b", re.I)
"""A question whose answer is a number or a price: its every sentence is checked whole before
any of it is said (a first clause said early, "The <thing> costs", was followed by a refused
number, and the caller heard it spliced with ``dont_know``: bench answers)."""


def asks_amount(words: str) -> bool:
    """Whether ``words`` ask how much, how many, how long, what time, or what it costs."""
    return bool(ASKS_AMOUNT.search(words))


WEEK = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
"""The days of the week, Monday first (:func:`days_named` numbers them so)."""
_DAYS = "|".join(WEEK) + "|weekdays?|weekends?|daily|every day"
_NUMBER = rf"(?:\d+(?:[.:]\d+)?|\b(?:{'|'.join(sorted(NUMBER_WORDS))}|dozen|several|few)\b)"
_HANDS_ON = re.compile(r"\btransfer|\bput you through\b|\bconnect you\b|\b(?:leave|take) a "
                       r"message\b|\bpass (?:it|that|your message) on\b", re.I)
_SPAN = (rf"(?:{_NUMBER}|\ban?|\bthe same)(?: \w+)? (?:minute|hour|day|week|month|year|"
         r"while)s?\b|\bwhile you wait\b|\bsame day\b|\bovernight\b|\btoday\b|"
         r"\btomorrow\b|\bright away\b|\bimmediately\b|\buntil\b|\bas long as\b|"
         r"\bno (?:limit|time)\b")
_CLOCK = (rf"{_NUMBER} ?(?:am|pm|a\.m\.|p\.m\.|o'?clock)\b|\b(?:at|from|until|till|to)"
          rf" {_NUMBER}")
ASKED_FOR = (
    # A clock time answers "how long" too: "How long are you open on Saturday?" "From 10 am
    # to 4 pm." (bench answers' development split).
    ("a duration", re.compile(r"\bhow (?:long|soon)\b|\bhow much time\b", re.I),
     re.compile(f"{_SPAN}|{_CLOCK}", re.I)),
    ("a time", re.compile(r"\bwhat time\b|\bhow (?:late|early)\b|\bwhat(?: are|'re) (?:your|the)"
                          r" (?:opening )?hours\b|\bwhen (?:do|does|are|is) (?:you|it|they|the "
                          r"\w+) (?:open|close|start|end|finish|meet)", re.I),
     re.compile(rf"{_CLOCK}|\b(?:{_DAYS}|noon|midday|midnight|morning|afternoon|evening|"
                r"closed|not open|all day|around the clock)\b|" + _SPAN, re.I)),
    ("a number", re.compile(r"\bhow many\b", re.I),
     re.compile(rf"{_NUMBER}|\b(?:no|none|any|unlimited|as many|one|an?|single)\b", re.I)),
    ("an amount", re.compile(r"\bhow much\b|\bwhat (?:does|do|would|will|did) .{0,40}\bcost\b|"
                             r"\bwhat(?:'s| is| are) the (?:price|cost|fee|charge|rate)s?\b",
                             re.I),
     re.compile(rf"{_NUMBER}|{FREE.pattern}|\b(?:included|includes|price|depends|depending|"
                r"varies)\b", re.I)),
)
"""What a question asks for, by its words ("how long", "what time", "how many", "how much"),
and the words of a sentence that gives one: a number, a day, "free", "closed". The first that
matches is the question's kind."""


def misses_the_question(words: str, sentence: str) -> str:
    """What ``sentence``, a reply's first, fails to give that ``words`` ask for ("" if none).

    "How long is the crossing?" answered "A return ticket costs 18 dollars" gives no duration,
    "How much is a ticket for my dog?" answered "Dogs stay on a lead" no amount: the model
    answered from a fact about something else (bench answers' wrong facts, and its unknowns
    answered with a neighbour's fact). A sentence that says it does not know, or hands the
    caller on, gives what it can; so does one to words that ask for none of these.
    """
    kind = asked_for(words)
    if not kind or declines(sentence):
        return ""
    gives = next(g for k, _, g in ASKED_FOR if k == kind)
    return "" if gives.search(sentence) else f"gives no {kind.split()[-1]}"


def declines(sentence: str) -> bool:
    """Whether ``sentence`` gives no answer, and so no wrong one.

    It says it does not know, or offers a transfer or a message: the checks of what a first
    sentence answers pass it.
    """
    return unsure(sentence) or bool(_HANDS_ON.search(sentence))


def asked_for(words: str) -> str:
    """The kind of answer ``words`` ask for (:data:`ASKED_FOR`: "a time", ...), or ""."""
    return next((kind for kind, asks, _ in ASKED_FOR if asks.search(words)), "")


_WEEKDAY = rf"(?:{'|'.join(WEEK)})s?"
_DAY_SPAN = re.compile(rf"\b(?P<a>{_WEEKDAY})(?:\s*(?:to|through|thru|until|till|-|–)\s*|"
                       rf"\s+and\s+)(?P<b>{_WEEKDAY})\b|\b(?P<one>{_WEEKDAY})\b|"
                       r"\b(?P<weekday>weekdays?|working days?|business days?)\b|"
                       r"\b(?P<weekend>weekends?)\b|\b(?P<all>every day|daily|seven days)\b",
                       re.I)


def days_named(text: str) -> set[int]:
    """The days of the week ``text`` names (0 = Monday), ranges and "weekdays" spelled out."""
    out: set[int] = set()
    for m in _DAY_SPAN.finditer(text):
        if m["a"]:
            a, b = (WEEK.index(m[g].lower().rstrip("s")) for g in ("a", "b"))
            joined = re.search(r"\band\b", m.group(), re.I)
            out |= {a, b} if joined else set(range(a, b + 1) if a <= b else
                                             [*range(a, 7), *range(b + 1)])
        elif m["one"]:
            out.add(WEEK.index(m["one"].lower().rstrip("s")))
        elif m["weekday"]:
            out |= set(range(5))
        elif m["weekend"]:
            out |= {5, 6}
        elif m["all"]:
            out |= set(range(7))
    return out


def another_day(words: str, sentence: str, before: str = "") -> str:
    """Whether ``sentence`` answers of other days than the ones ``words`` ask about ("" if not).

    "What time do you close on Sunday?" answered "We are closed every Monday.": the model read
    the neighbouring fact (bench answers' development split). A follow-up that asks a time and
    names no day ("And until when are you there?") asks about the day of ``before``, the
    caller's last words. A sentence that names no day, says it does not know or hands the
    caller on is of no other day.
    """
    asked = days_named(words)
    if not asked and before and asked_for(words) in ("a time", "a duration"):
        asked = days_named(before)
    if not asked or declines(sentence):
        return ""
    said = days_named(sentence)
    return "of another day" if said and not said & asked else ""
