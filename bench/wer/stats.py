"""Corpus WER and its bootstrap confidence interval (utterances resampled), for ``bench wer``.

A corpus WER is all word errors over all reference words. Its uncertainty comes mostly from
which utterances were asked, so the interval resamples utterances with replacement (a
percentile bootstrap); comparisons on the same utterances resample them paired, which gives a
much tighter interval for a difference than two separate intervals suggest.
"""

from __future__ import annotations

import numpy as np

BOOTSTRAP_ROUNDS = 2000
CONFIDENCE = 0.95


def corpus_wer(errors: np.ndarray, words: np.ndarray) -> float:
    """Word errors over reference words (0 when there are no words)."""
    total = float(np.sum(words))
    return float(np.sum(errors)) / total if total else 0.0


def _resamples(n: int, rounds: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, n, size=(rounds, n))


def _interval(values: np.ndarray, confidence: float) -> tuple[float, float]:
    tail = (1 - confidence) / 2 * 100
    lo, hi = np.percentile(values, [tail, 100 - tail])
    return float(lo), float(hi)


def bootstrap_ci(errors, words, rounds: int = BOOTSTRAP_ROUNDS, seed: int = 0,
                 confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Percentile-bootstrap interval of the corpus WER, resampling utterances.

    Args:
        errors: word errors per utterance.
        words: reference words per utterance.
        rounds: bootstrap resamples.
        seed: resampling seed (the same seed gives the same interval).
        confidence: interval coverage.

    Returns:
        ``(low, high)``; ``(nan, nan)`` with no utterances.
    """
    e, w = np.asarray(errors, np.float64), np.asarray(words, np.float64)
    if len(e) == 0:
        return float("nan"), float("nan")
    idx = _resamples(len(e), rounds, seed)
    return _interval(e[idx].sum(axis=1) / np.maximum(w[idx].sum(axis=1), 1), confidence)


def bootstrap_diff_ci(errors_a, errors_b, words, rounds: int = BOOTSTRAP_ROUNDS, seed: int = 0,
                      confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Interval of WER(a) − WER(b) on the same utterances, resampled paired."""
    a, b = np.asarray(errors_a, np.float64), np.asarray(errors_b, np.float64)
    w = np.asarray(words, np.float64)
    if len(a) == 0:
        return float("nan"), float("nan")
    idx = _resamples(len(a), rounds, seed)
    total = np.maximum(w[idx].sum(axis=1), 1)
    return _interval((a[idx].sum(axis=1) - b[idx].sum(axis=1)) / total, confidence)
