"""Questions put to an LLM backend by four callers at once (the llama.cpp backends' tests)."""

from __future__ import annotations

import threading

from models.llm.base import Message

SYSTEM = "You are the phone assistant of a public library. Answer in one short sentence."
QUESTIONS = ("When do you open?", "Can I renew a book?", "Where is the library?",
             "Do you have audiobooks?")


def ask(llm, question: str) -> str:
    """The reply to ``question`` under :data:`SYSTEM`."""
    return "".join(llm.stream([Message("system", SYSTEM), Message("user", question)]))


def replies_alone_and_at_once(llm, between=lambda: None) -> tuple[dict, dict]:
    """Each of :data:`QUESTIONS` asked alone, then all four at once; question -> reply, twice.

    ``between`` runs after the single replies (e.g. to read a counter).
    """
    single = {q: ask(llm, q) for q in QUESTIONS}
    between()
    batched: dict[str, str] = {}
    threads = [threading.Thread(target=lambda q=q: batched.__setitem__(q, ask(llm, q)))
               for q in QUESTIONS]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return single, batched


def ask_at_once(llm, system: str) -> dict:
    """Each of :data:`QUESTIONS` on its own thread at once; question -> its stream's metrics."""
    metrics = {}

    def ask(q: str) -> None:
        stream = llm.stream([Message("system", system), Message("user", q)])
        "".join(stream)
        metrics[q] = stream.metrics

    threads = [threading.Thread(target=ask, args=(q,)) for q in QUESTIONS]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return metrics


def check_metrics_after_prime(llm, max_tokens: int) -> None:
    """A reply's metrics add up, and it reused the system prompt that prime() evaluated."""
    llm.prime(SYSTEM)
    stream = llm.stream([Message("system", SYSTEM), Message("user", "Are you open on Sunday?")])
    text = "".join(stream)
    m = stream.metrics
    assert text.strip()
    assert 0 < m.first_token_at - m.started_at < 10
    assert 1 <= m.tokens <= max_tokens
    assert m.prompt_tokens > m.cached_tokens >= 20
