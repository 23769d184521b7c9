"""The llama-batch backend: one llama.cpp context, a KV sequence per call, decoded in one batch.

Real llama.cpp, real bundled SmolLM2 weights. Greedy sampling, so a reply is the same whether
it is decoded alone or in one batch with three others.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace

import pytest

from dialplan.options import LLMOptions
from models.llm.base import Message, shared_prefix
from models.llm.llama_batch.engine import BACKGROUND_CHUNK
from models.priority import Cancel, Priority, cancel_on, priority
from models.registry import ModelCache
from models.scheduler import Scheduler
from tests.llm_asks import (
    QUESTIONS,
    SYSTEM,
    ask,
    ask_at_once,
    check_metrics_after_prime,
    replies_alone_and_at_once,
)

pytestmark = pytest.mark.model


@contextmanager
def slot_held(scheduler: Scheduler) -> Iterator[None]:
    """A job a caller waits on (first audio) holds the scheduler's slot for the block."""
    slot, release = threading.Event(), threading.Event()

    def hold() -> None:
        with scheduler.job("asr", priority=Priority.FIRST_AUDIO):
            slot.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    assert slot.wait(10)
    try:
        yield
    finally:
        release.set()
        holder.join(10)


@pytest.fixture(scope="module")
def llm():
    return ModelCache().llm(LLMOptions(backend="llama-batch", model="smollm2-135m",
                                       max_tokens=24, temperature=0.0, contexts=4))


def test_batched_replies_equal_single_replies_in_fewer_steps(llm):
    jobs = []
    single, batched = replies_alone_and_at_once(
        llm, between=lambda: jobs.append(llm.scheduler.stats().jobs))
    steps = llm.scheduler.stats().jobs - jobs[0]
    assert all(single[q].strip() for q in QUESTIONS)
    assert batched == single
    # One scheduler job per batched step: the four replies' tokens were decoded together
    # (one reply at a time would take a step per token, and one per prompt).
    tokens = sum(llm.count_tokens(t) for t in single.values())
    assert steps < tokens * 0.6, (steps, tokens)


def test_a_step_feeds_its_sequences_in_ascending_order_whatever_their_urgency(llm, monkeypatch):
    """llama.cpp cuts a batch into a pass over the weights per run of ascending sequence ids."""
    lc, batches = llm._lc, []
    decode = lc.llama_decode

    def recorded(ctx, batch):
        batches.append([batch.seq_id[i][0] for i in range(batch.n_tokens)])
        return decode(ctx, batch)

    monkeypatch.setattr(lc, "llama_decode", recorded)
    streams = []
    with slot_held(llm.scheduler):  # all four requests are in before the first step
        for q in QUESTIONS:
            streams.append(llm.stream([Message("system", SYSTEM), Message("user", q)]))

    def read(i: int) -> None:
        # Each later request is more urgent: urgency order is the reverse of arrival (and of
        # the sequences the requests got: the lowest free one first).
        with priority((Priority.FIRST_AUDIO, -float(i))):
            "".join(streams[i])

    readers = [threading.Thread(target=read, args=(i,)) for i in range(len(streams))]
    for t in readers:
        t.start()
    for t in readers:
        t.join(60)
    together = [b for b in batches if len(set(b)) == len(QUESTIONS)]
    assert together, batches  # some steps held all four replies
    assert all(b == sorted(b) for b in batches), [b for b in batches if b != sorted(b)][:3]


def test_metrics_and_prompt_cache(llm):
    check_metrics_after_prime(llm, max_tokens=24)


def test_a_call_finds_its_own_history_cached(llm):
    history = [Message("system", SYSTEM), Message("user", "When do you open?")]
    first = llm.stream(history)
    reply = "".join(first)
    ask(llm, "Do you have audiobooks?")  # another call's turn in between
    second = llm.stream(history + [Message("assistant", reply.strip()),
                                   Message("user", "And on Sunday?")])
    "".join(second)
    assert second.metrics.cached_tokens >= first.metrics.prompt_tokens


def test_a_new_system_prompt_is_primed_into_every_sequence(llm):
    # Four first callers asking at once each find the prompt cached: one sequence evaluates
    # it and the others share its cells (copied at priming into empty ones, else at their
    # first step: a profile's prefix is long).
    system = SYSTEM + " " + " ".join(f"Shelf {i} holds the books of row {i}." for i in range(30))
    llm.prime(system)
    metrics = ask_at_once(llm, system)
    assert len(metrics) == 4
    assert all(m.cached_tokens >= 200 for m in metrics.values()), metrics


def test_a_second_caller_of_a_long_prefix_starts_from_the_sequence_that_holds_it(llm):
    # A profile's prefix (persona, every fact, tools) is read once: a second call of the same
    # profile, while the first holds the one sequence primed with it, copies that cache.
    system = SYSTEM + " " + " ".join(f"Fact {i}: room {i} is on floor {i % 3}." for i in range(40))
    llm.prime(system, spread=False)
    first = llm.stream([Message("system", system), Message("user", "Tell me a story.")])
    next(iter(first))  # its sequence stays leased
    try:
        second = llm.stream([Message("system", system), Message("user", "When do you open?")])
        assert "".join(second).strip()
        prefix = shared_prefix(llm.prompt_tokens([Message("system", system)]),
                               llm.prompt_tokens([Message("system", system),
                                                  Message("user", "x")]))
        assert second.metrics.cached_tokens >= prefix > 200
    finally:
        first.close()


def test_personas_sharing_a_model_keep_their_primed_prefixes(llm):
    # Three profiles on one model and four sequences: priming one never evicts another's,
    # and a turn of each finds its whole prefix cached.
    systems = [SYSTEM + f" You speak for business number {k}. " + " ".join(
        f"Fact {i}: desk {i} is open until {i + k} pm." for i in range(30)) for k in range(3)]
    for system in systems:
        llm.prime(system)
    for system in systems:
        prefix = shared_prefix(llm.prompt_tokens([Message("system", system)]),
                               llm.prompt_tokens([Message("system", system),
                                                  Message("user", "x")]))
        assert any(shared_prefix(seq.tokens, llm.prompt_tokens(
            [Message("system", system), Message("user", "x")])) >= prefix for seq in llm._seqs)
    for system in systems:
        stream = llm.stream([Message("system", system), Message("user", "When do you open?")])
        assert "".join(stream).strip()
        assert stream.metrics.prompt_tokens - stream.metrics.cached_tokens <= 16


def test_close_stops_the_reply_and_frees_the_sequence(llm):
    streams = [llm.stream([Message("system", SYSTEM), Message("user", "Tell me a story.")])
               for _ in range(4)]  # every sequence leased
    for stream in streams:
        next(iter(stream))
    t0 = time.monotonic()
    for stream in streams:
        stream.close()
    assert time.monotonic() - t0 < 2.0
    assert ask(llm, QUESTIONS[0]).strip()  # a sequence was given back


def test_a_step_waits_for_its_turn_at_the_reply_s_priority(llm):
    # The engine's steps are scheduler jobs: a reply that is only keeping ahead of playout
    # yields the CPU to a job a caller is waiting on (here a first-clause TTS job).
    order: list[str] = []

    def reply() -> None:
        with priority(Priority.PLAYOUT):
            stream = llm.stream([Message("system", SYSTEM), Message("user", "Hi")])
            for _ in stream:
                order.append("llm")
                break
            stream.close()

    def tts() -> None:
        with llm.scheduler.job("tts", priority=Priority.FIRST_AUDIO):
            order.append("tts")

    threads = [threading.Thread(target=reply), threading.Thread(target=tts)]
    with slot_held(llm.scheduler):
        threads[0].start()
        time.sleep(0.2)  # the engine's step is queued at PLAYOUT
        threads[1].start()
        time.sleep(0.2)
    for t in threads:
        t.join(30)
    assert order == ["tts", "llm"]


class _Gen:
    def __init__(self, level: int, feed: int, seq: int = 0):
        self.level, self.feed, self.wanting = level, [0] * feed, True
        self.seq = SimpleNamespace(id=seq)

    def rank(self):
        return (self.level, 0.0)


def test_who_rides_along_in_a_step(llm):
    # Only replies and prompts no less urgent than the step's own reply ride along: a caller's
    # first clause is not decoded beside a reply that still has audio queued (each sequence
    # more slows the step), nor beside a speculative prefill.
    first = _Gen(Priority.FIRST_AUDIO, 1)
    playout = _Gen(Priority.PLAYOUT, 1)
    spec_prefill = _Gen(Priority.SPECULATIVE, 20)
    first_prefill = _Gen(Priority.FIRST_AUDIO, 20)
    background = _Gen(Priority.BACKGROUND, 1)
    with llm._cond:  # the engine does not look meanwhile
        saved = llm._active
        try:
            llm._active = [background, spec_prefill, playout, first_prefill, first]
            assert set(llm._members()) == {first, first_prefill}
            llm._active = [background, playout]
            assert llm._members() == [playout]  # its own step once no caller waits
            llm._active = [background, spec_prefill]
            assert llm._members() == [spec_prefill]  # background decode waits
            llm._active = [background]
            assert llm._members() == [background]
        finally:
            llm._active = saved


def test_a_step_of_three_is_filled_to_a_whole_tile(llm):
    # llama.cpp's repacked kernels multiply 4 tokens at once: a less urgent reply rides for
    # free where the step would have had 3 tokens, or 2 in sequences apart (two passes).
    f0, f1, f2, f3 = (_Gen(Priority.FIRST_AUDIO, 1, i) for i in range(4))
    p0, p1, p2, p3 = (_Gen(Priority.PLAYOUT, 1, i) for i in range(4))
    prefill3 = _Gen(Priority.PLAYOUT, 20, 3)
    background2 = _Gen(Priority.BACKGROUND, 1, 2)
    with llm._cond:
        saved, saved_free = llm._active, llm._tile_free
        llm._tile_free = True  # as measured on a model whose fourth token is free
        try:
            llm._active = [f0, f1, p2, f3]
            assert llm._members() == [f0, f1, f3, p2]
            llm._active = [f0, p1, f2, p3]
            assert set(llm._members()) == {f0, f2, p1, p3}
            llm._active = [f0, f1, p2, p3]  # consecutive: one pass already, 2 tokens < 4
            assert llm._members() == [f0, f1]
            llm._active = [f0, f1, f2, prefill3]  # a prompt is no decode token
            assert llm._members() == [f0, f1, f2]
            llm._active = [f0, f1, background2, f3]  # background work never rides
            assert llm._members() == [f0, f1, f3]
            llm._active = [f0, p1, f2]  # one short of a tile: nothing gained
            assert llm._members() == [f0, f2]
            tail0 = _Gen(Priority.FIRST_AUDIO, 2, 0)  # a prompt's last 2 tokens
            llm._active = [tail0, p1, f3]  # 4 tokens, but sequences 0, 1, 3: two passes
            assert llm._members() == [tail0, f3]
            llm._tile_free = False  # measured: a tile costs more than a step of 3
            llm._active = [f0, f1, p2, f3]
            assert llm._members() == [f0, f1, f3]
            llm._active = [f0, p1, f2, p3]
            assert llm._members() == [f0, f2]
        finally:
            llm._active, llm._tile_free = saved, saved_free


def test_a_tile_is_filled_only_where_this_model_measured_it_free():
    from models.llm.tile import is_free

    def timed(short_ms: float, whole_ms: float):
        return lambda n: {3: short_ms, 4: whole_ms}[n] / 1000

    # Step medians of 3 and 4 sequences measured alone (2 threads, AMD EPYC):
    assert is_free(timed(79, 75))[0]  # Qwen 0.5B IQ4_NL: the fourth token is free
    assert is_free(timed(147, 157))[0]  # 1.5B IQ4_NL at a context's start: 7 %, in the slack
    assert not is_free(timed(152, 171))[0]  # the same on primed caches: 13 %
    assert not is_free(timed(145, 190))[0]  # 1.5B Q4_K_M: 31 % slower for the urgent replies
    steps = iter([0.100, 0.300, 0.100, 0.105, 0.500, 0.105])  # medians: an outlier each
    assert is_free(lambda n: next(steps), repeats=3) == (True, 0.100, 0.105)


def test_measuring_the_tile_leaves_every_cache_as_it_was(llm):
    from models.llm import tile

    llm.prime(SYSTEM)  # every sequence holds a cache (the first prime measured the tile too)
    question = "When do you open on Saturday?"
    before = ask(llm, question)
    with llm._ctx_lock, llm._cond:
        tokens = [list(seq.tokens) for seq in llm._seqs]
        tile.measure(llm._lc, llm._ctx, llm._mem, llm._batch, llm._seqs[:tile.TILE],
                     "smollm2-135m")
        assert [seq.tokens for seq in llm._seqs] == tokens
    assert ask(llm, question) == before  # greedy: the same reply from the same caches


def test_unknown_model_names_the_fix():
    from models.errors import ModelMissingError

    with pytest.raises(ModelMissingError, match="nope"):
        ModelCache().llm(LLMOptions(backend="llama-batch", model="nope"))


def test_words_prefilled_while_the_caller_speaks_are_cached_for_the_turn(llm):
    so_far = [Message("system", SYSTEM), Message("user", "Can I renew a book that is")]
    whole = [Message("system", SYSTEM), Message("user", "Can I renew a book that is late?")]
    words = shared_prefix(llm.prompt_tokens(so_far), llm.prompt_tokens(whole))
    assert llm.prefill(so_far, Cancel()) > 0
    stream = llm.stream(whole)
    assert "".join(stream).strip()
    # The turn read only what followed the words so far (and the template's closing tokens).
    assert stream.metrics.cached_tokens >= words
    assert stream.metrics.prompt_tokens - stream.metrics.cached_tokens <= 8


@pytest.fixture
def decodes(llm, monkeypatch) -> list[int]:
    """The tokens of each ``llama_decode`` the engine runs from here on."""
    sizes: list[int] = []
    decode = llm._lc.llama_decode

    def counting(ctx, batch):
        sizes.append(batch.n_tokens)
        return decode(ctx, batch)

    monkeypatch.setattr(llm._lc, "llama_decode", counting)
    return sizes


def test_background_prefills_share_one_short_step(llm, decodes):
    # A step is not preempted: background prefills of several calls take BACKGROUND_CHUNK
    # tokens in all per step, not each (three calls' words made 0.5-0.7 s steps).
    evaluated: list[int] = []

    def prefill(k: int) -> None:
        words = f"Caller {k} here, I would like to know when the branch on Elm Street opens"
        with priority(Priority.BACKGROUND):
            evaluated.append(llm.prefill([Message("system", SYSTEM), Message("user", words)],
                                         Cancel()))

    threads = [threading.Thread(target=prefill, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(evaluated) == 3 and min(evaluated) > BACKGROUND_CHUNK
    assert max(decodes) <= BACKGROUND_CHUNK
    assert sum(decodes) >= sum(evaluated)


def test_a_cancelled_reply_frees_its_sequence_without_a_step(llm, decodes):
    # A speculation the caller talked past: cancelled while its prefill waits behind a caller's
    # first-audio job, it is never evaluated, and its reader and sequence are free at once.
    cancel, ended = Cancel(), threading.Event()
    pieces: list[str] = []

    def reply() -> None:
        with priority(Priority.SPECULATIVE), cancel_on(cancel):
            stream = llm.stream([Message("system", SYSTEM),
                                 Message("user", "Which branch is open on Sunday afternoons?")])
        pieces.extend(stream)
        ended.set()

    reader = threading.Thread(target=reply)
    with slot_held(llm.scheduler):
        reader.start()
        time.sleep(0.2)
        assert any(s.busy for s in llm._seqs)  # leased, its prefill queued behind the job
        cancel.set()
        assert ended.wait(1.0)  # while the slot is still held
        assert pieces == [] and not any(s.busy for s in llm._seqs)
    reader.join(10)
    time.sleep(0.2)
    assert decodes == []  # nothing was evaluated for it
    # A reply started after its turn was cancelled never takes a sequence.
    with cancel_on(cancel):
        assert list(llm.stream([Message("system", SYSTEM), Message("user", "Hi")])) == []


CANCEL_WITHIN_S = 0.05
"""A cancel ends an engine wait this soon (a context switch; no polling period): the best of
TRIES, as a loaded machine may not run the woken thread at once."""
TRIES = 3


@pytest.fixture
def cond_waits(llm, monkeypatch) -> list[float | None]:
    """The timeout of every wait on the engine's condition from here on (None: untimed)."""
    timeouts: list[float | None] = []
    wait = llm._cond.wait

    def recorded(timeout=None):
        timeouts.append(timeout)
        return wait(timeout)

    monkeypatch.setattr(llm._cond, "wait", recorded)
    return timeouts


def _ended_after(run, started) -> list[float]:
    """Seconds from ``cancel.set()`` to ``run(cancel)``'s return (its thread), TRIES times.

    Each try's cancel is set once ``started()`` and a while into its wait.
    """
    took = []
    for _ in range(TRIES):
        cancel, ended = Cancel(), []

        def go(cancel=cancel, ended=ended) -> None:
            run(cancel)
            ended.append(time.perf_counter())

        thread = threading.Thread(target=go)
        thread.start()
        deadline = time.monotonic() + 10
        while not started():
            assert time.monotonic() < deadline and thread.is_alive()
            time.sleep(0.01)
        time.sleep(0.1)  # well into its wait
        assert thread.is_alive() and not ended
        at = time.perf_counter()
        cancel.set()
        thread.join(5)
        assert ended, "still waiting 5 s after its cancel"
        took.append(ended[0] - at)
    return took


def test_a_cancel_ends_each_engine_wait_at_once(llm, decodes, cond_waits):
    # Each wait a reply can be in: its next token (its prompt queued behind a caller's job),
    # a prefill's end, a sequence (all four in live replies). The cancel wakes it: every
    # wait on the engine's condition is untimed, and each ends within a context switch.
    messages = [Message("system", SYSTEM), Message("user", "Which branch opens on Sunday?")]
    took: dict[str, list[float]] = {}

    def read(cancel: Cancel) -> None:
        with priority(Priority.SPECULATIVE), cancel_on(cancel):
            stream = llm.stream(messages)
        assert list(stream) == []

    def prefill(cancel: Cancel) -> None:
        with priority(Priority.BACKGROUND):
            assert llm.prefill(messages, cancel) == 0

    leasing: list[bool] = []

    def lease(cancel: Cancel) -> None:
        with cancel_on(cancel):
            leasing.append(True)
            stream = llm.stream(messages)
        leasing.clear()
        assert list(stream) == []

    with slot_held(llm.scheduler):
        took["next token"] = _ended_after(read, lambda: any(s.busy for s in llm._seqs))
        took["prefill"] = _ended_after(prefill, lambda: any(s.busy for s in llm._seqs))
    assert decodes == []  # nothing was evaluated for either
    live = [llm.stream([Message("system", SYSTEM), Message("user", q)]) for q in QUESTIONS]
    try:
        readers = [iter(stream) for stream in live]
        for reader in readers:
            next(reader)  # each holds its sequence, its reply going on
        took["a sequence"] = _ended_after(lease, lambda: bool(leasing))
    finally:
        for stream in live:
            stream.close()
    print("cancel to end of wait:",
          {k: [f"{v * 1000:.2f} ms" for v in vs] for k, vs in took.items()})
    assert max(min(vs) for vs in took.values()) < CANCEL_WITHIN_S, took
    assert cond_waits and set(cond_waits) == {None}, set(cond_waits)
