"""Speech stages behind one small interface each (vad, asr, llm, tts), plus audio helpers.

This package imports no backend: :mod:`models.registry` imports one only when a profile
names it, with a clear error naming the package to install if it is missing.
"""

import os

# llama.cpp and CTranslate2 run on OpenMP. Long busy-waits steal the 2 cores from whichever
# stage overlaps them (ASR, LLM and TTS overlap in a turn): OMP_WAIT_POLICY=ACTIVE made
# voice-to-voice far slower than PASSIVE (bench pipeline). But never spinning slows decoding
# alone, and a short spin keeps nearly all of ACTIVE's decoding speed (bench llm).
# Set before the OpenMP runtime loads (before any backend import); a user's values win.
if "OMP_WAIT_POLICY" not in os.environ:
    os.environ.setdefault("GOMP_SPINCOUNT", "20000")
