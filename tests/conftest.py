"""Shared fixtures: models load once per test session (real bundled weights, offline)."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from agent.turn.runner import StageCache  # noqa: E402
from dialplan import parse_config  # noqa: E402
from testkit.samples import QUESTION, spoken  # noqa: E402
from tests.marks import (  # noqa: E402, F401 (hooks: what a test starts, checked)
    pytest_collection_modifyitems,
    pytest_configure,
    pytest_fixture_setup,
    pytest_runtest_call,
    pytest_runtest_setup,
    pytest_unconfigure,
)

TEST_CONFIG = {
    "system_prompt": "You are the phone assistant of a public library. The library opens "
    "10 am to 4 pm on Saturday. Answer in one short spoken sentence.",
    "profiles": {
        "fast": {"asr": {"model": "tiny.en"}, "llm": {"model": "smollm2-135m", "max_tokens": 40}},
        "default": {},
    },
    "dialplan": {"100": "default", "101": "fast"},
}


@pytest.fixture(scope="session")
def config():
    return parse_config(TEST_CONFIG)


@pytest.fixture(scope="session")
def stage_cache():
    return StageCache()


@pytest.fixture(scope="session")
def fast_stages(stage_cache, config):
    """tiny.en + SmolLM2-135M + Kokoro int8 + Silero."""
    return stage_cache.stages(config.profiles["fast"])


@pytest.fixture(scope="session")
def default_stages(stage_cache, config):
    """The shipped defaults: Whisper base + Qwen2.5-1.5B + Kokoro int8 + Silero."""
    return stage_cache.stages(config.profiles["default"])


@pytest.fixture(scope="session")
def question_audio() -> tuple[np.ndarray, int]:
    return spoken(QUESTION)
