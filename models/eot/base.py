"""The end-of-turn stage interface: a shared model that scores a caller's turn as finished.

A VAD hears silence; it cannot tell a finished question from a pause mid-thought. An
end-of-turn model looks at the turn's audio (its last seconds: words and prosody) and gives the
probability that the caller has finished, so the session can answer after a short silence
instead of waiting out the hangover. The public :meth:`EndOfTurn.score` times every call; a
backend implements only ``_probability``.

A decision takes no slot of the process scheduler: it is one short job on one thread, and it
decides when everything else starts, so it runs beside whatever holds the cores (the turn's
own speculative ASR pass starts with it). Queued for a slot, it waited behind whole passes.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from models.metrics import EOTMetrics
from models.scheduled import Scheduled

SAMPLE_RATE = 16000


@dataclass(frozen=True)
class TurnEnd:
    """A model's verdict on one turn's audio."""

    probability: float
    """Probability that the caller has finished their turn (0..1)."""
    metrics: EOTMetrics


class EndOfTurn(Scheduled, ABC):
    """An end-of-turn model shared by all calls (stateless between calls).

    It has the process's ``scheduler`` like every stage, though a decision takes no job of it.
    """

    model_name: str = ""

    def score(self, audio: np.ndarray) -> TurnEnd:
        """Score 16 kHz float32 audio of the turn so far (its end is the caller's last words)."""
        t0 = time.monotonic()
        p = float(self._probability(np.asarray(audio, np.float32).reshape(-1)))
        t1 = time.monotonic()
        metrics = EOTMetrics(model=self.model_name, started_at=t0, ended_at=t1,
                             audio_s=len(audio) / SAMPLE_RATE, probability=p)
        return TurnEnd(p, metrics)

    @abstractmethod
    def _probability(self, audio: np.ndarray) -> float:
        """Probability that the turn is complete."""
