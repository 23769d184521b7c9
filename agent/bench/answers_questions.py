"""What ``bench answers`` asks, and how a reply is judged right, for the library persona.

Fact questions have their answer in the persona or its knowledge file
(``dialplan/personas/library.md``); a reply is right when it states the fact (a pattern on
the reply's normalised words: lower case, numbers spelled out, :func:`agent.bench.scoring.normalize`).
Unknown questions have their answer in neither: a reply is right when it says it does not know
or hands the caller on (a transfer, a message), and states no number, price or time it was not
given. A number in any reply that the persona, its facts and the question do not hold counts as
invented (read digit by digit, as a phone number may be, it is not).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent.bench.scoring import normalize
from agent.turn.knowledge import numbers

FACT = "fact"
UNKNOWN = "unknown"


@dataclass(frozen=True)
class Question:
    """One spoken question and what a right reply says."""

    text: str
    kind: str = FACT
    answer: str = ""
    """Fact questions: a regular expression on the normalised reply."""


def _f(text: str, answer: str) -> Question:
    return Question(text, FACT, answer)


def _u(text: str) -> Question:
    return Question(text, UNKNOWN)


QUESTIONS: tuple[Question, ...] = (
    _f("What time do you open on Saturday?", r"\bten\b"),
    _f("How late are you open on weekdays?", r"\bsix\b"),
    _f("Is the library open on Sunday?", r"closed|not open|arent open|re not open"),
    _f("Are you open on Christmas Day?", r"closed|not open|arent open|re not open"),
    _f("How much does it cost to print a page in color?", r"fifty cent|zero fifty"),
    _f("How much is black and white printing?", r"ten cent|zero ten"),
    _f("What's the late fee for a DVD?", r"\b(one|a) dollar"),
    _f("How long can I keep a book?", r"three weeks"),
    _f("How many times can I renew a book?", r"\bthree\b"),
    _f("What do I need to get a library card?", r"photo|\bid\b|proof of address"),
    _f("I lost my library card. How much is a new one?", r"two dollar"),
    _f("What's the address of the library?", r"elm"),
    _f("Is there parking at the library?", r"free|behind|\byes\b"),
    _f("When is story time for the kids?", r"wednesday|saturday|ten thirty"),
    _f("For how long can I book a study room?", r"two hours"),
    _f("When does the book club meet?", r"first tuesday|\bseven\b"),
    _f("What's the library's phone number?", r"555.*142|\b142\b"),
    _f("Do you have books in French?", r"\byes\b|we have|library has"),
    _f("Do I need a password for the wifi?", r"\bno\b|free|doesnt|does not|dont|not need"),
    _f("How many books can I borrow at once?", r"twenty"),
    _f("How long do you keep a book I reserved?", r"seven days|a week|one week"),
    _f("What happens if I lose a book?", r"replace|five dollar"),
    _u("How much does it cost to rent the auditorium?"),
    _u("What is the phone number of the city museum?"),
    _u("Do you have a 3D printer, and how much does it cost to use?"),
    _u("What's the head librarian's email address?"),
    _u("How much are passport photos at the library?"),
    _u("When is the next chess tournament?"),
    _u("What time does the bookmobile stop on Oak Street?"),
    _u("How many books does the library own?"),
    _u("How much does it cost to laminate a poster?"),
    _u("Can I rent the meeting hall for a wedding, and what's the price?"),
    _u("What time does the coffee shop next door open?"),
    _u("How much is the fee for an interlibrary loan?"),
)

PARAPHRASES: tuple[Question, ...] = (
    _f("Until what time are you open on a Tuesday?", r"\bsix\b"),
    _f("Are you open Sundays?", r"closed|not open|arent open|re not open"),
    _f("Is the library closed on Thanksgiving?", r"\byes\b|is closed|are closed"),
    _f("Where are you located?", r"elm"),
    _f("Can I park my car there?", r"free|behind|\byes\b|parking lot"),
    _f("How do I sign up for a library card?", r"photo|\bid\b|proof of address"),
    _f("My card got stolen, what does a replacement cost?", r"two dollar"),
    _f("What's the maximum number of items I can check out?", r"twenty"),
    _f("How long is the loan period for DVDs?", r"one week|a week"),
    _f("How much is the fine for an overdue book?", r"twenty five cent"),
    _f("Is there a maximum late fee?", r"ten dollar"),
    _f("Can I use the computers for free?", r"\byes\b|free"),
    _f("Do you have activities for toddlers?", r"story|wednesday|saturday"),
    _f("Can I donate some old books?", r"\byes\b|saturday|donation"),
    _f("What number can I call you on?", r"555.*142|\b142\b"),
    _f("What time do you close on Saturday?", r"\bfour\b"),
    _u("Do you sell coffee?"),
    _u("How much does a locker cost per month?"),
    _u("What is the name of the library director?"),
    _u("When does the summer reading challenge start?"),
    _u("How much are the tickets for the author talk next week?"),
    _u("What's the fax number?"),
)
"""``--paraphrases``: the facts asked in other words than the facts and :data:`QUESTIONS` use,
and other questions nobody answers. Held out: written to check that what helped on
:data:`QUESTIONS` (prompt wording, retrieval) was not fitted to its wording."""

QUICK = (0, 1, 4, 6, 11, 16, 21, 22, 23, 26, 29, 33)
"""``--quick``: seven fact questions and five unknown ones."""

ADMITS = re.compile(
    r"dont know|do not know|not sure|no information|dont have (that|this|any|the)|"
    r"do not have (that|this|any|the)|not able to|unable to|cant (tell|say|help|find|give)|"
    r"cannot (tell|say|help|find|give)|not provided|not available|no details|"
    r"(dont|do not) have enough information|not specified|"
    r"(cant|cannot|can not|unable to) (provide|determine|confirm|share)|"
    r"transfer|connect you|put you through|front desk|"
    r"(check|ask) with|staff|leave a message")
"""A reply that says it does not know, or hands the caller on."""

def invented(reply: str, known: set[str]) -> set[str]:
    """Numbers the reply states that are not in ``known`` (the persona's, its facts', the
    question's: :func:`agent.turn.knowledge.numbers`)."""
    return numbers(reply) - known


def right(q: Question, reply: str, action: str, known: set[str]) -> bool:
    """Whether ``reply`` (with the call action it took, or "none") answers ``q`` rightly."""
    said = normalize(reply)
    if q.kind == FACT:
        return bool(re.search(q.answer, said)) and not invented(reply, known)
    handed_on = action in ("transfer", "take_message")
    return (handed_on or bool(ADMITS.search(said))) and not invented(reply, known)
