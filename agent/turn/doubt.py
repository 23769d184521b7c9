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


def looped(text: str, times: int = 4) -> bool:
    """The transcript repeats a phrase of 1-3 words ``times`` times in a row (a Whisper loop)."""
    words = [w.strip(".,?!").lower() for w in text.split()]
    for n in (1, 2, 3):
        for i in range(len(words) - n * times + 1):
            gram = words[i:i + n]
            if all(words[i + k * n:i + (k + 1) * n] == gram for k in range(1, times)):
                return True
    return False
