"""Whether a decode step of a whole tile is free on the loaded model: measured once, at load.

:func:`models.llm.riders.fill` lets less urgent replies ride in a decode step of 3 sequences so
that it holds a whole tile of 4, on the premise that llama.cpp's repacked kernels make the
fourth token free. That holds for the Qwen 0.5B models and not for the 1.5B, whose step of 4
sequences costs more than one of 3, the more so in Q4_K_M and on caches holding a system
prompt (the ``event=llm-tile`` line each engine logs at load). It depends on the weights'
type, the model's width, the cache and the CPU's kernels, so the engine times it on its own
model at load instead of trusting a table.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from models.llm.riders import TILE

SLACK = 0.10
"""A tile is free if it costs at most this much more than a step one token short of it: the
urgent replies of the step wait that much longer, and the rider is decoded for almost nothing
(a step of its own costs a good part of a tile)."""
REPEATS = 5


def is_free(step_s: Callable[[int], float], repeats: int = REPEATS) -> tuple[bool, float, float]:
    """``(free, seconds for TILE - 1 sequences, seconds for TILE)``, medians of ``repeats``.

    Args:
        step_s: decodes one token on each of the first N sequences and returns its seconds.
        repeats: steps of each size.
    """
    short, whole = [], []
    for _ in range(repeats):  # alternated, so a drift of the machine falls on both
        short.append(step_s(TILE - 1))
        whole.append(step_s(TILE))
    t_short, t_whole = statistics.median(short), statistics.median(whole)
    return t_whole <= t_short * (1 + SLACK), t_short, t_whole


def measure(lc: Any, ctx: Any, mem: Any, batch: Any, seqs: Sequence[Any], model: str) -> bool:
    """Time the tile on ``seqs`` (llama.cpp sequences with cached ``tokens``); log and say.

    Each timed step decodes every sequence's last token again one position on, then drops
    that cell: the caches are what they were. The caller holds the context (no step runs).
    """
    def step_s(n: int) -> float:
        for i, seq in enumerate(seqs[:n]):
            batch.token[i], batch.pos[i], batch.n_seq_id[i] = seq.tokens[-1], len(seq.tokens), 1
            batch.seq_id[i][0], batch.logits[i] = seq.id, True
        batch.n_tokens = n
        t0 = time.perf_counter()
        rc = lc.llama_decode(ctx, batch)
        took = time.perf_counter() - t0
        for seq in seqs[:n]:
            lc.llama_memory_seq_rm(mem, seq.id, len(seq.tokens), -1)
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc}")
        return took

    free, short, whole = is_free(step_s)
    logging.getLogger("callagent").info(
        "event=llm-tile model=%s step%d_ms=%.1f step%d_ms=%.1f fill=%s",
        model, TILE - 1, short * 1000, TILE, whole * 1000, free)
    return free
