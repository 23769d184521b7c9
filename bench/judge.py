"""How ``bench answers`` judges a reply: the bench's own rules, sharing no code with the agent's.

The agent checks its replies before they are spoken (:mod:`agent.turn.knowledge`,
:mod:`agent.turn.guard`); were the bench to judge with the same code, a mistake there would
pass its own exam. So nothing here imports :mod:`agent.turn` or :mod:`models`; numbers are
read by :func:`bench.scoring.stated_numbers`.

A turn (:class:`bench.conversations.Turn`) is judged on the reply's words and the action
the call would take (``none``, ``transfer:<entry>``, ``end_call``, ``take_message``):

- *fact*: right when its ``answer`` pattern is found in the normalised reply, no number is
  invented and no action is taken but a transfer (the fact said and a transfer offered, which
  a promise in words may carry out, is still the fact said).
- *unknown*: right when the reply says it does not know or hands the caller on (a transfer
  or a message, taken or offered in words), and invents no number.
- *action*: right when the call takes that action (with that transfer target).

Any turn is wrong whose reply claims an action the call did not take (:func:`invented_action`).
Two faults are counted beside right and wrong, over the whole bench: a *spliced fallback*
(:func:`spliced`, a fixed phrase glued after other words of the reply) and *prompt text leaked*
(:class:`Leaks`, the reply reading out the prompt's instructions).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from bench.conversations import ACTION, FACT, UNKNOWN, Turn
from bench.scoring import invented_numbers, normalize
from bench.tools_report import CLAIM

NONE = "none"

ADMITS = re.compile(
    r"dont know|do not know|not sure|no information|dont have (that|this|any|the)|"
    r"do not have (that|this|any|the)|not able to|unable to|cant (tell|say|help|find|give)|"
    r"cannot (tell|say|help|find|give)|not provided|not available|no details|"
    r"(dont|do not) have enough information|not specified|"
    r"(cant|cannot|can not|unable to) (provide|determine|confirm|share)|"
    r"transfer|connect you|put you through|front desk|reception|"
    r"(check|ask) with|staff|(leave|take) a message|pass (it|that|your message) on")
"""On the normalised reply: it says it does not know, or hands the caller on in words."""

_CLAIM_KIND = (
    (re.compile(r"message|pass|taken|noted", re.I), "take_message"),
    (re.compile(r"hang|hung|end", re.I), "end_call"),
    (re.compile(r"transfer|connect|put you through", re.I), "transfer"),
)
"""Which action a claim (:data:`bench.tools_report.CLAIM`) says was taken; a claim to
have booked or recorded something is of no action the agent has."""


def claimed_action(claim: str) -> str:
    """The tool a claim's words say was used ("" for one no tool does: "I've booked it")."""
    return next((tool for pattern, tool in _CLAIM_KIND if pattern.search(claim)), "")


_OFFER = re.compile(r"\b(?:can|could|may|might|shall|should|would|want me to|like me to|"
                    r"happy to|able to|if)\b[\w' ]{0,16}$", re.I)
"""Words before a claim that make it an offer: "I can put you through to someone who does"
(the default ``dont_know``), "Would you like me to put you through?"."""


def invented_action(reply: str, action: str) -> str:
    """The words of ``reply`` that claim an action the call did not take ("" when none do).

    ``action``: what the call does (``none``, ``transfer:<entry>``, ...). "Transferring you
    now" with a transfer is the announcement; with no action, a caller left waiting. An offer
    is no claim (:data:`_OFFER`; :data:`~bench.tools_report.CLAIM` alone reads "I can
    put you through" as one).
    """
    taken = action.split(":", 1)[0]
    said = " ".join(reply.replace("\u2019", "'").split())
    for m in CLAIM.finditer(said):
        if claimed_action(m.group(0)) != taken and not _OFFER.search(said[:m.start()]):
            return m.group(0)
    return ""


@dataclass(frozen=True)
class Verdict:
    """What the judge found in one reply."""

    right: bool
    invented: tuple[str, ...] = ()
    """Numbers stated that the persona, its facts and the caller did not give."""
    claim: str = ""
    """Words claiming an action the call did not take."""


def judge(turn: Turn, reply: str, action: str, known) -> Verdict:
    """Whether ``reply`` (and the call's ``action``) answers ``turn`` rightly.

    ``known``: the numbers the reply may state (:func:`bench.scoring.known_numbers` of
    the persona, greeting, facts and the caller's words).
    """
    said = normalize(reply)
    made_up = tuple(sorted(invented_numbers(reply, known)))
    claim = invented_action(reply, action)
    if turn.kind == FACT:
        # A transfer beside the fact is still an answer: the caller heard it, and was offered
        # (or put through to) someone who knows more. Hanging up or taking a message is not.
        ok = bool(re.search(turn.answer, said)) and action.split(":")[0] in (NONE, "transfer")
    elif turn.kind == UNKNOWN:
        ok = action.split(":")[0] in ("transfer", "take_message") or bool(ADMITS.search(said))
    elif turn.kind == ACTION:
        ok = action == turn.action
    else:
        raise ValueError(f"unknown kind {turn.kind!r}")
    return Verdict(ok and not made_up and not claim, made_up, claim)


def _first_sentence(phrase: str) -> list[str]:
    """A fixed phrase's words that mark it: its first sentence, or all of it if that is short."""
    first = normalize(re.split(r"(?<=[.!?])\s", phrase.strip(), maxsplit=1)[0]).split()
    return first if len(first) >= 3 else normalize(phrase).split()


def spliced(reply: str, phrases: Iterable[str]) -> str:
    """The fixed phrase (``dont_know``, ``apology``, ``repeat``) said after other words, or "".

    "Yes, Sorry, I don't know that." is one: the agent replaced the rest of a reply it had
    begun ("Yes,") by the phrase, and the caller heard both. "Sorry, I don't know that." alone
    is the phrase said as meant.
    """
    words = normalize(reply).split()
    for phrase in phrases:
        mark = _first_sentence(phrase)
        if not mark:
            continue
        n = len(mark)
        if any(words[i:i + n] == mark for i in range(1, len(words) - n + 1)):
            return phrase
    return ""


LEAK_WORDS = 5
"""A run this long of the prompt's instruction words in a reply is read out, not said: shorter
runs are common English ("if you would like to")."""


def _grams(text: str, n: int = LEAK_WORDS) -> set[tuple[str, ...]]:
    """Every run of ``n`` normalised words within one line or sentence of ``text``.

    Not across them: the end of one fact and the start of the next ("close at 1 pm." / "On
    Saturday") are no instruction a reply could read out.
    """
    out: set[tuple[str, ...]] = set()
    for part in re.split(r"\n|[.!?;:](?:\s|$)", text):
        w = normalize(part).split()
        out |= {tuple(w[i:i + n]) for i in range(len(w) - n + 1)}
    return out


class Leaks:
    """Finds the prompt's instruction text read out in a reply.

    Args:
        allowed: what a reply may say word for word: the facts, the greeting, the persona's
            fixed phrases, the directory's descriptions (whom a transfer reaches: telling the
            caller is no leak).
    """

    def __init__(self, allowed: Iterable[str]):
        self._allowed: set[tuple[str, ...]] = set().union(*(_grams(t) for t in allowed))

    def leaked(self, reply: str, instructions: Iterable[str], caller: Iterable[str] = ()) -> str:
        """The longest run of ``reply``'s words read out of ``instructions`` ("" when none).

        A run of :data:`LEAK_WORDS` or more normalised words that the instructions hold and no
        allowed text nor the caller's words do.

        ``instructions``: the prompt's texts with the caller's words taken out (the system
        prompt, what the turn's words carry after them).
        """
        grams = set().union(*(_grams(t) for t in instructions)) - self._allowed
        grams -= set().union(set(), *(_grams(t) for t in caller))
        words = normalize(reply).split()
        covered = [False] * len(words)
        for i in range(len(words) - LEAK_WORDS + 1):
            if tuple(words[i:i + LEAK_WORDS]) in grams:
                covered[i:i + LEAK_WORDS] = [True] * LEAK_WORDS
        runs = " ".join(w if c else "|" for w, c in zip(words, covered, strict=True)).split("|")
        return max((r.strip() for r in runs), key=len, default="")
