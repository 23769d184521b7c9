"""Split a streamed LLM reply into speakable chunks: a short first clause, then sentences.

The first chunk may be the reply's opening word ("Yes," "Sorry,"; ``openers``), else it is
its first clause or phrase.

Later chunks are cut into phrases too while the reply's audio is about to run out (``hurry``).

Speaking the first clause rather than the first sentence is the second-largest latency lever
(DESIGN.md): TTS time grows with text length, and the caller hears something sooner.
"""

from __future__ import annotations

import re
from collections.abc import Callable

_SENTENCE_END = ".!?"
_CLAUSE_END = ",;:—"
_ABBREVIATIONS = {"mr", "mrs", "ms", "dr", "st", "e.g", "i.e", "etc", "vs", "no", "a.m", "p.m"}
_BULLETS = re.compile(r"^\s*(?:[-•*]|\d+\.)\s+", re.MULTILINE)
# Words that open a new phrase: the first chunk may end before one of them when no comma came,
# so "The shop opens | at 10 am on Saturday." speaks its first words early yet naturally.
# Prepositions and subordinating conjunctions; the later ones, added after bench call's slowest
# single-call turns waited on first clauses like "To cancel your booking through the meeting
# room" (some of that bench's distinct replies now cut a few words sooner).
_PHRASE_STARTS = {
    "at",
    "on",
    "in",
    "from",
    "to",
    "until",
    "and",
    "but",
    "so",
    "because",
    "which",
    "when",
    "for",
    "with",
    "by",
    "if",
    "or",
    "where",
    "while",
    "after",
    "before",
    "during",
    "through",
    "about",
    "into",
    "over",
    "under",
    "between",
    "without",
    "within",
    "across",
    "around",
    "near",
    "since",
    "unless",
    "although",
    "whether",
}
PHRASE_MIN_WORDS = 3
# A relative clause or a quoted title opens a phrase too ("a form | that you signed", "a
# film titled | "The Secret Garden""): the longest first chunks of bench call's replies ran on
# past them (bench call, one call).
_CLAUSE_STARTS = {"that", "who", "whose", "whom"}
_QUOTE = re.compile(r"[\"\u201c(]")
FIRST_MAX_WORDS = 5
# A first chunk this long with no phrase to cut at is cut before its next article or
# possessive ("Dr. Lin will be giving | a local history talk next week."): each word more is
# another token or so to decode, slower under load, before the caller hears a word (bench llm).
_ARTICLES = {"a", "an", "the", "my", "your", "our", "their", "his", "her", "its", "this",
             "these", "those", "every", "each"}
"""Articles and possessives: a number or a noun phrase follows them."""
_DETERMINERS = _ARTICLES | {"some", "any"}
_BINDS = _PHRASE_STARTS | {"as", "of", "like", "than", "per"}
"""Words never left at the end of a chunk cut before a determiner ("items as | the branch")."""
_NUMBER = re.compile(r"[$£€]?\d")
LONG_NUMBER_DIGITS = 4
# A card, phone or extension number is read out after a pause even after its noun ("your
# member card number | 472918 to check in online": a decode step per digit before that first
# chunk could end, the slowest single-call turn of bench call whenever that reply came); only an
# article or a phrase's first word keeps it ("the | 2024 edition", "at | 10.30").
_LONG_NUMBER_BOUND = _ARTICLES | _PHRASE_STARTS
# ...and a shorter number its noun too: no cut between them ("the | 8", "room | 3", "at | 9.30").
_NUMBER_BOUND = _LONG_NUMBER_BOUND | {
    "that", "per", "no", "number", "room", "floor", "level", "page", "chapter", "bus", "line",
    "gate", "platform", "aisle", "shelf", "extension", "option",
}
# A reply's opening word(s) before a comma may be a first chunk of their own ("Yes," | "we
# are open on Sunday."): the caller hears the answer start several tokens sooner, each
# a batched decode step, slower under load (bench llm). Many replies in bench call open so.
# By default only while no other call is up (tts.first_chunk_opener): the rest of the reply
# then decodes alone, faster than it is spoken; under load a long pause follows.
_OPENERS = {
    "yes", "no", "sure", "sorry", "okay", "ok", "certainly", "absolutely", "of course",
    "i'm sorry", "i am sorry", "unfortunately", "well", "alright", "all right", "hello", "hi",
    "thanks", "thank you", "great", "good news", "no problem", "yes indeed", "not yet",
}
_MARKUP = re.compile(r"[*_#`>|~\[\]{}<>]")


def ends_sentence(text: str) -> bool:
    """Whether ``text`` (a clause the splitter cut) ends its sentence."""
    text = text.rstrip()
    return bool(text) and text[-1] in _SENTENCE_END


def speakable(text: str) -> str:
    """Strip markdown and symbols a voice should not read out; collapse whitespace."""
    text = _MARKUP.sub("", _BULLETS.sub(" ", text))
    text = re.sub(r"\s+([,.;:!?])", r"\1", text)
    return re.sub(r"\s+", " ", text).strip()


class ClauseSplitter:
    """Feed text pieces, get complete chunks back as soon as they are speakable.

    Args:
        first_words: words before a comma may end the first chunk.
        min_words: shortest sentence that is a chunk of its own.
        hurry: true while the reply's audio is about to run out: later chunks are then cut
            as the first is (at a comma or before a phrase), not only at a sentence's end.
        openers: a reply's opening word before a comma or stop ("Yes,") is a first chunk;
            a callable is asked when such a word ends (true: cut there).
        eager: the first chunk may end on the token that shows where (a whole word, a lone
            mark), not one token later; a callable is asked then. The runner says so while
            the call is alone: with other callers up it brought no sooner first chunk, and more
            silence inside replies (bench call, 4 at once).
    """

    def __init__(self, first_words: int = 4, min_words: int = 2,
                 hurry: Callable[[], bool] | None = None,
                 openers: bool | Callable[[], bool] = False,
                 eager: bool | Callable[[], bool] = True):
        self.first_words = first_words
        self.openers = openers
        self.eager = eager
        self.min_words = min_words
        self.hurry = hurry
        self._buf = ""
        self._emitted = 0
        self._word_piece = False
        """The last piece was one whole word after a space (a token such as " the")."""
        self._mark_piece = False
        """The last piece was a mark alone (a token such as ",")."""

    def push(self, piece: str) -> list[str]:
        """Add a piece of streamed text; return chunks completed by it."""
        self._buf += piece
        self._word_piece = piece[:1].isspace() and len(piece.split()) == 1
        self._mark_piece = len(piece) == 1 and piece in _SENTENCE_END + _CLAUSE_END
        out = []
        while (cut := self._find_cut()) is not None:
            chunk, self._buf = self._buf[:cut].strip(), self._buf[cut:]
            if chunk:
                out.append(chunk)
                self._emitted += 1
        return out

    def flush(self) -> list[str]:
        """End of the reply: whatever is left is the last chunk."""
        chunk, self._buf = self._buf.strip(), ""
        return [chunk] if chunk else []

    def _find_cut(self) -> int | None:
        buf = self._buf
        # A mark only ends a chunk once the next character shows it is not "9.30" or "e.g.",
        # or, in the first chunk, once it came as a token of its own right after a word of
        # letters ("Yes" ","): one decode step sooner, and the caller hears the first chunk
        # that much sooner. Not after one letter ("a" "." may go on to "a.m."). Later chunks
        # wait as before: with them cut as soon too, callers at once made more TTS jobs
        # (hurried replies) and the slowest turns came later (bench call, 4 at once).
        for i, ch in enumerate(buf):
            if i + 1 < len(buf):
                if not buf[i + 1].isspace():
                    continue
            elif not (self._mark_piece and i >= 2 and buf[i - 2:i].isalpha()
                      and self._early()):
                continue
            words = len(buf[: i + 1].split())
            if ch in _SENTENCE_END + _CLAUSE_END and self.openers and self._emitted == 0 \
                    and " ".join(buf[:i].split()).lower() in _OPENERS and self._open():
                return i + 1
            if ch in _SENTENCE_END:
                last = buf[:i].split()[-1].lower().rstrip(".") if buf[:i].split() else ""
                if last in _ABBREVIATIONS or words < self.min_words:
                    continue
                return i + 1
            if ch in _CLAUSE_END and words >= self.first_words and self._short():
                return i + 1
        if self._short():
            return self._phrase_cut(buf)
        return None

    def _early(self) -> bool:
        """The first chunk may end on the token that shows where (see ``eager``)."""
        if self._emitted:
            return False
        return _ask(self.eager)

    def _open(self) -> bool:
        return _ask(self.openers)

    def _short(self) -> bool:
        """Cut at clauses and phrases: the first chunk, or a reply about to fall silent."""
        return self._emitted == 0 or (self.hurry is not None and self.hurry())

    def _phrase_cut(self, buf: str) -> int | None:
        """A chunk without a comma (first or hurried): cut before a phrase after enough words.

        Or before a number ("Your card number is | 472918."): a model spells digits one token
        each, so a number can hold the first chunk back for several decode steps, and a word
        that starts with a digit is a number however it goes on. Not after a phrase's own first
        word ("at | 9.30", "to | 3"), nor after a word it belongs to ("the | 8", "room | 3").
        A number of ``LONG_NUMBER_DIGITS`` digits or more ("card number | 472918") may follow
        its noun after a pause: while it may still grow shorter than that, no cut yet.
        Also before a relative clause ("that"), an opening quote, and, after
        ``FIRST_MAX_WORDS`` words, an article or possessive.
        """
        words = list(re.finditer(r"\S+", buf))
        growing = not buf[-1:].isspace()  # the last word may go on: "on" may become "online"
        for n in range(PHRASE_MIN_WORDS - 1, len(words) - 1):
            word, following = words[n].group(), words[n + 1].group()
            if word[-1] in _SENTENCE_END + _CLAUSE_END:
                continue
            starts = following.lower()
            # ...unless it came as a token of its own: a model's vocabulary holds such words
            # whole (" online" is one token, not " on" and "line"), so the cut need not wait
            # for the next step (a decode step, slower under load, before the caller hears a
            # word; bench llm): in the first chunk (see _find_cut). Not "that": it may end the
            # sentence ("I can help with that.").
            whole = not growing or n + 1 < len(words) - 1 or (
                self._word_piece and starts not in _CLAUSE_STARTS and self._early())
            if (whole and (starts in _PHRASE_STARTS or starts in _CLAUSE_STARTS
                           or (n + 1 >= FIRST_MAX_WORDS and starts in _DETERMINERS
                               and word.lower() not in _BINDS))) or (
                    (_NUMBER.match(following) or _QUOTE.match(following))
                    and word.lower() not in _number_bound(following)):
                return words[n].end()
        return None


def _ask(flag: bool | Callable[[], bool]) -> bool:
    """A flag that may be a callable asked now."""
    return flag() if callable(flag) else bool(flag)


def _number_bound(word: str) -> set[str]:
    """Words that ``word`` (a number, once it is one) may not be cut from."""
    long = sum(c.isdigit() for c in word) >= LONG_NUMBER_DIGITS
    return _LONG_NUMBER_BOUND if long else _NUMBER_BOUND
