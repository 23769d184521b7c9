"""Synthetic callers' clips kept on disk between benchmark runs.

A model voice takes a model run per clip and some (Piper, hibari) sound different each run:
kept, the next run hears the same words said the same way, and compares models on them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import numpy as np


def kept_clip(folder: Path | None, key: str, make: Callable[[], tuple[np.ndarray, int]]
              ) -> tuple[np.ndarray, int]:
    """The clip stored under ``key`` in ``folder``, made by ``make()`` and stored the first time.

    ``folder`` None: always made afresh. Returns float32 audio and its rate.
    """
    name = f"{hashlib.sha256(key.encode()).hexdigest()[:24]}.npz"
    path = None if folder is None else folder / name
    if path is not None and path.exists():
        with np.load(path) as z:
            return z["audio"], int(z["rate"])
    audio, rate = make()
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp.npz")
        np.savez(tmp, audio=audio, rate=rate)
        tmp.replace(path)
    return audio, rate
