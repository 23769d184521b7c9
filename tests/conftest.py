"""Shared fixtures: models load once per test session (real bundled weights, offline)."""

from __future__ import annotations

import os
import re

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from agent.pipeline import StageCache  # noqa: E402
from agent.samples import spoken  # noqa: E402
from dialplan import parse_config  # noqa: E402

QUESTION = "What time does the library open on Saturday?"

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


_ONES = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen"
).split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()


def _number(n: int) -> str:
    if n < 20:
        return _ONES[n]
    if n < 100:
        return _TENS[n // 10] + ("" if n % 10 == 0 else " " + _ONES[n % 10])
    return str(n)


def normalize(text: str) -> str:
    """Lower-case words without punctuation, numbers as words ("10" = "ten").

    Whisper's English normalizer does the same, so a WER counts words heard wrong, not
    spelling choices.
    """
    text = text.lower().replace("a.m.", "am").replace("p.m.", "pm")
    text = re.sub(r"(\d+)(am|pm)\b", r"\1 \2", text)
    text = re.sub(r"\d+", lambda m: " " + _number(int(m.group())) + " ", text)
    text = text.replace("'", "")
    return " ".join("".join(c if c.isalnum() else " " for c in text).split())


def wer(ref: str, hyp: str) -> float:
    import jiwer

    return jiwer.wer(normalize(ref), normalize(hyp) or "<empty>")
