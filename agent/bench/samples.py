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


def spoken(text: str, **kw) -> tuple[np.ndarray, int]:
    """``text`` as mono float32 audio and its rate."""
    with tempfile.TemporaryDirectory() as d:
        return read_audio(speak_to_file(text, Path(d) / "q.wav", **kw))
