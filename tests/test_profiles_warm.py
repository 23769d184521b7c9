"""Profiles that share a model warm it once; each still primes its own prompt (issue 60).

``serve`` prepares every routed profile before it listens: the shipped config's three personas
name the same ASR, LLM and voice, and each warmed all three again.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from agent.turn.profiles import ReadyProfiles
from dialplan import Dialplan, parse_config
from tests.fakes import fake_stages

pytestmark = pytest.mark.unit


def test_a_model_two_profiles_share_is_warmed_once_and_each_prompt_primed():
    config = parse_config({"profiles": {
        "a": {"system_prompt": "You answer for the first business."},
        "b": {"system_prompt": "You answer for the second business."}},
        "dialplan": {"1": "a", "2": "b"}})
    stages = fake_stages()
    warmed, primed = [], []
    stages.asr.warm_up = lambda: warmed.append("asr")
    stages.tts.warm_up = lambda text: warmed.append("tts")
    stages.llm.prime = lambda prompt, spread=True: primed.append(prompt)
    cache = SimpleNamespace(stages=lambda profile: stages)
    ready = ReadyProfiles(Dialplan.from_config(config), cache)
    for name in ("a", "b"):
        ready.prepare(config.profiles[name])
    assert sorted(warmed) == ["asr", "tts"]  # once, not once per profile
    assert [p.split(".")[0] for p in primed] == ["You answer for the first business",
                                                 "You answer for the second business"]
    ready.prepare(config.profiles["a"])  # prepared already: nothing again
    assert len(primed) == 2 and len(warmed) == 2
