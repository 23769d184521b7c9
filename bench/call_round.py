"""One round of ``bench call``: its figures, and the line printed as it ends.

A round is ``concurrency`` callers, ``rounds`` calls each, against one setup. Kept apart from
:mod:`bench.call`, which places the calls and prints the tables.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bench.call_turns import TurnStats
from db.stats import percentile, percentile_interval


@dataclass
class Round:
    """One round (``concurrency`` callers, ``rounds`` calls each) against one setup."""

    workers: int
    concurrency: int
    placed: int
    answered: int
    """Calls in the call log (the agent answered them)."""
    refused: dict[int, int]
    """Calls the caller saw refused, by SIP status (from sipp's error file)."""
    v2v_ms: list[float]
    """Voice-to-voice on the wire, one per answered question (``--turns`` of them a call)."""
    gaps_ms: list[float]
    turns: int
    unanswered: dict[str, int]
    """Turns without reply audio, by reason."""
    per_worker: dict[str, int]
    """Calls per worker id ("serve" for a lone serve)."""
    sipp_rc: int
    under_load: int = 0
    """Turns answered by the profile's cheaper ``under_load`` models."""
    repeats: int = 0
    """Turns answered with the profile's ``repeat`` phrase (an unsure transcript): quick
    replies that count in voice-to-voice, though the caller must ask again."""
    holes_ms: list[list[float]] = field(default_factory=list)
    """Dead air inside each reply: its holes (see :func:`dead_air_ms`)."""
    turn_stats: TurnStats | None = None
    """``--turns`` 2 or more: the turns, first and follow-up apart."""

    @property
    def dead_air_s(self) -> float:
        return sum(map(sum, self.holes_ms)) / 1000

    def dead_air(self) -> str:
        holes = [h for call in self.holes_ms for h in call]
        if not holes:
            return "none"
        hit = sum(1 for call in self.holes_ms if call)
        return (f"{len(holes)} holes in {hit} of {len(self.holes_ms)} replies, "
                f"{self.dead_air_s:.1f} s in all, longest {max(holes):.0f} ms")

    def pct(self, xs: list[float], q: float) -> str:
        v = percentile(xs, q)
        return "n/a" if v is None else f"{v:.0f}"

    def interval(self, q: float) -> str:
        span = percentile_interval(self.v2v_ms, q)
        return "" if span is None else f" (90 % bootstrap {span[0]:.0f}-{span[1]:.0f})"

    @property
    def setup(self) -> str:
        return "1 serve" if self.workers == 1 else f"cluster {self.workers}"

    def line(self) -> str:
        missed = sum(self.unanswered.values())
        return (f"{self.setup}, concurrency {self.concurrency}: answered {self.answered}/"
                f"{self.placed}, refused {refused_text(self.refused)}, {len(self.v2v_ms)} "
                f"measured on the wire, sipp rc={self.sipp_rc}"
                f" | voice-to-voice p50 {self.pct(self.v2v_ms, 50)} ms"
                f"{self.interval(50)} p95 {self.pct(self.v2v_ms, 95)} ms{self.interval(95)}"
                f" | unanswered turns {missed} of {self.turns}"
                f"{f' ({split_text(self.unanswered)})' if missed else ''}, answered under "
                f"load {self.under_load}, asked to repeat {self.repeats} | reply packet gap "
                f"p50 {self.pct(self.gaps_ms, 50)} ms "
                f"p99 {self.pct(self.gaps_ms, 99)} ms max "
                f"{max(self.gaps_ms) if self.gaps_ms else float('nan'):.0f} ms | dead air "
                f"{self.dead_air()} | per worker "
                f"{split_text(self.per_worker)}")


def split_text(per_worker: dict[str, int]) -> str:
    return ", ".join(f"{w} {n}" for w, n in sorted(per_worker.items())) or "-"


def refused_text(refused: dict[int, int]) -> str:
    return ",".join(f"{n}x{code}" for code, n in sorted(refused.items())) or "0"
