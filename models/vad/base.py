"""The VAD stage interface: a shared model that scores 32 ms chunks for speech.

The model is loaded once per process; each call gets its own :class:`VADStream` holding the
recurrent state, so concurrent calls never mix.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

SAMPLE_RATE = 16000
CHUNK = 512  # Silero's window at 16 kHz: 32 ms


class VADStream(ABC):
    """Per-call VAD state."""

    @abstractmethod
    def probability(self, chunk: np.ndarray) -> float:
        """Speech probability of one ``CHUNK``-sample float32 chunk."""


class VAD(ABC):
    """A speech detector model shared by all calls."""

    model_name: str = ""

    @abstractmethod
    def new_stream(self) -> VADStream:
        """Fresh state for one audio stream."""
