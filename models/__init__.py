"""Speech stages behind one small interface each (vad, asr, llm, tts), plus audio helpers.

This package imports no backend: :mod:`models.registry` imports one only when a profile
names it, with a clear error naming the package to install if it is missing.
"""
