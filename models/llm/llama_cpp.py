"""llama.cpp LLM backend (llama-cpp-python), streamed, chat template taken from the GGUF.

One model per process, with ``llm.contexts`` llama.cpp contexts over it (one ``Llama`` each,
the GGUF memory-mapped once). llama-cpp-python keeps a context's evaluated tokens and re-uses
the longest common prefix on its next request, so the system prompt and a call's history are
evaluated once, and the first token comes much sooner than with re-evaluation (bench llm).
A request takes the free context whose cached conversation shares the most
messages with it (a call's next turn finds its own history), preferring, among equals, the one
holding the least (a primed or idle context before another call's history). Each step of the
stream is a job of the process scheduler (see :class:`~models.llm.base.LLMStream`), so
concurrent calls decode in turn, token by token.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dialplan.options import LLMOptions
from models import catalog
from models.errors import ModelMissingError
from models.llm.base import LLM, LLMStream, Message, Piece, shared_prefix
from models.llm.grammar import GrammarPick
from models.llm.shape import JsonObject
from models.priority import Priority, priority
from models.scheduler import Scheduler


@dataclass(eq=False)
class _Context:
    """One llama.cpp context and the conversation its KV cache holds."""

    llm: Any
    holds: tuple[Message, ...] = ()
    busy: bool = False
    used_at: float = field(default_factory=time.monotonic)


class LlamaCppLLM(LLM):
    """A GGUF chat model run by llama.cpp on the CPU."""

    constrains = True

    def __init__(self, options: LLMOptions, scheduler: Scheduler | None = None):
        self.scheduler = scheduler
        try:
            from llama_cpp import Llama
        except ImportError as e:
            raise ModelMissingError(
                "llama-cpp-python missing: pip install llama-cpp-python==0.3.36"
            ) from e
        self.options = options
        self.model_name = options.model
        path = catalog.resolve(options.model, "llm")
        if Path(path).is_dir():
            raise ModelMissingError(f"llm.model must be a .gguf file, got directory {path}")

        def load() -> Any:
            return Llama(model_path=str(path), n_ctx=options.n_ctx, n_threads=options.threads,
                         n_threads_batch=options.threads, seed=options.seed, verbose=False)

        self._contexts = [_Context(load()) for _ in range(max(1, options.contexts))]
        self._llm = self._contexts[0].llm  # tokenizer and template (the same in every context)
        self._free = threading.Condition()
        self._primed: set[str] = set()

    def prime(self, system_prompt: str, spread: bool = True) -> None:
        """Fill contexts' KV caches with the system prompt so first turns start fast.

        One token is generated; the cache keeps the prompt's prefix for the next request.
        A primed first turn's first token comes several times sooner than a cold one's. The
        first time a prompt is primed (the agent's warm-up), every free context gets it, so
        four callers asking at once all start warm, and each context's first evaluation
        commits its buffers at start rather than in a call. Later a call's priming needs one.
        """
        msgs = tuple(self.fit([Message("system", system_prompt), Message("user", "Hello")]))
        with self._free:
            first = spread and system_prompt not in self._primed
            self._primed.add(system_prompt)
        streams = []
        with priority(Priority.BACKGROUND):
            try:
                for _ in range(len(self._contexts) if first else 1):
                    # Held until all are primed, so each lease finds another context; only
                    # the first waits for one (a call may hold them all).
                    ctx = self._lease(msgs, wait=not streams)
                    if ctx is None:
                        break
                    stream = LLMStream(self.model_name, _Generation(self, ctx, msgs),
                                       self.scheduler)
                    streams.append(stream)
                    for _ in stream:
                        break
            finally:
                for stream in streams:
                    stream.close()  # gives the contexts back now

    def count_tokens(self, text: str) -> int:
        return len(self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def complete(self, messages: list[Message], max_tokens: int,
                 shape: JsonObject | None = None,
                 alone: Callable[[], bool] | None = None) -> LLMStream:
        """A one-off greedy reply, held to ``shape``'s grammar when given (:mod:`.grammar`).

        Each step a job of the scheduler at the caller's priority; the prompt is one job.
        """
        started = time.monotonic()
        msgs = tuple(self.fit(messages))
        ctx = self._lease(msgs)
        pick = None if shape is None else GrammarPick(
            _llama_cpp(), self._llm._model.vocab, shape.gbnf())
        gen = _Generation(self, ctx, msgs, max_tokens=max_tokens, pick=pick)
        return LLMStream(self.model_name, gen, self.scheduler, started_at=started)

    def _stream_impl(self, messages: list[Message]) -> Iterator[Piece]:
        # Taken now, not on the first step: the steps run inside scheduler slots, and waiting
        # for a context while holding a slot would stall every other call.
        msgs = tuple(self.fit(messages))
        return _Generation(self, self._lease(msgs), msgs)

    def _lease(self, msgs: tuple[Message, ...], wait: bool = True) -> _Context | None:
        with self._free:
            while True:
                free = [c for c in self._contexts if not c.busy]
                if free:
                    ctx = max(free, key=lambda c: (shared_prefix(c.holds, msgs), -len(c.holds),
                                                   -c.used_at))
                    ctx.busy = True
                    return ctx
                if not wait:
                    return None
                self._free.wait()

    def _release(self, ctx: _Context, holds: tuple[Message, ...]) -> None:
        with self._free:
            ctx.holds, ctx.busy, ctx.used_at = holds, False, time.monotonic()
            self._free.notify()


class _Generation:
    """One streamed reply on a leased context; closing it (or running out) gives it back."""

    def __init__(self, owner: LlamaCppLLM, ctx: _Context, msgs: tuple[Message, ...],
                 max_tokens: int | None = None, pick: GrammarPick | None = None):
        self._owner = owner
        self._max_tokens = owner.options.max_tokens if max_tokens is None else max_tokens
        self._pick = pick
        """A one-off JSON reply: greedy, held to its grammar."""
        self._ctx = ctx
        self._msgs = msgs
        self._text = ""
        self._done = False
        self._it = self._generate()

    def __iter__(self) -> Iterator[Piece]:
        return self

    def __next__(self) -> Piece:
        if self._done:
            raise StopIteration
        try:
            return next(self._it)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if not self._done:
            self._done = True
            self._it.close()
            text = self._text.strip()
            reply = (Message("assistant", text),) if text else ()
            self._owner._release(self._ctx, self._msgs + reply)
            if self._pick is not None:
                self._pick.free()

    def _generate(self) -> Iterator[Piece]:
        o = self._owner.options
        llm = self._ctx.llm
        extra: dict[str, Any] = {"temperature": o.temperature}
        if self._pick is not None:
            from llama_cpp import LogitsProcessorList

            extra = {"logits_processor": LogitsProcessorList([self._pick.processor]),
                     "temperature": 0.0}
        chunks = llm.create_chat_completion(
            messages=[{"role": m.role, "content": m.content} for m in self._msgs],
            stream=True, max_tokens=self._max_tokens, seed=o.seed, **extra)
        evaluated_before = _prompt_tokens_evaluated(llm)
        first = True
        try:
            for chunk in chunks:
                delta = chunk["choices"][0].get("delta", {}).get("content")
                if not delta:
                    continue
                self._text += delta
                if first:
                    first = False
                    # Prompt tokens actually evaluated vs. reused from the KV cache.
                    evaluated = _prompt_tokens_evaluated(llm) - evaluated_before
                    prompt = max(llm.n_tokens - 1, evaluated)
                    yield Piece(delta, prompt_tokens=prompt, cached_tokens=prompt - evaluated)
                else:
                    yield Piece(delta)
        finally:
            close = getattr(chunks, "close", None)
            if close:
                close()


def _llama_cpp() -> Any:
    import llama_cpp

    return llama_cpp


def _prompt_tokens_evaluated(llm: Any) -> int:
    import llama_cpp

    return int(llama_cpp.llama_perf_context(llm._ctx.ctx).n_p_eval)
