"""llama.cpp's own server engine, in-process (xllamacpp): calls decode together in one batch.

llama-cpp-python's ``Llama`` runs one sequence: with 4 calls talking, their decode steps run
one after another, each paying for a full pass over the weights. llama.cpp's server engine keeps
``llm.contexts`` slots over one model (one per call, each with its own KV prefix and prompt
cache) and decodes every active slot in one batch per step, so four replies cost little more
than one, and far less than through the llama-cpp backend's per-token scheduler jobs (bench
call, 4 at once).

The engine runs its own loop thread, so its steps are not jobs of the process scheduler
(``scheduled = False``); the turn runner still orders ASR and TTS around it. A request picks
the slot whose cached prompt shares the most with it (llama.cpp's own slot similarity), so a
call's next turn finds its history. Its OpenMP threads must not spin between steps: the CLI
sets ``OMP_WAIT_POLICY=PASSIVE`` before it loads (:mod:`agent.cli.runtime`).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

from dialplan.options import LLMOptions
from models import catalog
from models.errors import ModelMissingError
from models.llm.base import LLM, LLMStream, Message, Piece
from models.llm.shape import JsonObject
from models.scheduler import Scheduler

JOIN_S = 2.0

_END = object()


class XLlamaCppLLM(LLM):
    """A GGUF chat model run by llama.cpp's server engine with one slot per call."""

    scheduled = False
    constrains = True

    def __init__(self, options: LLMOptions, scheduler: Scheduler | None = None):
        self.scheduler = scheduler
        try:
            import xllamacpp as xlc
        except ImportError as e:
            raise ModelMissingError(
                "xllamacpp missing: pip install xllamacpp==2026.10.11549") from e
        self.options = options
        self.model_name = options.model
        path = catalog.resolve(options.model, "llm")
        slots = max(1, options.contexts)
        p = xlc.CommonParams()
        p.model.path = str(path)
        p.n_parallel = slots
        p.n_ctx = options.n_ctx * slots  # split evenly: each slot gets n_ctx
        p.cpuparams.n_threads = options.threads
        p.cpuparams_batch.n_threads = options.threads
        p.sampling.seed = options.seed
        p.verbosity = -1
        self._server = xlc.Server(p)
        self._slots = slots
        self._primed: set[str] = set()
        self._primed_lock = threading.Lock()

    def prime(self, system_prompt: str, spread: bool = True) -> None:
        """Evaluate the system prompt so the next turns reuse it.

        The first time a prompt is primed, every slot gets it at once: a slot that has never
        held it evaluates it in full (with one slot primed, 4 calls asking at once had the
        other 3 re-read the whole prompt before their first token). Later a call's
        priming needs one slot: llama.cpp hands a request the slot whose prompt it shares most.
        """
        with self._primed_lock:
            first = spread and system_prompt not in self._primed
            self._primed.add(system_prompt)
        messages = [Message("system", system_prompt), Message("user", "Hello")]
        threads = [threading.Thread(target=self._prime_one, args=(messages,), daemon=True)
                   for _ in range(self._slots if first else 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def _prime_one(self, messages: list[Message]) -> None:
        stream = self.stream(messages)
        for _ in stream:
            break
        stream.close()

    def complete(self, messages: list[Message], max_tokens: int,
                 shape: JsonObject | None = None,
                 alone: Callable[[], bool] | None = None) -> LLMStream:
        """A one-off greedy reply; with ``shape``, held to its JSON schema by the engine."""
        request = self._request(messages, max_tokens, 0.0)
        if shape is not None:
            request["response_format"] = {"type": "json_schema", "json_schema": {
                "name": "reply", "strict": True, "schema": shape.schema()}}
        return LLMStream(self.model_name, _Generation(self._server, request), None)

    def _stream_impl(self, messages: list[Message]) -> Iterator[Piece]:
        o = self.options
        return _Generation(self._server, self._request(messages, o.max_tokens, o.temperature))

    def _request(self, messages: list[Message], max_tokens: int, temperature: float) -> dict:
        return {
            "messages": [{"role": m.role, "content": m.content} for m in self.fit(messages)],
            "max_tokens": max_tokens, "temperature": temperature, "seed": self.options.seed,
            "stream": True, "cache_prompt": True, "timings_per_token": True,
        }


class _Generation:
    """One streamed reply: the engine's callback feeds a queue this iterator drains."""

    def __init__(self, server: Any, request: dict):
        self._queue: queue.Queue = queue.Queue()
        self._stop = threading.Event()
        self._first = True
        self._thread = threading.Thread(target=self._run, args=(server, request),
                                        daemon=True, name="llm-engine")
        self._thread.start()

    def _run(self, server: Any, request: dict) -> None:
        try:
            result = server.handle_chat_completions(request, self._chunk)
            if isinstance(result, dict) and "error" in result:
                raise RuntimeError(f"llama.cpp engine: {result['error']}")
        except Exception as e:  # raised on the consumer's thread
            self._queue.put(e)
        finally:
            self._queue.put(_END)

    def _chunk(self, chunk: Any) -> bool:
        if isinstance(chunk, (str, bytes)):
            import json

            chunk = json.loads(chunk)
        if "error" in chunk:
            self._queue.put(RuntimeError(f"llama.cpp engine: {chunk['error']}"))
            return True
        choices = chunk.get("choices") or [{}]
        text = (choices[0].get("delta") or {}).get("content")
        if text:
            timings = chunk.get("timings") or {}
            self._queue.put((text, int(timings.get("prompt_n", 0)), int(timings.get("cache_n", 0))))
        return self._stop.is_set()  # True ends the request: the slot is free at once

    def __iter__(self) -> Iterator[Piece]:
        return self

    def __next__(self) -> Piece:
        item = self._queue.get()
        if item is _END:
            self._queue.put(_END)
            raise StopIteration
        if isinstance(item, Exception):
            raise item
        text, evaluated, cached = item
        if self._first:
            self._first = False
            return Piece(text, prompt_tokens=evaluated + cached, cached_tokens=cached)
        return Piece(text)

    def close(self) -> None:
        """Barge-in or done: the engine stops this request at its next token.

        Waits (briefly) for the request to leave the engine: a thread still inside it when
        the interpreter exits aborts the process ("exception not rethrown").
        """
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(JOIN_S)
