"""A profile's facts in its prompt, and what a reply may not state without one.

A knowledge file that fits (:func:`agent.turn.runner.fits_in_prefix`) goes whole into the
system prompt (:meth:`Knowledge.block`): every fact is in view of every turn, so a question in
other words, or a follow-up ("and on Saturday?"), finds its fact without retrieval, and the
prompt is one prefix primed once. A larger file is searched per turn (:meth:`Knowledge.notes`):
BM25 over each fact's words (topic included, light stemming) plus the cosine of WordLlama
sentence vectors (:mod:`models.embed.wordllama`) for the question put in other words; a fact
may list how callers ask for it (a TOML fact's ``question``), and those words are matched too.

A reply's every sentence is checked before any of it is spoken
(:func:`agent.turn.guard.objection`): one that states a number (a price, a time, a phone
number) that neither the persona, its facts nor the caller gave is not said
(:meth:`Knowledge.unfounded`), nor a fact's time said of a day its fact is not about; nor is
one that claims the business has, offers or gives free something the caller named and no fact
mentions (``_CLAIM``). Both read only the facts' and
the caller's words: no business's words are written here.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from functools import lru_cache

import numpy as np

from agent.turn.terms import STOP, subject_words, terms
from agent.turn.wording import (
    FREE,
    MONEY,
    UNSURE,
    WEEK,
    days_named,
    known_numbers,
    numbers,
)
from dialplan.knowledge import Fact
from models.embed.wordllama import embedder

TOP = 3
"""Facts per turn: enough for a question that spans two, few enough to keep the prompt short."""
FLOOR = 0.3
"""Below this cosine, with no word in common either, no fact is about the question ("Hello?",
"thank you, goodbye", "Do you sell coffee?"): the turn gets :data:`NO_NOTES` rather than
three unrelated facts."""

FACTS = ("What you know, one fact a line:\n{facts}\n"
         "That is all you know. Answer from these facts only; for anything they do not say, "
         "say you don't know and offer to transfer the caller.")
"""The system prompt's facts: one a line, with their topic (bench answers)."""
NOTES = "Facts you know:\n{facts}\nAnything not in these facts, you don't know."
"""The few facts a turn's words carry when the file is too large for the prompt."""
NO_NOTES = ("You know no facts about this. If it asks for one, say you don't know and offer to "
            "transfer the caller; never guess a number, price, time or date.")

_CLAIM = re.compile(
    r"\bwe\s+(?:do not |don't |does not |doesn't |do |also |only |can |can't |cannot |will |"
    r"won't |usually |always |never )?(?P<what>[a-z][^.!?;:]*)"
    r"|\bthere (?:is|are)\b(?P<there>[^.!?;:]*)"
    r"|\byou (?:can(?:not|'t)?|may(?: not)?|(?:do not|don't) need to|need to|have to|must)"
    r" [a-z]+ (?P<booked>[^.!?;:]*)"
    r"|\b(?:it|they|the \w+(?: \w+)?) (?:does|do|did|can|will)(?: not|n't) [a-z]+ "
    r"(?P<denied>[^.!?;:]*)"
    r"|(?P<free>[^.!?;:,]*)\b(?:is|are) free\b", re.I)
"""What a reply claims the business does (or does not), has, lets a caller do, or gives for
nothing: "We don't have a 3D printer", "we deliver to your home", "there is no café", "you
can't bring a dog", "the museum does not lend passes", "gift wrapping is free". The verb is
any word: "we deliver" claims as much as "we offer". After "you can", "you need to" or "it does
not", the verb is the caller's own ("Do I need to leave a deposit?"): what it is done to is
the claim."""

_NAME = re.compile(r"(?<=[a-z,;] )[A-Z][A-Za-z'’-]+|\S+@\S+\.[a-z]{2,}|\bwww\.\S+|"
                   r"\b[a-z0-9-]+\.(?:com|org|net|edu|gov)\b")
"""A name inside a sentence (a capitalised word not opening it), an e-mail or web address."""
CALENDAR = frozenset([*WEEK, *(f"{d}s" for d in WEEK), *"""january february march april may
june july august september october november december i i'm i'll i'd i've ok okay mr mrs ms
dr""".split()])
"""Capitalised words any reply may hold: days, months, "I"."""
NEAR = 0.65
"""A caller's word whose WordLlama vector is this close to a word of the facts is that word in
another form ("lose" for "lost", "weekdays" for "week"): the facts know it. A longer word
that only begins with a fact's, or one that merely shares its letters, stays below it
(tests/test_knowledge_vectors.py)."""


LOOK = "Facts:\n{facts}\n\nQuestion: {words}"
"""A turn asked again, the facts its words match before them
(:meth:`~agent.turn.reply_checks.Checked._look_again`). The facts first, the question last:
with the facts after the words, or in brackets, the 1.5B answered fewer of them, or wrote a
tool call instead (bench answers' misses, asked again)."""

class Knowledge:
    """BM25 and, given ``embed``, sentence vectors over one profile's facts.

    Args:
        facts: the profile's facts.
        persona: the text whose numbers a reply may state too (system prompt, greeting).
        embed: texts -> unit vectors (:meth:`models.embed.wordllama.Embedder.embed`); None:
            BM25 alone.
    """

    def __init__(self, facts: tuple[Fact, ...], persona: str = "",
                 embed: Callable[[list[str]], np.ndarray] | None = None, k1: float = 1.2,
                 b: float = 0.75):
        self.facts = facts
        self._known = known_numbers([persona, *(f.shown for f in facts)])
        self._persona_numbers = known_numbers([persona])
        self._fact_numbers = [known_numbers([f.shown]) for f in facts]
        self._fact_days = [(days_named(f.shown), numbers(f.shown)) for f in facts]
        """Each fact's days and the numbers it states (as written: no phone number's digits)."""
        subjects = [self._subject(f.shown) for f in facts]
        # A word every fact has (the file's title: the business's name) tells none apart.
        common = set.intersection(*subjects) if len(facts) > 1 else set()
        self._fact_terms = [t - common for t in subjects]
        self._fact_subjects = [self._subject(f"{f.topic} {f.text}") for f in facts]
        """Each fact's subject words, its topic's and title's included (:meth:`restates`)."""
        self._own = set().union(*self._fact_terms)
        """Every fact's own subject words (not the title's)."""
        self._named_only = (common | self._subject(persona)) - self._own
        """Words only the persona or the title hold: the business's name, its kind."""
        self._docs = [Counter(terms(f"{f.topic} {f.text}")) for f in facts]
        self._vocabulary = set(terms(persona)).union(*self._docs)
        self._said = set(re.findall(r"[a-z0-9']+", " ".join(
            [persona, *(f"{f.topic} {f.shown}" for f in facts)]).lower().replace("’", "'")))
        """Every word the persona and the facts say, as written (for names)."""
        self._near: dict[str, bool] = {}
        self._word_vectors: tuple[list[str], np.ndarray] | None = None
        self._len = [sum(d.values()) for d in self._docs]
        self._avg = sum(self._len) / len(self._len) if self._len else 0.0
        df = Counter(t for d in self._docs for t in d)
        n = len(facts)
        self._idf = {t: math.log(1 + (n - c + 0.5) / (c + 0.5)) for t, c in df.items()}
        self._k1, self._b = k1, b
        self._embed = embed
        self._vectors = (embed([f"{f.topic}: {f.text}" for f in facts])
                         if embed is not None and facts else None)

    def _bm25(self, words: str) -> np.ndarray:
        query = set(terms(words))
        out = np.zeros(len(self.facts))
        for i, doc in enumerate(self._docs):
            norm = self._k1 * (1 - self._b + self._b * self._len[i] / (self._avg or 1))
            out[i] = sum(self._idf.get(t, 0.0) * doc[t] * (self._k1 + 1) / (doc[t] + norm)
                         for t in query if t in doc)
        return out

    def relevant(self, words: str, top: int = TOP, before: str = "") -> list[Fact]:
        """The facts that best match ``words``, best first; none when none is about them.

        ``before``: the caller's last words. A follow-up that names no subject of its own
        ("What's the price for that?", "And until when?") is about theirs.
        """
        if not self.facts or not words.strip():
            return []
        if before and not self._subject(words):
            words = f"{before} {words}"
        bm = self._bm25(words)
        if self._vectors is None:
            score, found = bm, bm > 0
        else:
            cos = self._vectors @ self._embed([words])[0]
            # BM25 is unbounded: scaled to its best fact, so the words' best match and the
            # vectors' count alike.
            score = 0.5 * bm / (bm.max() or 1.0) + 0.5 * cos
            about = bm.max() > 0 or cos.max() >= FLOOR
            found = np.full(len(self.facts), about)
        order = sorted((i for i in range(len(self.facts)) if found[i]),
                       key=lambda i: (-score[i], i))
        return [self.facts[i] for i in order[:top]]

    def block(self) -> str:
        """Every fact, one a line under its topic: the system prompt's part (:data:`FACTS`).

        The file's title, a heading every fact shares (the business's name), is left out: the
        persona names the business.
        """
        heads = [f.topic.split(" > ") if f.topic and not f.question else [] for f in self.facts]
        title = bool(heads) and all(len(h) > 1 and h[0] == heads[0][0] for h in heads)
        lines, last = [], None
        for f, h in zip(self.facts, heads, strict=True):
            topic = " > ".join(h[1:] if title else h)
            if topic != last and topic:
                lines.append(f"{topic}:")
            last = topic
            lines.append(f"- {f.text}")
        return FACTS.format(facts="\n".join(lines))

    def notes(self, words: str) -> str:
        """The text that follows the caller's words in the prompt."""
        found = self.relevant(words)
        if not found:
            return NO_NOTES
        return NOTES.format(facts="\n".join(f.text for f in found))

    def unfounded(self, clause: str, given: str, strict: bool = False,
                  before: str = "", told: str = "") -> set[str]:
        """What ``clause`` states that no fact or the persona holds: numbers and claimed things.

        ``given``: the caller's words. A number neither they nor a fact hold is made up; so is a
        claim (:data:`_CLAIM`) about a word of theirs that no fact mentions: the model knows
        nothing about it, whether it says yes or no. ``strict``: so is a number, even one a
        fact holds, stated beside such a word (the under-load 0.5B lends a fact's phone number
        to a place the caller named: bench answers), and so is one no fact about what was asked
        holds (:meth:`_unbound`; ``before``: the call's previous turn, for a follow-up). A
        number is returned as its digits, a word as said. ``told``: what a tool answered this
        turn, known as a fact is.
        """
        stated = numbers(clause) - numbers(given) - known_numbers([told])
        said = set(terms(given)) - set(terms(told))
        out = (stated - self._known) | self._claimed(clause, said) | self._named(
            clause, f"{given} {told}")
        if self.restates(clause):
            return out
        out |= self._of_other_days(clause, stated & self._known)
        if not strict:
            return out
        asked = self._subject(f"{given} {before}")
        if FREE.search(clause) and self._priced(asked):
            out.add("free")
        if stated:
            # The caller's own words for what one fact says ("extend" a loan it "renews") are
            # no other thing: a sentence drawn on one fact says its number of that fact.
            unknown = self._unknown_words(clause, said)
            if not self._draws_on(clause, len(unknown)):
                out |= unknown
            out |= self._unbound(clause, stated & self._known, asked)
        return out

    def _draws_on(self, clause: str, other: int) -> bool:
        """Whether ``clause`` is one fact's, told with ``other`` words of the caller's own.

        Every number it states is that fact's, and more of its subject words are the fact's
        than the caller's others, and at least two: "The phone number of the city museum"
        is as much of the museum as of the phone number.
        """
        own, stated = self._subject(clause), numbers(clause)
        return any(len(own & t) >= max(2, other + 1) and stated <= ns
                   for t, ns in zip(self._fact_terms, self._fact_numbers, strict=True))

    def restates(self, clause: str) -> bool:
        """Whether ``clause`` says what one fact says: its words, its numbers, "free" if it is.

        The strict checks guess what a fact's number or a "free" is said of from the words
        around it; a sentence made of one fact's own words needs no guess ("Check-ups for
        children under 12 are free." to "What about for kids?" after an adult's price: bench
        answers' follow-ups).
        """
        own, stated, free = self._subject(clause), numbers(clause), bool(FREE.search(clause))
        return bool(own) and any(
            own <= self._fact_subjects[i] and stated <= self._fact_numbers[i]
            and (not free or FREE.search(f.text)) for i, f in enumerate(self.facts))

    def _unbound(self, clause: str, stated: set[str], asked: set[str]) -> set[str]:
        """The numbers of ``clause`` that only facts about something else hold.

        A fact's number said of what no fact prices ("a new part costs" another service's
        price, "the cheapest model is" a service's price: bench answers' unknowns) is made up
        as much as one no fact holds. A number is bound when a fact that holds it shares a word
        with what was ``asked`` (the subject words of the caller's and of the call's last turn),
        or two with the sentence itself; the persona's own numbers always are.
        """
        own = self._subject(clause)
        out = set()
        for n in stated - self._persona_numbers:
            holders = [i for i, ns in enumerate(self._fact_numbers) if n in ns]
            if not any(self._fact_terms[i] & asked or len(self._fact_terms[i] & own) >= 2
                       for i in holders):
                out.add(n)
        return out

    def _of_other_days(self, clause: str, stated: set[str]) -> set[str]:
        """The numbers ``clause`` says of its days that only the facts of other days hold.

        "We are open from 9 am to 5 pm on Tuesday" where Tuesday's fact says 10 to 7 and 9 and
        5 are Saturday's (bench answers' development split). A fact that names no day holds its
        numbers for any.
        """
        days = days_named(clause)
        if not days:
            return set()
        return {n for n in stated if not any(
            n in ns and (not d or d & days) for d, ns in self._fact_days)}

    def _priced(self, asked: set[str]) -> bool:
        """Whether the facts most about ``asked`` state a price and none says it is free.

        ``asked``: subject words (:meth:`_subject`). Then "there is no fee" contradicts them
        (the 1.5B denies a fee its fact states).
        """
        shared = [len(t & asked) for t in self._fact_terms]
        best = max(shared, default=0)
        if not best:
            return False
        top = [f.text for f, n in zip(self.facts, shared, strict=True) if n == best]
        return any(MONEY.search(t) for t in top) and not any(FREE.search(t) for t in top)

    @staticmethod
    def _subject(text: str) -> set[str]:
        """The stemmed words of ``text`` that say what it is about: no units, numbers, asking."""
        return {s for _, s in subject_words(text)}

    def _named(self, clause: str, given: str) -> set[str]:
        """The names and addresses ``clause`` states that neither the facts nor the caller do.

        A small model names a person ("The head mechanic is John Doe.") or writes an e-mail
        address where it has no fact; no business's names are needed to see it.
        """
        heard = given.lower()
        out = set()
        for m in _NAME.finditer(clause):
            word = m.group().strip(".,'’").lower()
            if word in CALENDAR or word in self._said or word in heard:
                continue
            parts = re.findall(r"[a-z0-9']+", word)
            if "@" in word or "." in word or not all(p in self._said for p in parts):
                out.add(m.group())
        return out

    def unknown_words(self, words: str) -> set[str]:
        """The content words of ``words`` (a caller's) that no fact or the persona has."""
        return self._unknown_words(words, set(terms(words)))

    def strays(self, sentence: str, words: str, before: str) -> bool:
        """Whether ``sentence``, to a follow-up that names no thing, is about none of ``before``'s.

        "What's the price for that?" asks about what the call's last exchange (``before``)
        was about; another thing's price, whose words are not that exchange's, answers a
        neighbouring fact (bench answers' follow-ups). The business's name is no thing either
        sentence is about; a sentence with no thing of its own ("It costs 250 dollars.") strays
        from nothing.
        """
        if not before or self._subject(words):
            return False
        own = self._subject(sentence) - self._named_only
        last = self._subject(before) - self._named_only
        return bool(own and last) and not own & last

    def all_in_facts(self, words: str) -> bool:
        """Whether every subject word of ``words`` is one of a fact's own words.

        Not the persona's or the file's title (the business's name): a question about a thing
        only the name holds ("a new chain" to a shop named for one) is about no fact.
        """
        return all(t not in self._named_only and (t in self._own or self._near_a_fact(t))
                   for t in self._subject(words))

    def _claimed(self, clause: str, said: set[str]) -> set[str]:
        """The caller's words (``said``, stemmed) a claim of ``clause`` is about, in no fact."""
        if UNSURE.search(clause):  # "I don't know whether we have a 3D printer": no claim
            return set()
        return set().union(*(self._unknown_words(m[m.lastgroup], said)
                             for m in _CLAIM.finditer(clause)))

    def _unknown_words(self, text: str, said: set[str]) -> set[str]:
        """The subject words of ``text``, as said, whose stem is in ``said`` and in no fact."""
        return {w for w, s in subject_words(text)
                if s in said and s not in self._vocabulary and not self._near_a_fact(w)}

    def _near_a_fact(self, word: str) -> bool:
        """Whether ``word`` is a word of the facts in another form (:data:`NEAR`)."""
        if self._embed is None:
            return False
        if word not in self._near:
            if self._word_vectors is None:
                words = sorted(w for w in self._said if len(w) > 2 and w not in STOP)
                self._word_vectors = (words, self._embed(words))
            vectors = self._word_vectors[1]
            self._near[word] = bool(len(vectors)) and float(
                (vectors @ self._embed([word])[0]).max()) >= NEAR
        return self._near[word]


@lru_cache(maxsize=32)
def knowledge_of(facts: tuple[Fact, ...], persona: str) -> Knowledge:
    """A profile's :class:`Knowledge`, with sentence vectors, made once per process.

    Every call's runner asks for it, and the facts' vectors are the same each time.
    """
    return Knowledge(facts, persona, embedder().embed)
