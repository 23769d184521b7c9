"""hibari: a small English TTS trained to imitate Kokoro's af_heart, fast enough for any load.

``hibari-tts`` (PyPI, Apache-2.0) carries an 8 MB int8 ONNX model of the voice "heart" and its
own grapheme-to-phoneme step (misaki's lexicons and an out-of-vocabulary model: no espeak), and
runs on one core many times faster than real time (bench tts). It is the voice that keeps
answering in af_heart's timbre when Kokoro itself would cost too much: a reply's first clause
(``tts.lead``), or every clause of an under-load profile. Its G2P is also the one Kokoro was
trained on (the same phoneme alphabet and ids), shared through :mod:`models.tts.misaki`.
"""

from __future__ import annotations

import threading

import numpy as np

from dialplan.options import TTSOptions
from models.audio import SILENCE_PEAK
from models.errors import ModelMissingError
from models.scheduler import Scheduler
from models.tts.base import TTS
from models.tts.misaki import misaki_g2p

BUNDLED = "heart"
"""The one hibari voice inside the wheel (others are downloaded from the hub: not offline)."""
GAIN = 1.6
"""hibari speaks more softly than Kokoro's af_heart: this makes it as loud by RMS on the same
replies (bench tts), so a reply whose first clause it speaks (``tts.lead``) does not jump in
level where Kokoro takes over."""
SEED = 0
"""hibari's noise is seeded: the same text sounds the same in every call."""
TAIL_KEEP_S = 0.1
"""hibari ends each chunk with silence of its own; kept this long, as kokoro-onnx keeps between
its batches, so its clauses follow each other as Kokoro's do."""

class HibariTTS(TTS):
    """hibari on onnxruntime, one intra-op thread; 24 kHz output."""

    sample_rate = 24000
    narrow = True

    def __init__(self, options: TTSOptions, scheduler: Scheduler | None = None):
        self.scheduler = scheduler
        try:
            from hibari import Hibari
        except ImportError as e:
            raise ModelMissingError("hibari-tts missing: pip install hibari-tts==0.2.1") from e
        voice = options.voice if options.backend == "hibari" else BUNDLED
        if voice != BUNDLED:
            raise ModelMissingError(
                f"tts.voice '{voice}': hibari-tts bundles only the voice '{BUNDLED}' "
                f"(the others download from the hub)")
        self.options = options
        self._hibari = Hibari(voice=voice, threads=1, g2p=misaki_g2p(british=False))
        self.model_name = "hibari"
        self.voice = voice
        self._lock = threading.Lock()

    def _synthesize_impl(self, text: str) -> np.ndarray:
        with self._lock:
            audio = self._hibari(text, speed=self.options.speed, seed=SEED)
        audio = np.clip(audio * GAIN, -1.0, 1.0).astype(np.float32, copy=False)
        loud = np.flatnonzero(np.abs(audio) > SILENCE_PEAK)
        if len(loud):
            audio = audio[: loud[-1] + int(TAIL_KEEP_S * self.sample_rate)]
        return audio
