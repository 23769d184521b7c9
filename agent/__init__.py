"""The phone agent, in the order a call meets it.

``sip/`` (the line) -> ``call/`` (one call's session and turn-taking) -> ``turn/`` (ASR, LLM,
TTS for one turn); ``server.py`` and ``simulate.py`` wire calls from SIP or from a file;
``cli/`` sits on top. The benchmarks are a package beside this one (``bench/``), above it:
only ``callagent bench`` loads them. Imports point down (tests/test_imports.py).
"""
