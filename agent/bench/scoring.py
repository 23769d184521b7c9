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
