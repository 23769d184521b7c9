"""Word error rate as tests and benchmarks score transcripts (jiwer on normalised words).

Normalisation follows Whisper's English normaliser in spirit: lower case, no punctuation,
numbers as words ("10" = "ten"), so a WER counts words heard wrong, not spelling choices.
"""

from __future__ import annotations

import re

import jiwer

_ONES = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen"
).split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()


def _number(n: int) -> str:
    if n < 20:
        return _ONES[n]
    if n < 100:
        return _TENS[n // 10] + ("" if n % 10 == 0 else " " + _ONES[n % 10])
    return str(n)


def normalize(text: str) -> str:
    """Lower-case words without punctuation, numbers under 100 spelled out."""
    text = text.lower().replace("a.m.", "am").replace("p.m.", "pm")
    text = re.sub(r"(\d+)(am|pm)\b", r"\1 \2", text)
    text = re.sub(r"\d+", lambda m: " " + _number(int(m.group())) + " ", text)
    text = text.replace("'", "")
    return " ".join("".join(c if c.isalnum() else " " for c in text).split())


def wer(reference: str | list[str], hypothesis: str | list[str]) -> float:
    """Word error rate of one transcript, or over parallel lists of them."""
    refs = [reference] if isinstance(reference, str) else reference
    hyps = [hypothesis] if isinstance(hypothesis, str) else hypothesis
    # jiwer refuses an empty hypothesis; a placeholder word scores it as all wrong.
    return jiwer.wer([normalize(r) for r in refs], [normalize(h) or "<empty>" for h in hyps])


# ---- numbers a text states: the bench's own reader, so its judge shares no code with the agent's
# checks (a bug there would otherwise pass its own exam) ----------------------------------------

_DIGIT_WORDS = {w: i for i, w in enumerate(_ONES[:10])} | {"oh": 0}
_SMALL = {w: i for i, w in enumerate(_ONES)}
_TEN_WORDS = {w: 10 * i for i, w in enumerate(_TENS) if w != "_"}
_UNITS = re.compile(r"(?:dollar|cent|hour|day|week|month|year|minute|page|item|am|pm|oclock)s?$")
"""Words after which "one" is a number ("one dollar"); elsewhere it is a pronoun ("a new one")."""
_SCALES = ("hundred", "thousand")


def _cardinal(words: list[str], i: int) -> tuple[int, int]:
    """The number spelled from ``words[i]`` on ("two hundred and ten"), and where it ends."""
    total, cur, j = 0, 0, i
    while j < len(words):
        w = words[j]
        if w in _TEN_WORDS and cur % 100 == 0:
            cur += _TEN_WORDS[w]
            if j + 1 < len(words) and 0 < _SMALL.get(words[j + 1], 0) < 10:
                j += 1
                cur += _SMALL[words[j]]
        elif w in _SMALL and cur % 100 == 0 and (w != "zero" or j == i):
            cur += _SMALL[w]
        elif w == "hundred" and j > i:
            cur = (cur or 1) * 100
        elif w == "thousand" and j > i:
            total, cur = total + (cur or 1) * 1000, 0
        elif w == "and" and cur and cur % 100 == 0 and j + 1 < len(words) and (
                words[j + 1] in _SMALL or words[j + 1] in _TEN_WORDS):
            pass  # "two hundred and ten"
        else:
            break
        j += 1
    return total + cur, j


def stated_numbers(text: str) -> list[tuple[str, str]]:
    """The numbers ``text`` states, each as ``(value, digits)``.

    ``value`` is the number in digits without leading zeros ("ten" and "10" are ``"10"``,
    "twenty five" ``"25"``, "1,250" ``"1250"``). ``digits`` is set when the number was read
    digit by digit or written in groups, as a phone number is ("five five five, zero one four
    two" is ``("5550142", "5550142")``; "555-0142" is ``("555", "5550142")`` and ``("142",
    "5550142")``): such a number counts as known when a known number holds those digits in
    that order. "one" is a number only beside a unit ("one dollar"), before "hundred" or
    "thousand", or among other digits; "oh" only among other digits.
    """
    t = re.sub(r"(?<=\d),(?=\d{3})", "", text.lower().replace("'", "").replace("\u2019", ""))
    out: list[tuple[str, str]] = []
    # Digits: groups joined by one space, hyphen, dot or colon are one written sequence.
    for m in re.finditer(r"\d+(?:[ .:-]\d+)*", t):
        groups = re.split(r"[ .:-]", m.group())
        joined = "".join(groups) if len(groups) > 1 or groups[0].startswith("0") else ""
        out += [(str(int(g)), joined) for g in groups]
    words = re.findall(r"[a-z]+", re.sub(r"\d+", " ", t))
    i = 0
    while i < len(words):
        run = 0
        while i + run < len(words) and words[i + run] in _DIGIT_WORDS:
            run += 1
        if run >= 2:  # said digit by digit
            digits = "".join(str(_DIGIT_WORDS[w]) for w in words[i:i + run])
            out.append((str(int(digits)), digits))
            i += run
            continue
        w = words[i]
        after = words[i + 1] if i + 1 < len(words) else ""
        if w == "oh" or (w == "one" and not (_UNITS.match(after) or after in _SCALES)):
            i += 1
            continue
        if w in _SMALL or w in _TEN_WORDS:
            value, i = _cardinal(words, i)
            out.append((str(value), ""))
            continue
        i += 1
    return out


def known_numbers(texts) -> frozenset[str]:
    """Every number ``texts`` state, as values and as digit sequences (:func:`stated_numbers`)."""
    out: set[str] = set()
    for text in texts:
        for value, digits in stated_numbers(text):
            out.add(value)
            if digits:
                out.add(digits)
    return frozenset(out)


def invented_numbers(text: str, known) -> set[str]:
    """The numbers ``text`` states that ``known`` (:func:`known_numbers`) does not hold.

    A number read digit by digit is known when its digits run, in order, inside a known one:
    "five five five" of a fact's "555 0142" is that number, not a new one.
    """
    return {value for value, digits in stated_numbers(text)
            if value not in known and not (digits and any(digits in k for k in known))}
