"""Smart Turn v3 (pipecat, BSD-2) on onnxruntime: the bundled end-of-turn model.

The int8 CPU model ships inside the ``pipecat-ai`` wheel (installed with ``--no-deps`` by
``callagent models install smart-turn-v3.2``; the package itself is never imported). It scores
the last 8 s of a turn at 16 kHz from Whisper log-mel features, which faster-whisper's numpy
:class:`~faster_whisper.feature_extractor.FeatureExtractor` computes (the same features as
pipecat's vendored copy of transformers' extractor, to float precision).

A decision is a short job on one thread (bench pipeline). Synthetic prosody fools it both ways
(a clipped "...a table for" scored as finished),
so the session still checks the words before it speaks and keeps the VAD hangover as the
fallback when the model says "not finished".
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from models import catalog
from models.eot.base import SAMPLE_RATE, EndOfTurn
from models.scheduler import Scheduler

WINDOW_S = 8  # the model's input: the turn's last 8 s, zero-padded in front


class SmartTurn(EndOfTurn):
    """Smart Turn v3.x ONNX.

    Args:
        model: a bundled name (``smart-turn-v3.2``) or a path to a Smart Turn v3 ONNX file.
        threads: onnxruntime intra-op threads (1: a decision is short and runs beside ASR).
        scheduler: the process's (None: one of its own).
    """

    def __init__(self, model: str = "smart-turn-v3.2", threads: int = 1,
                 scheduler: Scheduler | None = None):
        self.scheduler = scheduler
        import onnxruntime as ort
        from faster_whisper.feature_extractor import FeatureExtractor

        path = Path(catalog.resolve(model, "eot"))
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        self._session = ort.InferenceSession(str(path), sess_options=opts,
                                             providers=["CPUExecutionProvider"])
        self._features = FeatureExtractor(feature_size=80, sampling_rate=SAMPLE_RATE,
                                          hop_length=160, chunk_length=WINDOW_S, n_fft=400)
        self.model_name = model if not Path(model).exists() else path.stem

    def _probability(self, audio: np.ndarray) -> float:
        n = WINDOW_S * SAMPLE_RATE
        x = audio[-n:]
        x = np.pad(x, (n - len(x), 0)) if len(x) < n else x
        # Zero-mean, unit-variance waveform first, as the model was trained (do_normalize).
        x = (x - x.mean()) / np.sqrt(x.var() + 1e-7)
        feats = self._features(x.astype(np.float32), padding=0)[:, : n // 160]
        out = self._session.run(None, {"input_features": feats[None].astype(np.float32)})
        return float(np.asarray(out[0]).reshape(-1)[0])
