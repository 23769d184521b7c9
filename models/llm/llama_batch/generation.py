"""One streamed reply of the llama-batch engine (:mod:`.engine`) on its sequence.

The engine thread steps every wanting reply. A pushed reply (a call's turn, :meth:`push`) is
handed each piece as it is sampled and its end once, on the engine's thread: its call's loop
gets them as messages, and nothing waits for them. Otherwise the engine appends what it
samples and a reader (a one-off request's job) takes the pieces; both sides hold the engine's
condition (``owner._cond``), which the turn's cancel notifies too (a reply watches it): a
reader waits for its next piece untimed. This class is the engine's own half, split off to
keep each module one concern. It sees the engine only as :class:`Engine`, so it does not
import :mod:`.engine` (which imports this module).
"""

from __future__ import annotations

import codecs
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from models.llm.base import End, Piece, Put, shared_prefix
from models.llm.grammar import GrammarPick
from models.priority import Cancellable, current_priority, rank_of

if TYPE_CHECKING:
    from dialplan.options import LLMOptions
    from models.llm.llama_vocab import ChatVocab

AHEAD = 2
"""Tokens a reply is decoded ahead of its reader."""


class Engine(Protocol):
    """What a reply uses of its engine, :class:`~.engine.BatchedLlamaLLM` (same package)."""

    options: LLMOptions
    vocab: ChatVocab
    _lc: Any
    """The ``llama_cpp`` module (its low-level sampler API)."""
    _cond: threading.Condition
    """Guards every reply and sequence of the engine."""

    def _finish(self, gen: Generation) -> None:
        """With ``_cond`` held: ``gen`` ended, its sequence is free (after its step)."""

    def _settle(self) -> None:
        """With ``_cond`` held: pushed replies that failed or were cancelled end now."""

    def _wake(self) -> None:
        """Notify ``_cond`` (a cancel was set): takes it briefly, re-entrant on its holder."""


@dataclass(eq=False)
class Seq:
    """One KV sequence and the tokens it holds."""

    id: int
    tokens: list[int] = field(default_factory=list)
    busy: bool = False
    gen: Generation | None = None


def worth(seq: Seq, prompt: list[int], seqs: list[Seq]) -> int:
    """How good ``seq`` is for ``prompt``: what it holds of it, less what reusing it loses.

    What it loses is what no other sequence of ``seqs`` holds too: a call's history, or the
    only copy of a profile's prefix (with several personas on one model, the one sequence
    primed with a profile's is kept while a copy of another's is free). A prompt can start
    from another sequence's cache (the engine's ``_copy_prefix``), a prefix evicted from
    every one cannot.
    """
    kept = max([shared_prefix(seq.tokens, prompt)] + [
        shared_prefix(seq.tokens, o.tokens) for o in seqs if o is not seq])
    return shared_prefix(seq.tokens, prompt) - (len(seq.tokens) - kept)


class Generation:
    """One streamed reply on a leased sequence; closing it (or running out) frees it."""

    def __init__(self, owner: Engine, seq: Seq, prompt: list[int],
                 prefill_only: bool = False, cancel: Cancellable | None = None,
                 max_tokens: int | None = None, grammar: GrammarPick | None = None,
                 alone: Callable[[], bool] | None = None):
        lc = owner._lc
        o = owner.options
        self.owner = owner
        self.seq = seq
        self.prompt = prompt
        self.prefill_only = prefill_only
        """Evaluates the prompt and ends: nothing is sampled."""
        # A wholly cached prompt still feeds its last token: its logits start the reply.
        self.pos = min(shared_prefix(seq.tokens, prompt), len(prompt) - (0 if prefill_only else 1))
        self.cached = self.pos
        self.feed = list(prompt[self.pos:])
        self.fresh = True
        self.taken = 0
        self.stepping = False
        """In the step being decoded (the engine frees it after, if it was closed)."""
        self.out: deque[Piece] = deque()
        self.generated = 0
        self.done = not self.feed  # a prefill already cached
        self.error: Exception | None = None
        self.priority = current_priority()
        self.cancel = cancel
        """The turn's: once set, no step takes this reply and its reader stops."""
        self._unwatch = None if cancel is None else cancel.watch(owner._wake)
        """Its cancel wakes whoever waits on ``_cond`` for it (its reader, a prefill)."""
        self.max_tokens = o.max_tokens if max_tokens is None else max_tokens
        self.alone = alone
        """True while no caller could wait on its steps: a background prompt in full steps."""
        self.put: Put | None = None
        """Where the engine hands each piece (a pushed reply), else ``out`` holds them."""
        self._end: End | None = None
        self._utf8 = codecs.getincrementaldecoder("utf-8")("replace")
        chain = lc.llama_sampler_chain_init(lc.llama_sampler_chain_default_params())
        self.grammar: GrammarPick | None = grammar
        """A one-off JSON reply (``complete``): greedy, held to its grammar."""
        if o.temperature <= 0 or grammar is not None:
            lc.llama_sampler_chain_add(chain, lc.llama_sampler_init_greedy())
        else:  # llama-cpp-python's chat defaults, so both backends sample alike
            lc.llama_sampler_chain_add(chain, lc.llama_sampler_init_top_k(40))
            lc.llama_sampler_chain_add(chain, lc.llama_sampler_init_top_p(0.95, 1))
            lc.llama_sampler_chain_add(chain, lc.llama_sampler_init_min_p(0.05, 1))
            lc.llama_sampler_chain_add(chain, lc.llama_sampler_init_temp(o.temperature))
            lc.llama_sampler_chain_add(chain, lc.llama_sampler_init_dist(o.seed))
        self.sampler = chain

    @property
    def wanting(self) -> bool:
        """It takes part in the next step: decoded ahead of its reader by up to ``AHEAD``.

        A reader taking its token would otherwise miss the next step: with four replies in
        flight, most steps ran one sequence.
        """
        return (not self.done and self.error is None and not self.cancelled
                and (len(self.out) < AHEAD or self.put is not None))

    @property
    def cancelled(self) -> bool:
        return self.cancel is not None and self.cancel.is_set()

    def rank(self) -> tuple[int, float]:
        return rank_of(self.priority)

    def pick(self, ctx: Any, index: int) -> int:
        """Engine side: the next token from the step's logits at ``index``."""
        lc = self.owner._lc
        if self.grammar is None:
            return lc.llama_sampler_sample(self.sampler, ctx, index)
        logits = np.ctypeslib.as_array(lc.llama_get_logits_ith(ctx, index),
                                       shape=(self.grammar.n_vocab,))
        return self.grammar.choose(logits)

    def free(self) -> None:
        """Engine side, once the reply is off its sequence: its samplers' memory, its watch."""
        if self._unwatch is not None:
            self._unwatch()
        self.owner._lc.llama_sampler_free(self.sampler)
        if self.grammar is not None:
            self.grammar.free()

    def sampled(self, token: int) -> None:
        """Engine side, ``_cond`` held: ``token`` follows the sequence."""
        self.generated += 1
        if self.owner.vocab.is_end(token):
            self.done = True
            return
        text = self._utf8.decode(self.owner.vocab.piece(token))
        piece = Piece(text, prompt_tokens=len(self.prompt),
                      cached_tokens=self.cached) if self.generated == 1 else Piece(text)
        if self.put is not None:
            self.put(piece)
        else:
            self.out.append(piece)
        self.feed = [token]
        if self.generated >= self.max_tokens:
            self.done = True

    def push(self, put: Put, end: End) -> None:
        """From now on each piece goes to ``put`` as it is sampled, and the end to ``end``.

        Pieces sampled before this are handed over first; a reply already over ends at once.
        """
        with self.owner._cond:
            self.put, self._end = put, end
            while self.out:
                put(self.out.popleft())
            if self.done:
                self.owner._finish(self)
            self.owner._settle()
            self.owner._cond.notify_all()  # it may be stepped further now

    def ended(self) -> None:
        """Engine side, ``_cond`` held: a pushed reply's end goes to its reader, once."""
        end, self._end = self._end, None
        if end is not None:
            error, self.error = self.error, None
            end(error)

    def __iter__(self) -> Iterator[Piece]:
        return self

    def __next__(self) -> Piece:
        cond = self.owner._cond
        with cond:
            self.priority = current_priority()  # the reader's urgency now
            while not self.out:
                if self.error is not None:
                    error, self.error = self.error, None
                    self._close_locked()
                    raise error
                if self.done or self.cancelled:
                    self._close_locked()
                    raise StopIteration
                cond.wait()  # a piece, the end, an error or the cancel notifies
            piece = self.out.popleft()
            cond.notify_all()  # the engine may decode this reply further now
            return piece

    def close(self) -> None:
        """Barge-in or done: the sequence keeps what it evaluated for the call's next turn."""
        with self.owner._cond:
            self._close_locked()

    def _close_locked(self) -> None:
        self.owner._finish(self)
