"""Test helper: the tiny random Voxtral checkpoint and test utterances, built once per session.

The builder itself lives in :mod:`models.asr.voxtral_tiny` (the bench CLI uses it too); this
module only caches its output and makes deterministic utterances.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dialplan.options import ASROptions, VoxtralOptions
from models.asr.voxtral_tiny import build_tiny_voxtral

EAGER = VoxtralOptions(attention="eager", dtype="float32", compile="off", static_cache="off",
                       batch_window_s=0.0, warmup=False)
"""The reference path every optimisation is compared with."""


def build(tmp_dir: Path) -> Path:
    """Build the tiny checkpoint under ``tmp_dir`` and return its directory."""
    return build_tiny_voxtral(Path(tmp_dir) / "voxtral-tiny", seed=0)


def options(model_dir: Path, vx: VoxtralOptions = EAGER, language: str = "en") -> ASROptions:
    """ASR options that load ``model_dir`` through the real backend."""
    return ASROptions(backend="voxtral", model=str(model_dir), language=language, voxtral=vx,
                      threads=2)


def utterances(seconds: tuple[float, ...] = (1.2, 2.5, 1.8), seed: int = 1) -> list[np.ndarray]:
    """Deterministic 16 kHz float32 'speech' (noise plus a gliding tone) of the given lengths."""
    rng = np.random.default_rng(seed)
    out = []
    for k, s in enumerate(seconds):
        t = np.arange(int(16000 * s)) / 16000
        tone = 0.3 * np.sin(2 * np.pi * (200 + 100 * k + 50 * t) * t)
        out.append((tone + rng.normal(0, 0.05, t.size)).astype(np.float32))
    return out
