"""The phone agent, in the order a call meets it.

``sip/`` (the line) -> ``call/`` (one call's session and turn-taking) -> ``turn/`` (ASR, LLM,
TTS for one turn); ``server.py`` and ``simulate.py`` wire calls from SIP or from a file;
``cli/`` and ``bench/`` sit on top. Imports point down (tests/test_imports.py).
"""
