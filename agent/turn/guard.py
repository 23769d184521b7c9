"""What a reply's sentence may not say: the checks every sentence passes before it is spoken.

The facts' checks are :class:`~agent.turn.knowledge.Knowledge`'s (a number, or a claim about
something the caller named, that no fact holds); the others need no facts: a template's slot
left unfilled, a reply that turns the caller away, one that talks about the tools instead of
using them, one that reads out the prompt's own instructions. Each is general: none knows a
business's words. :class:`~agent.turn.reply.Reply` checks a whole sentence before any of it
is heard, so what fails is never spliced into a sentence begun; it says ``dont_know`` instead,
or asks the profile's own model what its under-load one refused.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from agent.turn.intent import names_a_tool
from agent.turn.knowledge import Knowledge
from agent.turn.textsplit import ends_sentence
from agent.turn.wording import placeholder, refuses

REFUSES = "refuses"
"""The objection to a reply that turns the caller away."""
ECHO_WORDS = 5
"""A run of this many words of the prompt's instructions in a reply is the prompt read out
("Anything not in these facts, we don't know."); a fact's words are not instructions."""


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower().replace("’", "'"))


def runs(text: str, n: int = ECHO_WORDS) -> set[tuple[str, ...]]:
    """Every run of ``n`` consecutive words within one line or sentence of ``text``.

    Not across them: the end of one fact and the start of the next are no instruction.
    """
    out: set[tuple[str, ...]] = set()
    for part in re.split(r"\n|[.!?;:](?:\s|$)", text):
        w = _words(part)
        out |= {tuple(w[i:i + n]) for i in range(len(w) - n + 1)}
    return out


class Instructions:
    """The prompt's instruction text, as runs of words a reply must not repeat.

    Args:
        prompt: the system prompt (persona, facts, tools).
        allowed: texts a reply may repeat word for word (the facts, the fixed phrases).
    """

    def __init__(self, prompt: str, allowed: list[str] | tuple[str, ...] = ()):
        self._runs = runs(prompt) - set().union(*(runs(t) for t in allowed))

    def echoed(self, sentence: str) -> bool:
        return bool(self._runs and runs(sentence) & self._runs)


def objection(knowledge: Knowledge | None, tools: tuple[str, ...] | list[str], sentence: str,
              heard: str, strict: bool, instructions: Instructions | None = None,
              before: str = "", told: str = "") -> str:
    """Why ``sentence`` must not be said ("" if it may be).

    Args:
        knowledge: the profile's facts (None: only the checks that need none).
        tools: the names of the tools the profile offers.
        sentence: the sentence about to be spoken, whole.
        heard: the caller's words.
        strict: ``llm.strict_numbers``.
        instructions: the prompt's instruction text (None: not checked).
        before: the call's previous exchange (a follow-up's subject).
        told: what the turn's tools answered (known, as the facts are).
    """
    made_up = (knowledge.unfounded(sentence, heard, strict, before, told)
               if knowledge is not None else set())
    if made_up:
        return ", ".join(sorted(made_up))
    if placeholder(sentence):
        return "a placeholder"
    if refuses(sentence):
        return REFUSES
    if tools and names_a_tool(sentence, tools):
        return "names a tool"
    if instructions is not None and instructions.echoed(sentence):
        return "reads out the prompt"
    return ""


_APOLOGY = re.compile(r"\W*(?:i'?m |i am |we'?re |we are )?(?:sorry|afraid|unfortunately)\b",
                      re.IGNORECASE)
"""A clause that opens with an apology: what follows is often a refusal or "I don't know"."""


@dataclass(frozen=True)
class Objection:
    """A sentence that must not be said, and why."""

    sentence: str
    why: str
    after_lead: bool
    """Its first clause was already said (:class:`SentenceGate`'s lead)."""


class SentenceGate:
    """A reply's clauses on their way to speech: each sentence is checked whole first.

    So what fails is never spliced into a sentence begun. One exception, the caller's wait:
    the reply's first clause may go as soon as it passes (``lead``), where what follows can
    hardly fail (see :meth:`~agent.turn.reply.Reply._may_lead`).

    Args:
        check: a sentence -> why it must not be said ("" if it may).
        lead: the first clause -> whether it may go before its sentence is whole.
    """

    def __init__(self, check: Callable[[str], str], lead: Callable[[str], bool]):
        self._check = check
        self._lead_ok = lead
        self._clauses: list[str] = []
        self._led = 0  # clauses of this sentence already said
        self._first = True  # nothing of the reply passed yet

    def push(self, clause: str) -> tuple[list[str], Objection | None]:
        """One clause the splitter cut: the clauses to say now, and an objection if any."""
        self._clauses.append(clause)
        if ends_sentence(clause):
            return self._release(whole=True)
        if self._first and len(self._clauses) == 1 and not _APOLOGY.match(clause) \
                and self._lead_ok(clause):
            return self._release(whole=False)
        return [], None

    def flush(self) -> tuple[list[str], Objection | None]:
        """The reply ended (or a tool call came): the sentence so far is whole."""
        return self._release(whole=True) if self._clauses else ([], None)

    def _release(self, whole: bool) -> tuple[list[str], Objection | None]:
        sentence = " ".join(self._clauses)
        why = self._check(sentence)
        led, clauses = self._led, self._clauses
        if why:
            self._clauses, self._led = [], 0
            return [], Objection(sentence, why, led > 0)
        self._first = False
        if whole:
            self._clauses, self._led = [], 0
        else:
            self._led = len(clauses)
        return clauses[led:], None
