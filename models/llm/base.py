"""The LLM stage interface: chat messages in, a stream of text pieces out, timing recorded.

``LLM.stream`` returns an :class:`LLMStream`. Where it :attr:`~LLMStream.pushes` (an
engine thread decodes every call's replies: llama-batch), the engine hands each piece over
as it decodes it (:meth:`LLMStream.push`) and a call's loop counts it in
(:meth:`LLMStream.took`): no thread waits on a reply's next token. Elsewhere the loop takes
its text one piece at a time with :meth:`LLMStream.step`, each step a job of the process
scheduler; iterating it does the same in one thread. Once exhausted (or closed) its
``metrics`` hold time to first token and token count.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from models.llm.shape import JsonObject
from models.metrics import LLMMetrics
from models.priority import Cancellable
from models.scheduled import Scheduled
from models.scheduler import Scheduler


@dataclass(frozen=True)
class Message:
    """One chat message."""

    role: str
    content: str


@dataclass(frozen=True)
class Piece:
    """One generated token's text, as a backend yields it."""

    text: str
    prompt_tokens: int = 0
    cached_tokens: int = 0


Put = Callable[[Piece], None]
"""Takes a pushed piece: it only posts it (it runs on the engine's thread, the engine's lock
held)."""
End = Callable[[BaseException | None], None]
"""Takes the end of a pushed reply, once: None, or the error that ended it."""


class NoPieces:
    """A reply that never started (cancelled before a sequence was free): no piece, the end."""

    def __iter__(self) -> Iterator[Piece]:
        return self

    def __next__(self) -> Piece:
        raise StopIteration

    def push(self, put: Put, end: End) -> None:
        end(None)


class LLMStream:
    """An iterator of text pieces that records :class:`~models.metrics.LLMMetrics`."""

    def __init__(self, model: str, pieces: Iterator[Piece], scheduler: Scheduler | None = None,
                 started_at: float | None = None):
        self._model = model
        self._pieces = iter(pieces)
        self._scheduler = scheduler
        """Each step is a job of it; None: an engine that schedules its own steps, or a server."""
        self._started = time.monotonic() if started_at is None else started_at
        self._first: float | None = None
        self._tokens = 0
        self._prompt = self._cached = 0
        self._ended: float | None = None
        self.text = ""

    def step(self) -> str | None:
        """The next piece of text, or None once the reply is over (it blocks until then).

        One scheduler job per step (the prompt, then each decode step), so the slot is free
        between tokens for work a caller is waiting on.
        """
        if self._ended is not None:
            return None
        try:
            if self._scheduler is not None:
                with self._scheduler.job("llm"):
                    piece = next(self._pieces, None)
            else:
                piece = next(self._pieces, None)
        except BaseException:
            self._ended = time.monotonic()
            raise
        return self.took(piece)

    @property
    def pushes(self) -> bool:
        """Its pieces can be pushed (:meth:`push`) rather than stepped."""
        return callable(getattr(self._pieces, "push", None))

    def push(self, put: Put, end: End) -> None:
        """Have the engine hand over each piece as it decodes it, then the end, once.

        Both are called on the engine's thread (or the closer's, the canceller's) with the
        engine's lock held: they must only post. The reader counts each piece in with
        :meth:`took`, and the end with ``took(None)``.
        """
        self._pieces.push(put, end)

    @property
    def ended(self) -> bool:
        return self._ended is not None

    def took(self, piece: Piece | None) -> str | None:
        """A piece read (None: the reply is over), counted into the metrics; its text."""
        if piece is None:
            if self._ended is None:
                self._ended = time.monotonic()
            return None
        if self._first is None:
            self._first = time.monotonic()
            self._prompt, self._cached = piece.prompt_tokens, piece.cached_tokens
        self._tokens += 1
        self.text += piece.text
        return piece.text

    def __iter__(self) -> Iterator[str]:
        while (text := self.step()) is not None:
            yield text

    def close(self) -> None:
        """Stop generating (barge-in); metrics cover what was produced."""
        close = getattr(self._pieces, "close", None)
        if close:
            close()
        if self._ended is None:
            self._ended = time.monotonic()

    @property
    def metrics(self) -> LLMMetrics:
        return LLMMetrics(
            model=self._model,
            started_at=self._started,
            ended_at=self._ended if self._ended is not None else time.monotonic(),
            first_token_at=self._first,
            tokens=self._tokens,
            prompt_tokens=self._prompt,
            cached_tokens=self._cached,
        )


def shared_prefix(a: Sequence, b: Sequence) -> int:
    """How many leading items two sequences (tokens, chat messages) share."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


CHARS_PER_TOKEN = 3
"""For trimming history without a tokenizer: English runs ~4 bytes per token; 3 errs safe."""
CONTEXT_MARGIN = 32
"""Tokens kept free besides ``max_tokens`` for the chat template's own tokens."""


class LLM(Scheduled, ABC):
    """A chat model that streams its reply.

    Backends set ``options`` (their :class:`~dialplan.options.LLMOptions`): ``n_ctx`` and
    ``max_tokens`` bound the history :meth:`fit` keeps.
    """

    model_name: str = ""
    options: Any = None
    scheduled: bool = True
    """Each step is a job of the process scheduler (False: the backend batches its own steps)."""
    can_prefill: bool = False
    """:meth:`prefill` evaluates (else the caller's words so far are not even transcribed)."""
    constrains: bool = False
    """:meth:`complete` holds its reply to the shape asked for (a grammar); else the reply is
    free text that the caller parses as best it can."""
    weighs: bool = False
    """:meth:`weigh` reads the model's odds of each option (else it returns None)."""
    continues: bool = False
    """:meth:`complete` takes an ``opening``: the reply's first words, given, not generated."""
    reads_in_short_steps: bool = False
    """A background request's prompt is read a few tokens a step, so a caller's work waits at
    most one short step for it (else the whole prompt is one job)."""

    def stream(self, messages: list[Message]) -> LLMStream:
        """Start generating a reply to ``messages`` (system prompt first)."""
        # Stamped before the backend leases a context: a wait for one (another call's reply,
        # this call's priming) is part of the LLM's time, as it is of the caller's.
        started = time.monotonic()
        return LLMStream(self.model_name, self._stream_impl(messages),
                         self.scheduler if self.scheduled else None, started_at=started)

    def complete(self, messages: list[Message], max_tokens: int,
                 shape: JsonObject | None = None,
                 alone: Callable[[], bool] | None = None, opening: str = "") -> LLMStream:
        """A one-off reply of up to ``max_tokens``, greedy, as JSON of ``shape`` if given.

        Not a call's turn: no history is kept for it. Backends that can constrain sampling
        (:attr:`constrains`) override this; the default is a turn's reply (``stream``, the
        options' ``max_tokens`` and temperature), free text for the caller to parse.
        ``alone()`` True: nothing else will want the CPU soon (no call is up), so a background
        request need not read its prompt in short steps (:attr:`reads_in_short_steps`).
        ``opening``: where the backend :attr:`continues`, the reply starts with this text and
        the model writes what follows it (the stream yields only that); elsewhere it is ignored.
        """
        return self.stream(messages)

    def weigh(self, messages: list[Message], options: list[str]) -> dict[str, float] | None:
        """How likely the model is to begin its reply to ``messages`` with each option.

        The chance of each option's first token, spelt as written, capitalised or after a
        space (a token two options share counts for neither); one prompt, one step, nothing
        generated. None where the backend cannot (:attr:`weighs`).
        """
        return None

    def count_tokens(self, text: str) -> int:
        """Tokens in ``text``; an estimate from its UTF-8 length unless a backend can count."""
        return -(-len(text.encode("utf-8")) // CHARS_PER_TOKEN)

    def fit(self, messages: list[Message]) -> list[Message]:
        """Drop the oldest exchanges (never the system prompt or the last message) to fit n_ctx."""
        budget = self.options.n_ctx - self.options.max_tokens - CONTEXT_MARGIN
        msgs = list(messages)
        while len(msgs) > 2 and sum(self.count_tokens(m.content) + 8 for m in msgs) > budget:
            del msgs[1]
        return msgs

    def prime(self, system_prompt: str, spread: bool = True) -> None:  # noqa: B027 - optional
        """Evaluate a system prompt ahead of the first turn (backends with a KV cache).

        ``spread``: the first time, into every free context (the main prompt); False: into
        one (a second prefix some turns use, which must not push the main one out).
        """

    def prefill(self, messages: list[Message], cancel: Cancellable) -> int:
        """Evaluate ``messages`` up to the last one's words ahead of the request (no reply).

        The caller's words so far, while they still speak. Returns the tokens evaluated;
        0 where the backend cannot (the default) or ``cancel`` was set first.
        """
        return 0

    @abstractmethod
    def _stream_impl(self, messages: list[Message]) -> Iterator[Piece]:
        """Yield the reply one token at a time."""
