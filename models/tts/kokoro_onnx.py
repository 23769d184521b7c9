"""Kokoro-82M TTS through kokoro-onnx (onnxruntime), with the bundled int8 model and voices.

English text goes through espeak-ng G2P (offline). The bundled voices are Japanese speakers
(accented English); users with the official voices file set ``tts.voices`` and ``tts.voice``.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from dialplan.options import TTSOptions
from models import catalog
from models.errors import ModelMissingError
from models.scheduler import Scheduler
from models.tts.base import TTS, cpu_session


class KokoroOnnxTTS(TTS):
    """Kokoro on onnxruntime; 24 kHz output."""

    sample_rate = 24000

    def __init__(self, options: TTSOptions, scheduler: Scheduler | None = None):
        self.scheduler = scheduler
        try:
            import onnxruntime  # noqa: F401 - missing means the same install hint
            from kokoro_onnx import Kokoro
        except ImportError as e:
            raise ModelMissingError("kokoro-onnx missing: pip install kokoro-onnx==0.6.1") from e
        self.options = options
        model = catalog.resolve(options.model, "tts")
        voices = (
            Path(options.voices).expanduser() if options.voices else model.parent / "voices_ja.npz"
        )
        if not voices.exists():
            raise ModelMissingError(f"tts.voices: {voices} not found")
        self._kokoro = Kokoro.from_session(cpu_session(model, options.threads), str(voices))
        if options.voice not in self._kokoro.get_voices():
            raise ModelMissingError(
                f"tts.voice '{options.voice}' not in {voices.name}: "
                f"{', '.join(self._kokoro.get_voices())}"
            )
        self.model_name = options.model
        self.voice = options.voice
        self._lock = threading.Lock()  # one onnxruntime session; calls take turns

    def _synthesize_impl(self, text: str) -> np.ndarray:
        with self._lock:
            audio, rate = self._kokoro.create(
                text, voice=self.options.voice, speed=self.options.speed, lang=self.options.lang
            )
        if rate != self.sample_rate:
            raise RuntimeError(f"kokoro returned {rate} Hz, expected {self.sample_rate}")
        return audio
