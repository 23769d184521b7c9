"""The caller's words that ask the agent to wait (:func:`agent.turn.intent.asks_to_wait`).

A request to wait gets the profile's ``hold_ack`` at once, without the model, and the call
keeps quiet for ``limits.hold_s`` (test_call_quiet.py): words that only look like one must go
to the model instead, which answers them.
"""

from __future__ import annotations

import pytest

from agent.turn.intent import asks_to_wait

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("words", [
    "Hold on a second.", "Hang on.", "One second, please.", "Give me a minute.",
    "Let me find my card.", "Just a moment.", "Could you hold on a sec?", "Bear with me.",
    "Wait a minute, let me check.", "Oh, hold on a second.", "Sorry, one sec.",
    "OK, let me find my card number.", "Hold on a second. Let me find it.", " hang on",
])
def test_a_request_to_wait(words):
    assert asks_to_wait(words)


@pytest.mark.parametrize("words", [
    "Hold on, when do you close?",  # a question besides: the model answers it
    "What is the hold on my book?", "Can you hold my book for me?",
    "I need a minute of your time about fees.", "No need to hold on.",
    "Let me know when you open.", "I will be there in a minute.", "I will be one minute late.",
    "This will only take a minute.", "I want someone who can hold on to my card.",
    "Hold on to my reservation, please.", "",
])
def test_words_that_are_not_one(words):
    assert not asks_to_wait(words)
