"""Kokoro-82M TTS through the ``kokoro`` (torch) ``KPipeline``, for users who have the weights.

No torch checkpoint or English voice pack is on PyPI, so this path takes user-supplied files:
``tts.model`` = ``kokoro-v1_0.pth`` (its ``config.json`` beside it), ``tts.voices`` = a folder
of voice ``.pt`` files (e.g. ``af_heart.pt``). Online users may give the hub id instead.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from dialplan.options import TTSOptions
from models.errors import ModelMissingError
from models.scheduler import Scheduler
from models.tts.base import TTS

LANG_CODES = {
    "en-us": "a",
    "en-gb": "b",
    "es": "e",
    "fr-fr": "f",
    "hi": "h",
    "it": "i",
    "ja": "j",
    "pt-br": "p",
    "cmn": "z",
}


class KokoroTorchTTS(TTS):
    """Kokoro through its reference torch pipeline; 24 kHz output."""

    sample_rate = 24000

    def __init__(self, options: TTSOptions, scheduler: Scheduler | None = None):
        self.scheduler = scheduler
        try:
            from kokoro import KModel, KPipeline
        except ImportError as e:
            raise ModelMissingError(
                "kokoro (torch) missing: pip install 'callagent[kokoro-torch]'"
            ) from e
        self.options = options
        model = Path(options.model).expanduser()
        if model.suffix == ".pth":
            if not model.exists():
                raise ModelMissingError(f"tts.model: {model} not found")
            config = model.with_name("config.json")
            kmodel = KModel(config=str(config) if config.exists() else None, model=str(model))
        else:  # a hub id, for users who are online
            kmodel = KModel(repo_id=options.model)
        self._pipeline = KPipeline(lang_code=LANG_CODES.get(options.lang, "a"), model=kmodel.eval())
        voices = Path(options.voices).expanduser() if options.voices else None
        voice_file = voices / f"{options.voice}.pt" if voices else None
        if voice_file is not None and not voice_file.exists():
            raise ModelMissingError(f"tts.voice: {voice_file} not found")
        self._voice = str(voice_file) if voice_file else options.voice
        self.model_name = model.name
        self.voice = options.voice
        self._lock = threading.Lock()

    def _synthesize_impl(self, text: str) -> np.ndarray:
        with self._lock:
            pieces = [
                r.audio.numpy()
                for r in self._pipeline(text, voice=self._voice, speed=self.options.speed)
                if r.audio is not None
            ]
        return np.concatenate(pieces) if pieces else np.zeros(0, np.float32)
