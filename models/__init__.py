"""Speech stages behind one small interface each (vad, asr, llm, tts), plus audio helpers.

This package imports no backend: :mod:`models.registry` imports one only when a profile
names it, with a clear error naming the package to install if it is missing. Importing it
changes nothing in the process: OpenMP's spin and the like are the CLI's to set
(:mod:`agent.cli.runtime`), before any backend loads.
"""
