"""The llama-cpp backend's contexts: a prompt primed at warm-up is cached in every one.

Real llama.cpp, real bundled SmolLM2 weights, greedy sampling.
"""

from __future__ import annotations

import threading

import pytest

from dialplan.options import LLMOptions
from models.registry import ModelCache
from tests.llm_asks import SYSTEM, ask_at_once

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def llm():
    return ModelCache().llm(LLMOptions(backend="llama-cpp", model="smollm2-135m", max_tokens=12,
                                       temperature=0.0, contexts=4))


def test_a_new_system_prompt_is_primed_into_every_context(llm):
    # Four first callers asking at once each find the prompt cached (one primed context left
    # three to read it cold), and every context's buffers were committed at start.
    system = SYSTEM + " The library is on Elm Street."
    llm.prime(system)
    assert all(c.holds and c.holds[0].content == system for c in llm._contexts)
    metrics = ask_at_once(llm, system)
    assert len(metrics) == 4
    assert all(m.cached_tokens >= 20 for m in metrics.values()), metrics


def test_priming_a_prompt_again_takes_one_context(llm):
    # A call primes its profile's prompt during the greeting: one context, not all four.
    oak, pine = SYSTEM + " The library is on Oak Street.", SYSTEM + " It is on Pine Street."
    llm.prime(oak)
    llm.prime(pine)
    llm.prime(oak)
    held = [c.holds[0].content for c in llm._contexts]
    assert held.count(oak) == 1 and held.count(pine) == 3


def test_prime_does_not_wait_for_contexts_a_call_holds(llm):
    # A profile loaded while calls are up primes the free contexts and returns.
    held = [llm._lease(("x",)) for _ in range(3)]
    try:
        done = threading.Event()
        t = threading.Thread(target=lambda: (llm.prime(SYSTEM + " Open late."), done.set()))
        t.start()
        assert done.wait(30)
    finally:
        for ctx in held:
            llm._release(ctx, ())


def test_a_wait_for_a_context_is_part_of_the_llm_time(llm):
    # Every context busy: the reply starts only when one is given back, and its recorded LLM
    # time (the call log's llm_total) covers that wait, as the caller's time to first token does.
    from models.llm.base import Message

    held = [llm._lease(("x",)) for _ in range(4)]
    timer = threading.Timer(0.3, lambda: [llm._release(c, ()) for c in held])
    timer.start()
    stream = llm.stream([Message("system", SYSTEM), Message("user", "Hi")])
    text = "".join(stream)
    m = stream.metrics
    assert text and m.first_token_at - m.started_at >= 0.3
    assert m.duration_s >= m.first_token_at - m.started_at


def test_priming_runs_as_jobs_of_the_models_scheduler(llm):
    # Its prompt evaluation is ordered with every other model job of the process, not on a
    # scheduler of its own that no other work waits behind.
    seen = []
    llm.scheduler.observe(seen.append)
    try:
        llm.prime(SYSTEM + " The library is on Birch Street.")
    finally:
        llm.scheduler.unobserve(seen.append)
    assert [j.stage for j in seen].count("llm") >= 1, seen
