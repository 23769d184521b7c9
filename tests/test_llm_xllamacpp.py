"""The xllamacpp backend: llama.cpp's server engine in-process, one slot per call, batched.

Real engine, real bundled SmolLM2 weights. Greedy sampling, so a reply is the same whether the
request runs alone or in one batch with three others.
"""

from __future__ import annotations

import time

import pytest

from dialplan.options import LLMOptions
from models.llm.base import Message
from models.registry import ModelCache
from tests.llm_asks import (
    QUESTIONS,
    SYSTEM,
    ask,
    ask_at_once,
    check_metrics_after_prime,
    replies_alone_and_at_once,
)

pytestmark = pytest.mark.model



@pytest.fixture(scope="module")
def llm():
    return ModelCache().llm(LLMOptions(backend="xllamacpp", model="smollm2-135m",
                                       max_tokens=24, temperature=0.0, contexts=4))


def test_batched_replies_equal_single_replies(llm):
    single, batched = replies_alone_and_at_once(llm)
    assert all(single[q].strip() for q in QUESTIONS)
    assert batched == single


def test_metrics_and_prompt_cache(llm):
    check_metrics_after_prime(llm, max_tokens=24)


def test_close_stops_the_reply_and_frees_the_slot(llm):
    stream = llm.stream([Message("system", SYSTEM), Message("user", "Tell me a long story.")])
    pieces = []
    for piece in stream:
        pieces.append(piece)
        if len(pieces) == 2:
            break
    t0 = time.monotonic()
    stream.close()
    assert time.monotonic() - t0 < 2.0
    assert stream.metrics.tokens == 2
    assert ask(llm, QUESTIONS[0]).strip()  # the engine serves the next request


def test_unknown_model_names_the_fix():
    from models.errors import ModelMissingError

    with pytest.raises((ModelMissingError, ValueError), match="nope"):
        ModelCache().llm(LLMOptions(backend="xllamacpp", model="nope"))


def test_a_new_system_prompt_is_primed_into_every_slot(llm):
    # Four callers asking at once must each find the system prompt cached: priming one slot
    # left three to re-read it (Qwen 1.5B: 4.0 s to first token instead of 1.75 s).
    system = SYSTEM + " The library is on Elm Street."
    llm.prime(system)
    metrics = ask_at_once(llm, system)
    assert len(metrics) == 4
    assert all(m.cached_tokens >= 20 for m in metrics.values()), metrics
