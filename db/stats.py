"""The one percentile convention of the project: reports, benchmarks and playout metrics.

Linear interpolation between closest ranks (numpy's default, PostgreSQL's ``percentile_cont``),
so a p95 means the same number in ``callagent report``, ``bench`` output and a call's log
line. Missing samples (``None``, NaN) are left out, never counted as zero; no samples at all
give ``None``, never a made-up value. numpy only: :mod:`agent` and :mod:`db` both use it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np


def _samples(values: Iterable[float | None]) -> list[float]:
    return [float(v) for v in values if v is not None and not math.isnan(v)]


def percentile(values: Iterable[float | None], q: float) -> float | None:
    """The ``q``-th percentile (0-100) of the values that are not None or NaN.

    Args:
        values: Samples in any order; None and NaN entries are ignored.
        q: Percentile, 0 (minimum) to 100 (maximum).

    Returns:
        The linearly interpolated percentile, or None when there are no samples.
    """
    xs = _samples(values)
    return float(np.percentile(xs, q)) if xs else None


def percentile_interval(values: Iterable[float | None], q: float, level: float = 0.9,
                        resamples: int = 2000, seed: int = 0) -> tuple[float, float] | None:
    """Bootstrap interval of the ``q``-th percentile: how far another run may land.

    Resamples the values with replacement (a fixed seed: the same samples give the same
    interval). A benchmark's p95 over 40 calls rests on its two slowest, so two runs of the
    same code differ by more than most changes; this says by how much.

    Returns:
        ``(low, high)`` holding ``level`` of the resampled percentiles, or None with fewer
        than two samples.
    """
    xs = np.asarray(_samples(values))
    if len(xs) < 2:
        return None
    rng = np.random.default_rng(seed)
    draws = np.percentile(rng.choice(xs, (resamples, len(xs))), q, axis=1)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(draws, (tail, 100 - tail))
    return float(low), float(high)


@dataclass(frozen=True)
class Percentiles:
    """Distribution summary of one metric, in the metric's own unit."""

    n: int
    p50: float | None = None
    p95: float | None = None
    p99: float | None = None
    max: float | None = None

    @classmethod
    def of(cls, values: Iterable[float | None]) -> Percentiles:
        """p50/p95/p99/max of the values that are not None or NaN.

        Args:
            values: Samples; None and NaN entries are ignored.

        Returns:
            The summary; every field but ``n`` is None when there are no samples.
        """
        xs = _samples(values)
        if not xs:
            return cls(n=0)
        p50, p95, p99 = (float(v) for v in np.percentile(xs, (50, 95, 99)))
        return cls(n=len(xs), p50=p50, p95=p95, p99=p99, max=max(xs))
