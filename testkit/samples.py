"""Spoken sample questions made with espeak-ng, for benchmarks and tests (no recordings ship)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from models.audio import read_audio

QUESTION = "What time does the library open on Saturday?"
"""The question most tests and benchmarks ask (the first of :data:`QUESTIONS`)."""
QUESTIONS = (
    QUESTION,
    "Can I renew my books over the phone?",
    "Do you have any books about gardening?",
    "Is the library open on Sunday?",
    "How late are you open on Friday evening?",
)


def speak_to_file(text: str, path: str | Path, voice: str = "en-us", wpm: int = 160) -> Path:
    """Synthesise ``text`` with espeak-ng into a WAV file (22.05 kHz PCM16)."""
    exe = shutil.which("espeak-ng")
    if exe is None:
        raise RuntimeError("espeak-ng is not installed: apt-get install espeak-ng")
    subprocess.run([exe, "-v", voice, "-s", str(wpm), "-w", str(path), text], check=True)
    return Path(path)


PAUSED = (
    ("I would like to book a study room for", "two people on Saturday morning."),
    ("Can you tell me if", "the library is open on Sunday?"),
    ("My name is John and I want to", "renew my books."),
    ("So I was wondering whether the", "library has books about gardening."),
    ("I am looking for a book about", "the history of the town."),
)
"""Questions said in two halves with a pause mid-thought: one turn each, not two."""


def spoken(text: str, **kw) -> tuple[np.ndarray, int]:
    """``text`` as mono float32 audio and its rate."""
    with tempfile.TemporaryDirectory() as d:
        return read_audio(speak_to_file(text, Path(d) / "q.wav", **kw))


def spoken_with_pause(first: str, second: str, pause_s: float = 0.7,
                      **kw) -> tuple[np.ndarray, int]:
    """Two halves of one question with ``pause_s`` of silence between them."""
    a, rate = spoken(first, **kw)
    b, _ = spoken(second, **kw)
    return np.concatenate([a, np.zeros(int(pause_s * rate), np.float32), b]), rate
