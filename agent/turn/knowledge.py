"""Which of a profile's facts a turn's prompt carries, and what a reply may not state without one.

Retrieval scores each fact twice and adds the two: BM25 over its words (topic included, light
stemming), for the content words a question shares with its answer ("print", "Saturday",
"card"), and the cosine of WordLlama sentence vectors (:mod:`models.embed.wordllama`), for the
question put in other words ("Where are you located?" for "12 Elm Street"; "Can I extend my
loan?" for renewals). Either alone left the right fact out of the three a turn carries for
several paraphrased questions; the sum kept it in for all (bench answers). At a few hundred
facts both take well under a millisecond and need no vector service. The facts follow the
caller's words, so the persona and the call so far stay one cached prefix
(:meth:`agent.turn.runner.TurnRunner.prompt`). (Put before the words, they helped the 1.5B
only while the tools block was in every prompt; without it, fewer questions in other words
than bench answers' were answered right.)

Small models asked to say "I don't know" when the facts do not answer say it to everything;
told only that they know nothing else, they answer from the facts and mostly admit the rest,
but some still make a number up (bench answers). So a reply's every clause is also checked
before it is spoken: one that states a number that neither the persona, its facts nor the
caller gave is not said (:meth:`Knowledge.unfounded`); the profile's ``dont_know`` is. So is one
that says the library has, lets you book, or gives free something the caller named and no fact
mentions ("We don't have a 3D printer.", "Yes, you can rent the meeting hall for a wedding.",
"Passport photos are free."): a claim without a number, the kind the 1.5B still made (bench
answers); and one that turns the caller away (:func:`refuses`). With ``llm.strict_numbers``,
so is any number said of such a thing ("The phone number of the city museum is 555 0142.", the
library's: the under-load 0.5B lends the facts' numbers out; the 1.5B echoes the caller's words,
"The loan period for DVDs is 1 week.", and would lose right answers). One that says the
library is open on a day a fact says it is closed, or that the caller needs something a fact
says is not needed, is replaced by that fact (:meth:`Knowledge.contradicted`).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from functools import lru_cache

import numpy as np

from dialplan.knowledge import Fact
from models.embed.wordllama import embedder

TOP = 3
"""Facts per turn: enough for a question that spans two, few enough to keep the prompt short."""
FLOOR = 0.3
"""Below this cosine, with no word in common either, no fact is about the question ("Hello?",
"thank you, goodbye", "Do you sell coffee?"): the turn gets :data:`NO_NOTES` rather than
three unrelated facts."""

STOP = frozenset("""
a about am an and any are as at be been but by can could did do does doing for from get go
got had has have hello hi how i i'd i'll i'm if in is it it's just know let like may me might
more much my need no not now of on or our please so some tell than thank thanks that the
their them then there these they this to up us want was we what when where which who why
will with would yes you your you're okay ok um uh well hey really
""".split())

SYNONYMS = {
    "hour": ("open", "close"), "time": ("open", "close"), "late": ("close",),
    "early": ("open",), "cost": ("price", "fee"), "charge": ("fee", "price"),
    "pay": ("fee", "payment"), "price": ("cost",), "fee": ("cost",), "phone": ("number",),
    "call": ("number",), "print": ("printing",), "printing": ("print",),
    "weekend": ("saturday", "sunday"), "weekday": ("monday", "friday"), "kid": ("children",),
    "children": ("kid",),
    "borrow": ("loan", "lent"), "loan": ("borrow",),
    "renew": ("renewal",), "renewal": ("renew",), "room": ("study",), "wifi": ("internet",),
    "internet": ("wifi",), "computer": ("internet",), "where": ("address",), "locat": ("address",),
    "lose": ("lost",), "keep": ("lent", "kept"), "hold": ("reserv", "kept"),
}
"""What a caller says that a fact puts otherwise ("how late" is about closing)."""

NOTES = "Facts you know:\n{facts}\nAnything not in these facts, you don't know."
"""One fact a line: the 1.5B then says "I don't know" to more questions no fact answers than
with the facts run together in one paragraph, for as many facts right (bench answers)."""
NO_NOTES = ("You know no facts about this. If it asks for one, say you don't know and offer to "
            "transfer the caller; never guess a number, price, time or date.")

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


_CLAIM = re.compile(
    r"\b(?:we|the library)\s+(?:do not |don't |does not |doesn't |do |does |also |only )?"
    r"(?:have|has|offer|offers|sell|sells|rent|rents|lend|lends)\b(?P<what>[^.!?;:]*)"
    r"|\bthere (?:is|are)\b(?P<there>[^.!?;:]*)"
    r"|\byou can(?:not|'t)? (?:rent|book|reserve|hire)\b(?P<booked>[^.!?;:]*)"
    r"|(?P<free>[^.!?;:,]*)\b(?:is|are) free\b", re.I)
"""What a reply claims the library has (or has not), lets a caller book, or gives for nothing:
"We don't have a 3D printer", "there is no café", "you can rent the meeting hall for a
wedding", "passport photos are free" (the under-load 0.5B, of a price no fact holds)."""


_DAYS = ("monday tuesday wednesday thursday friday saturday sunday weekend holiday christmas "
         "easter thanksgiving").split()
_DAY = re.compile(rf"\b(?i:{'|'.join(_DAYS)})s?\b|\b(?:[A-Z][a-z']+ )+Day\b")
"""A day a library may be closed on: a weekday, a holiday by name ("Independence Day")."""
_OPEN = re.compile(r"\bopen(?:s|ed)?\b", re.I)
_NOT_OPEN = re.compile(r"\bclos|\bnot\b|n't\b|\bexcept|\bbut\b|\bno\b|\bonly\b", re.I)
"""Words that make "open ... Sunday" no plain claim of being open that day ("closed on Sunday",
"open every day except Sunday", "not open on Sunday")."""

_NEEDS_NO = re.compile(r"\bneeds? no ([a-z-]+)|\bno ([a-z-]+) (?:is |are )?(?:needed|required)\b",
                       re.I)
"""A fact that something is not needed: "Wi-Fi is free and needs no password."."""
_NEEDS = re.compile(r"\b(?:need|needs|require|requires) (?:a |an |the |your )?([a-z-]+)", re.I)
_NO_NEED = re.compile(r"n't\b|\bnot\b|\bno\b|\bnever\b|\bwithout\b", re.I)


def _days(text: str) -> set[str]:
    return {stem(d) for d in _DAY.findall(text)}


_UNSURE = re.compile(r"\b(?:don't|do not|doesn't|does not) know\b|\bnot sure\b", re.I)

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


def terms(text: str) -> list[str]:
    """The content words of ``text``, stemmed."""
    words = re.findall(r"[a-z0-9']+", text.lower().replace("’", "'"))
    return [stem(w) for w in words if w not in STOP and len(w) > 1]


def known_numbers(texts) -> set[str]:
    """The numbers ``texts`` state, each also as its digits and without leading zeros.

    A number may be read out digit by digit ("five five five, zero one four two").
    """
    known = set().union(*(numbers(t) for t in texts))
    return known | {d for n in known if n.isdigit() for d in n} | {
        str(int(n)) for n in known if n.isdigit()}


_SYNONYMS = {stem(k): tuple(stem(v) for v in vs) for k, vs in SYNONYMS.items()}


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
        self._docs = [Counter(terms(f"{f.topic} {f.text}")) for f in facts]
        self._vocabulary = set(terms(persona)).union(*self._docs)
        self._closed = [(f, _days(f.text)) for f in facts if re.search(r"\bclosed\b", f.text)]
        self._unneeded = [(f, stem(m[1] or m[2]))
                          for f in facts for m in _NEEDS_NO.finditer(f.text)]
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
        query = terms(words)
        query = set(query + [s for t in query for s in _SYNONYMS.get(t, ())])
        out = np.zeros(len(self.facts))
        for i, doc in enumerate(self._docs):
            norm = self._k1 * (1 - self._b + self._b * self._len[i] / (self._avg or 1))
            out[i] = sum(self._idf.get(t, 0.0) * doc[t] * (self._k1 + 1) / (doc[t] + norm)
                         for t in query if t in doc)
        return out

    def relevant(self, words: str, top: int = TOP) -> list[Fact]:
        """The facts that best match ``words``, best first; none when none is about them."""
        if not self.facts or not words.strip():
            return []
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

    def notes(self, words: str) -> str:
        """The text that follows the caller's words in the prompt."""
        found = self.relevant(words)
        if not found:
            return NO_NOTES
        return NOTES.format(facts="\n".join(f.text for f in found))

    def unfounded(self, clause: str, given: str, strict: bool = False) -> set[str]:
        """What ``clause`` states that no fact or the persona holds: numbers and claimed things.

        ``given``: the caller's words. A number neither they nor a fact hold is made up; so is a
        claim (:data:`_CLAIM`) about a word of theirs that no fact mentions: the model knows
        nothing about it, whether it says yes or no. ``strict``: so is a number, even one a
        fact holds, stated beside such a word ("The phone number of the city museum is 555
        0142.", the library's: the under-load 0.5B, bench answers). A number is returned as its
        digits, a word as said.
        """
        stated, said = numbers(clause) - numbers(given), set(terms(given))
        return (stated - self._known) | self._claimed(clause, said) | (
            self._unknown_words(clause, said) if strict and stated else set())

    def contradicted(self, sentence: str) -> Fact | None:
        """A fact that ``sentence`` says the opposite of: the fact is said instead.

        Two kinds. The library is open on a day a fact says it is closed: heard "You open on
        Christmas Day." (a robotic voice's "Are you open ...?"), the 1.5B agreed, "We open on
        Christmas Day.", with the closed days in its prompt (bench answers); a caller who
        drives to a closed door is the worst wrong answer. And something is needed that a fact
        says is not: "Yes, you need a password for the Wi-Fi.", the under-load 0.5B's answer
        with "Wi-Fi is free and needs no password." in its prompt (bench answers).
        """
        if _OPEN.search(sentence) and not _NOT_OPEN.search(sentence):
            said = _days(sentence)
            closed = next((f for f, days in self._closed if said & days), None)
            if closed is not None:
                return closed
        if self._unneeded and not _NO_NEED.search(sentence):
            needed = {stem(m[1]) for m in _NEEDS.finditer(sentence)}
            return next((f for f, thing in self._unneeded if thing in needed), None)
        return None

    def _claimed(self, clause: str, said: set[str]) -> set[str]:
        """The caller's words (``said``, stemmed) a claim of ``clause`` is about, in no fact."""
        if _UNSURE.search(clause):  # "I don't know whether we have a 3D printer": no claim
            return set()
        return set().union(*(self._unknown_words(m[m.lastgroup], said)
                             for m in _CLAIM.finditer(clause)))

    def _unknown_words(self, text: str, said: set[str]) -> set[str]:
        """The words of ``text``, as said, whose stem is in ``said`` and in no fact or synonym."""
        out = set()
        for w in re.findall(r"[a-z0-9']+", text.lower()):
            s = stem(w)
            known = self._vocabulary.intersection((s, *_SYNONYMS.get(s, ())))
            if w not in STOP and len(w) > 1 and s in said and not known:
                out.add(w)
        return out


@lru_cache(maxsize=32)
def knowledge_of(facts: tuple[Fact, ...], persona: str) -> Knowledge:
    """A profile's :class:`Knowledge`, with sentence vectors, made once per process.

    Every call's runner asks for it, and the facts' vectors are the same each time.
    """
    return Knowledge(facts, persona, embedder().embed)
