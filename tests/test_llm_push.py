"""A call's reply pushed by the llama-batch engine: each piece handed over as it is sampled.

Real llama.cpp, real bundled SmolLM2 weights, greedy: a pushed reply is the same text as one
read a step at a time, its end comes once and last, and a cancel or a close ends it at once
with its sequence given back. Issue 59: no thread waits on a call's next token.
"""

from __future__ import annotations

import queue
import threading
import time

import pytest

from agent.call.jobs import CallJobs
from agent.call.messages import JobDone
from dialplan.options import LLMOptions
from models.llm.base import Message
from models.priority import Cancel, Priority, Ranked, cancel_on, priority
from models.registry import ModelCache
from tests.llm_asks import QUESTIONS, SYSTEM

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def llm():
    return ModelCache().llm(LLMOptions(backend="llama-batch", model="smollm2-135m",
                                       max_tokens=24, temperature=0.0, contexts=4))


class Pushed:
    """What a pushed reply handed over, and on which threads."""

    def __init__(self):
        self.pieces, self.ends, self.threads = [], [], set()
        self.over = threading.Event()

    def put(self, piece) -> None:
        assert not self.ends, "a piece after the end"
        self.pieces.append(piece)
        self.threads.add(threading.current_thread().name)

    def end(self, error) -> None:
        self.ends.append(error)
        self.over.set()

    @property
    def text(self) -> str:
        return "".join(p.text for p in self.pieces)


def messages(question: str) -> list[Message]:
    return [Message("system", SYSTEM), Message("user", question)]


def free_sequences(llm, within_s: float = 5.0) -> int:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        with llm._cond:
            if not any(s.busy for s in llm._seqs):
                return len(llm._seqs)
        time.sleep(0.01)
    return sum(not s.busy for s in llm._seqs)


def test_a_pushed_reply_is_the_stepped_reply_handed_over_by_the_engine_thread(llm):
    stepped = llm.stream(messages(QUESTIONS[0]))
    pulled = "".join(stepped)
    stream = llm.stream(messages(QUESTIONS[0]))
    assert stream.pushes
    got = Pushed()
    stream.push(got.put, got.end)
    assert got.over.wait(30)
    assert got.ends == [None]
    assert got.text == pulled and pulled.strip()
    assert got.threads == {"llm-batch"}  # no reader thread: the engine's own
    assert got.pieces[0].prompt_tokens == len(llm.prompt_tokens(messages(QUESTIONS[0])))
    for piece in got.pieces:  # the reader counts them in, as a step would
        stream.took(piece)
    stream.took(None)
    m = stream.metrics
    assert m.tokens == len(got.pieces) and m.first_token_at is not None
    assert m.cached_tokens > 0  # the stepped reply's prompt was still cached
    assert free_sequences(llm) == 4


def test_a_cancel_ends_a_pushed_reply_at_once_and_frees_its_sequence(llm):
    cancel = Cancel()
    with cancel_on(cancel):
        stream = llm.stream(messages("Tell me a long story about a lighthouse keeper."))
    got = Pushed()
    first = threading.Event()
    stream.push(lambda p: (got.put(p), first.set()), got.end)
    assert first.wait(30)
    t0 = time.monotonic()
    cancel.set()
    assert got.over.wait(2.0)
    assert time.monotonic() - t0 < 1.0
    n = len(got.pieces)
    time.sleep(0.3)
    assert got.ends == [None] and len(got.pieces) == n  # nothing after the end
    assert n < 24
    assert free_sequences(llm) == 4


def test_a_close_ends_it_once_and_a_reply_over_before_the_push_is_handed_over_whole(llm):
    stream = llm.stream(messages(QUESTIONS[1]))
    got = Pushed()
    stream.push(got.put, got.end)
    assert got.over.wait(30)
    stream.close()  # after its end: nothing more
    assert got.ends == [None]
    again = llm.stream(messages(QUESTIONS[1]))
    deadline = time.monotonic() + 30
    while not again._pieces.done and time.monotonic() < deadline:
        time.sleep(0.02)  # the engine decodes up to two pieces ahead with no one pushed to
    late = Pushed()
    again.push(late.put, late.end)
    assert late.over.wait(30) and late.ends == [None]
    assert late.text == got.text
    assert free_sequences(llm) == 4


def test_the_engine_reads_the_rank_the_loop_sets_not_the_turn(llm):
    rank = Ranked((Priority.SPECULATIVE, 5.0))
    with priority(rank):
        stream = llm.stream(messages(QUESTIONS[2]))
    gen = stream._pieces
    assert gen.rank() == (Priority.SPECULATIVE, 5.0)
    rank.value = (Priority.FIRST_AUDIO, 5.0)  # the loop, as the turn moves on
    assert gen.rank() == (Priority.FIRST_AUDIO, 5.0)
    got = Pushed()
    stream.push(got.put, got.end)
    assert got.over.wait(30)


def test_a_call_takes_a_pushed_reply_as_messages_in_order_end_last(llm):
    inbox: queue.SimpleQueue = queue.SimpleQueue()
    jobs = CallJobs(llm.scheduler, inbox.put)
    stream = llm.stream(messages(QUESTIONS[3]))
    seen: list = []
    jobs.feed(lambda put, end: stream.push(put, end), lambda f: seen.append(f.result()))
    assert jobs.busy
    while not seen or seen[-1] is not None:
        msg = inbox.get(timeout=30)
        assert isinstance(msg, JobDone)
        jobs.done(msg)
    assert not jobs.busy
    assert seen.count(None) == 1
    assert "".join(p.text for p in seen[:-1]).strip()
