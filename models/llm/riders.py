"""Who takes part in a batched decode step of the llama-batch engine.

A step's time grows with its sequences (bench call, 4 at once), so a caller's first clause is
not decoded beside replies that still have a second of audio queued, nor beside a speculative
turn's prefill: the riders are the replies and prompts no less urgent than the step's most
urgent one (:func:`members`). They decode in their own steps, or ride again once their audio
runs low.

Except where they ride for free (:func:`fill`): llama.cpp's repacked matrix kernels (IQ4_NL
and Q4_0 on AVX2) multiply 4 tokens at once and each token left over on its own, and a step
whose sequence ids are not consecutive is split into passes, one per run. So a decode step of
3 sequences, or of 2 apart, costs what one of 4 does (Qwen 0.5B, bench call, 4 at once).
That holds for the Qwen 0.5B, not for the 1.5B, so the engine measures it on its own model at
load (:mod:`models.llm.tile`) and fills only where a tile is (nearly) free.
Imports nothing from the project but the scheduler's priorities.
"""

from __future__ import annotations

from typing import Protocol

from models.priority import Priority

TILE = 4
"""Tokens llama.cpp's repacked CPU kernels multiply at once."""


class _Seq(Protocol):
    id: int


class Rider(Protocol):
    """A reply or prompt of the engine: what it feeds next, on which sequence."""

    feed: list[int]
    seq: _Seq


def members(ranked: list[tuple[tuple[int, float], Rider]], tile_free: bool = True
            ) -> list[Rider]:
    """The step's members, from the wanting replies sorted by rank (each rank read once).

    ``tile_free``: a whole tile costs this model no more than a step one short of it
    (:mod:`models.llm.tile`); else no reply rides below its level.
    """
    if not ranked:
        return []
    top = ranked[0][0][0]
    chosen = [g for (level, _), g in ranked if level == top]
    if not tile_free:
        return chosen
    return chosen + fill(chosen, [g for (level, _), g in ranked
                                  if top < level < Priority.BACKGROUND])


def fill(chosen: list[Rider], lower: list[Rider]) -> list[Rider]:
    """Less urgent decoding replies that complete a tile in one pass, else none."""
    need = TILE - sum(len(g.feed) for g in chosen)
    if not (need == 1 or (need == 2 and _apart(chosen))):
        return []
    extra = [g for g in lower if len(g.feed) == 1][:need]
    if len(extra) < need or _apart(chosen + extra):
        return []  # not a whole tile in one pass: no gain
    return extra


def _apart(riders: list[Rider]) -> bool:
    """Their sequence ids have a gap: llama.cpp decodes them in more than one pass."""
    ids = sorted(g.seq.id for g in riders)
    return any(b != a + 1 for a, b in zip(ids, ids[1:], strict=False))
