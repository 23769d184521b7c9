"""What the llama-batch engine is asked besides a call's streamed turn: one-off requests.

The caller's words so far evaluated ahead of their turn (:meth:`OneOffs.prefill`), a greedy
reply held to a JSON shape (:meth:`OneOffs.complete`: a tool's arguments, a summary), and the
odds of a few options as the reply's first token (:meth:`OneOffs.weigh`: a look-up's route).
Each runs on a sequence as a turn does, read by a job's thread. A mixin of
:class:`~models.llm.llama_batch.engine.BatchedLlamaLLM` (same package: it uses the engine's
``_start``, ``_cond``, ``_finish``, ``_lc`` and ``_model``).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from models.llm.base import LLMStream, Message, NoPieces, shared_prefix
from models.llm.grammar import FirstTokens, GrammarPick, odds, spellings
from models.llm.shape import JsonObject
from models.priority import Cancellable, current_cancel


class OneOffs:
    """The engine's one-off requests (mixed into ``BatchedLlamaLLM``)."""

    def prefill(self, messages: list[Message], cancel: Cancellable) -> int:
        """Evaluate the prompt's tokens up to the last message's words; no reply.

        For the caller's words so far, while they still speak: their turn's request then
        finds them cached. Returns the tokens it evaluated (0: no sequence was free, or
        ``cancel`` was set first).
        """
        prompt = self.prompt_tokens(messages)
        # Up to the end of the words: the chat template's closing tokens follow only once
        # the caller has finished.
        words = shared_prefix(prompt, self.prompt_tokens(
            messages[:-1] + [Message(messages[-1].role, messages[-1].content + " \u2026")]))
        gen = self._start(messages, prompt[:words], wait=False, prefill=True, cancel=cancel)
        if gen is None:
            return 0
        with self._cond:
            while not gen.done and gen.error is None and not gen.cancelled:
                self._cond.wait()  # its step, an engine error or its cancel notifies
            evaluated = gen.pos - gen.cached
            self._finish(gen)
        return evaluated

    def complete(self, messages: list[Message], max_tokens: int,
                 shape: JsonObject | None = None,
                 alone: Callable[[], bool] | None = None, opening: str = "") -> LLMStream:
        """A one-off greedy reply held to ``shape``'s grammar, on a sequence like a turn's.

        At the caller's priority: in background steps, unless ``alone()``, a few tokens each.
        ``opening``'s tokens follow the prompt's, as if the model had written them.
        """
        started = time.monotonic()
        grammar = None if shape is None else GrammarPick(
            self._lc, self._lc.llama_model_get_vocab(self._model), shape.gbnf())
        prompt = self.prompt_tokens(messages) + (self.vocab.tokenize(opening) if opening else [])
        gen = self._start(messages, prompt, cancel=current_cancel(), max_tokens=max_tokens,
                          grammar=grammar, alone=alone)
        if gen is None and grammar is not None:
            grammar.free()  # cancelled before a sequence was free
        return LLMStream(self.model_name, gen or NoPieces(), None, started_at=started)

    def weigh(self, messages: list[Message], options: list[str]) -> dict[str, float] | None:
        firsts = {o: {self.vocab.tokenize(v)[0] for v in spellings(o)} for o in options}
        vocab = self._lc.llama_model_get_vocab(self._model)
        probe = FirstTokens(int(self._lc.llama_vocab_n_tokens(vocab)),
                            sorted(set().union(*firsts.values())), self._lc.llama_vocab_eos(vocab))
        gen = self._start(messages, cancel=current_cancel(), max_tokens=1, grammar=probe)
        if gen is None:
            return None
        for _ in gen:
            pass
        return odds(firsts, probe.p) if probe.p else None
