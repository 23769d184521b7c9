"""Questions put to an LLM backend by four callers at once (the llama.cpp backends' tests)."""

from __future__ import annotations

import threading

from models.llm.base import Message

SYSTEM = "You are the phone assistant of a public library. Answer in one short sentence."
QUESTIONS = ("When do you open?", "Can I renew a book?", "Where is the library?",
             "Do you have audiobooks?")


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
