"""Speech stages behind one small interface each (vad, asr, llm, tts), plus audio helpers.

This package imports no backend: :mod:`models.registry` imports one only when a profile
names it, with a clear error naming the package to install if it is missing.
"""

import os

# llama.cpp and CTranslate2 run on OpenMP. Long busy-waits steal the 2 cores from whichever
# stage overlaps them (ASR, LLM and TTS overlap in a turn): with `bench pipeline`,
# OMP_WAIT_POLICY=ACTIVE gave voice-to-voice p50 7.0 s, PASSIVE 3.5 s. But never spinning slows
# decoding alone (Qwen 1.5B: 10 tok/s passive, 13.7 active); a short spin keeps 13.1 tok/s.
# Set before the OpenMP runtime loads (before any backend import); a user's values win.
if "OMP_WAIT_POLICY" not in os.environ:
    os.environ.setdefault("GOMP_SPINCOUNT", "20000")
