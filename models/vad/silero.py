"""Silero VAD on onnxruntime, using the ONNX model bundled in the ``silero-vad`` package.

onnxruntime alone runs it, cheaply; torch is not needed at run time.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

from models.errors import ModelMissingError
from models.vad.base import CHUNK, SAMPLE_RATE, VAD, VADStream

CONTEXT = 64  # samples of the previous chunk the model expects in front of each chunk


def bundled_model_path() -> Path:
    """Locate ``silero_vad.onnx`` without importing the package (its __init__ imports torch)."""
    spec = importlib.util.find_spec("silero_vad")
    if spec is None or not spec.submodule_search_locations:
        raise ModelMissingError("Silero VAD missing: pip install silero-vad==6.2.3")
    path = Path(spec.submodule_search_locations[0]) / "data" / "silero_vad.onnx"
    if not path.exists():
        raise ModelMissingError(f"{path} not found: reinstall silero-vad==6.2.3")
    return path


class SileroStream(VADStream):
    def __init__(self, session):
        self._session = session
        self._state = np.zeros((2, 1, 128), np.float32)
        self._context = np.zeros(CONTEXT, np.float32)
        self._sr = np.array(SAMPLE_RATE, np.int64)

    def probability(self, chunk: np.ndarray) -> float:
        x = np.concatenate([self._context, chunk.astype(np.float32, copy=False)])[None, :]
        prob, self._state = self._session.run(
            None, {"input": x, "state": self._state, "sr": self._sr}
        )
        self._context = x[0, -CONTEXT:]
        return float(prob.reshape(-1)[0])


class SileroVAD(VAD):
    """Silero VAD v6 (ONNX)."""

    model_name = "silero-vad"

    def __init__(self, path: str | Path | None = None):
        import onnxruntime as ort

        opts = ort.SessionOptions()
        # One thread: a 32 ms chunk is a tiny job, and more threads only contend with ASR/TTS.
        opts.intra_op_num_threads = 1
        opts.inter_op_num_threads = 1
        self._session = ort.InferenceSession(
            str(path or bundled_model_path()),
            sess_options=opts,
            providers=["CPUExecutionProvider"],
        )

    def new_stream(self) -> SileroStream:
        return SileroStream(self._session)


__all__ = ["CHUNK", "SileroVAD"]
