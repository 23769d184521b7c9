"""Greedy decoding held to a llama.cpp grammar, checking the model's own choice first.

llama.cpp's grammar sampler, put in a sampler chain, checks every token of the vocabulary
against the grammar at every step: with a vocabulary of 150k tokens and the bounded string
rules of :mod:`models.llm.shape` that costs more than the decode step itself. Here the greedy
token is checked alone first (a one-candidate array), and only when the grammar refuses it is
the whole vocabulary checked, as llama.cpp's own ``common_sampler`` does. The token chosen is
then fed to the grammar (``accept``). Both llama.cpp backends use it: llama-batch on the raw
logits of its step, llama-cpp as a ``logits_processor`` of ``create_chat_completion``.
Imports nothing from the project.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

_TOKEN_DATA = np.dtype([("id", "<i4"), ("logit", "<f4"), ("p", "<f4")])
"""``llama_token_data`` as numpy sees it (the whole vocabulary's array is filled in one go)."""


class GrammarPick:
    """One reply's grammar state over a model's vocabulary.

    Args:
        lc: the ``llama_cpp`` module.
        vocab: the model's ``llama_vocab`` pointer.
        gbnf: the grammar, its start rule ``root``.

    Raises:
        ValueError: llama.cpp could not parse the grammar.
    """

    def __init__(self, lc: Any, vocab: Any, gbnf: str):
        self._lc = lc
        self._sampler = lc.llama_sampler_init_grammar(vocab, gbnf.encode(), b"root")
        if not self._sampler:
            raise ValueError("llama.cpp refused the reply's grammar")
        self.n_vocab = int(lc.llama_vocab_n_tokens(vocab))
        self._one = (lc.llama_token_data * 1)()
        self._all: Any = None  # the whole vocabulary's array, made the first time it is needed
        self.full_checks = 0
        """Steps at which the model's choice was refused and every token was checked."""

    def choose(self, logits: np.ndarray) -> int:
        """The most likely token the grammar allows next (fed to the grammar)."""
        lc = self._lc
        logits = logits[: self.n_vocab]
        token = int(np.argmax(logits))
        self._one[0].id, self._one[0].logit, self._one[0].p = token, float(logits[token]), 0.0
        one = lc.llama_token_data_array(data=self._one, size=1, selected=-1, sorted=False)
        lc.llama_sampler_apply(self._sampler, ctypes.byref(one))
        if not np.isfinite(self._one[0].logit):
            token = self._check_all(logits)
        lc.llama_sampler_accept(self._sampler, token)
        return token

    def _check_all(self, logits: np.ndarray) -> int:
        lc = self._lc
        self.full_checks += 1
        if self._all is None:
            self._all = (lc.llama_token_data * self.n_vocab)()
        view = np.frombuffer(self._all, dtype=_TOKEN_DATA, count=self.n_vocab)
        view["id"] = np.arange(self.n_vocab, dtype=np.int32)
        view["logit"] = logits
        view["p"] = 0.0
        arr = lc.llama_token_data_array(data=self._all, size=self.n_vocab, selected=-1,
                                        sorted=False)
        lc.llama_sampler_apply(self._sampler, ctypes.byref(arr))
        allowed = view["logit"]
        if not np.isfinite(allowed).any():
            raise ValueError("the grammar allows no token here")
        return int(view["id"][int(np.argmax(allowed))])

    def processor(self, input_ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
        """A llama-cpp-python ``logits_processor``: every token but the chosen one ruled out."""
        token = self.choose(scores)
        out = np.full_like(scores, -np.inf)
        out[token] = 0.0
        return out

    def free(self) -> None:
        """Free the llama.cpp sampler (idempotent)."""
        if self._sampler:
            self._lc.llama_sampler_free(self._sampler)
            self._sampler = None

    def __del__(self) -> None:
        try:
            self.free()
        except Exception:  # noqa: BLE001 - at interpreter exit the binding may be gone
            pass


class FirstTokens:
    """Not a grammar: the chance of each of some tokens as a reply's first, then its end.

    Given to a generation in a grammar's place (it is asked for one token the same way), it
    reads the softmax of the first step's logits at ``tokens`` and answers ``end``, so the
    reply ends there with nothing written. Used by ``weigh``: one prompt, one step.
    """

    def __init__(self, n_vocab: int, tokens: list[int], end: int):
        self.n_vocab = n_vocab
        self.tokens = tokens
        self.end = end
        self.p: dict[int, float] = {}

    def choose(self, logits: np.ndarray) -> int:
        z = np.asarray(logits[: self.n_vocab], dtype=np.float64)
        e = np.exp(z - z.max())
        total = float(e.sum())
        self.p = {t: float(e[t]) / total for t in self.tokens}
        return self.end

    def free(self) -> None:
        """Nothing of llama.cpp's is held."""


def spellings(option: str) -> tuple[str, ...]:
    """How a reply may begin with ``option``: as written, capitalised, after a space."""
    return (option, option[:1].upper() + option[1:], " " + option)


def odds(firsts: dict[str, set[int]], p: dict[int, float]) -> dict[str, float]:
    """Each option's chance: its spellings' first tokens', summed.

    A token two options share counts for neither: it tells them apart no more than it tells
    them from the rest.
    """
    seen: dict[int, int] = {}
    for tokens in firsts.values():
        for t in tokens:
            seen[t] = seen.get(t, 0) + 1
    return {o: sum(p.get(t, 0.0) for t in tokens if seen[t] == 1) for o, tokens in firsts.items()}
