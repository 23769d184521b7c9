"""Transcripts not worth answering: too unsure, or a decoding loop (asked to repeat instead)."""

from __future__ import annotations

from models.asr.base import Transcript


def doubtful(tr: Transcript, min_avg_logprob: float) -> str:
    """Why a transcript is a guess not worth answering ("" when it is good enough)."""
    if tr.avg_logprob is not None and tr.avg_logprob < min_avg_logprob:
        return f"low-confidence avg_logprob={tr.avg_logprob:.2f}"
    if looped(tr.text):
        return "decoding-loop"  # confident nonsense: "I knew I knew I knew I knew..."
    return ""


ALTERNATION_WORDS = 8
"""A loop may also alternate two words in no fixed order: Whisper base heard "My phone number
is 0 7 7 0 0, 9 0 0, 4 6 1" as "My own number is Nielo Pemment Pemment Nielo Nielo Pemment
Pemment Nielo..." (bench call, 4 at once): the reply recited it back, long after the caller
stopped. No run of this many words in a real question holds only two distinct ones (the
digits of a phone number read out one by one hold at least three in any run of eight)."""


def looped(text: str, times: int = 4) -> bool:
    """Whether the transcript is a Whisper loop.

    A phrase of 1-3 words ``times`` times in a row, or a run of :data:`ALTERNATION_WORDS`
    words made of two ("Nielo Pemment Pemment Nielo...").
    """
    words = [w.strip(".,?!").lower() for w in text.split()]
    for n in (1, 2, 3):
        for i in range(len(words) - n * times + 1):
            gram = words[i:i + n]
            if all(words[i + k * n:i + (k + 1) * n] == gram for k in range(1, times)):
                return True
    return any(len(set(words[i:i + ALTERNATION_WORDS])) <= 2
               for i in range(len(words) - ALTERNATION_WORDS + 1))
