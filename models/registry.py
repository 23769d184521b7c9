"""Build stage backends from options, importing a backend module only when a profile names it.

Models are loaded once per distinct options and shared by every call in the process; a
second profile with the same ASR options gets the same object. Every ASR, LLM, TTS and
end-of-turn model gets the cache's scheduler as a constructor argument (``scheduler=``), so it
knows whether pairing is on while it loads.
"""

from __future__ import annotations

import importlib
import threading
from typing import Any

from dialplan.options import ASROptions, LLMOptions, TTSOptions
from models.scheduler import Scheduler

BACKENDS = {
    ("asr", "faster-whisper"): "models.asr.faster_whisper:FasterWhisperASR",
    ("asr", "voxtral"): "models.asr.voxtral:VoxtralASR",
    ("llm", "llama-cpp"): "models.llm.llama_cpp:LlamaCppLLM",
    ("llm", "llama-batch"): "models.llm.llama_batch.engine:BatchedLlamaLLM",
    ("llm", "openai"): "models.llm.openai:OpenAILLM",
    ("llm", "xllamacpp"): "models.llm.xllamacpp:XLlamaCppLLM",
    ("tts", "kokoro-onnx"): "models.tts.kokoro_onnx:KokoroOnnxTTS",
    ("tts", "kokoro-torch"): "models.tts.kokoro_torch:KokoroTorchTTS",
    ("tts", "piper"): "models.tts.piper:PiperTTS",
    ("tts", "hibari"): "models.tts.hibari:HibariTTS",
    ("vad", "silero"): "models.vad.silero:SileroVAD",
    ("eot", "smart-turn"): "models.eot.smart_turn:SmartTurn",
}
SCHEDULED_STAGES = ("asr", "llm", "tts", "eot")
"""Stages whose models take the scheduler (a VAD runs on the call's own thread, no job)."""


def backend_class(stage: str, backend: str) -> type:
    """Import and return the class implementing ``backend`` for ``stage``."""
    target = BACKENDS.get((stage, backend))
    if target is None:
        known = ", ".join(b for s, b in BACKENDS if s == stage)
        raise ValueError(f"unknown {stage} backend '{backend}' (known: {known})")
    module, name = target.split(":")
    return getattr(importlib.import_module(module), name)


class ModelCache:
    """Process-wide cache: one loaded model per (stage, backend, options).

    Args:
        scheduler: the process's scheduler, handed to every model it builds (None: a new one
            of its own, as for a test or a bench that loads models alone).
    """

    def __init__(self, scheduler: Scheduler | None = None) -> None:
        self.scheduler = scheduler if scheduler is not None else Scheduler()
        self._models: dict[tuple, Any] = {}
        self._locks: dict[tuple, threading.Lock] = {}
        self._guard = threading.Lock()

    def get(self, stage: str, backend: str, options: Any = None) -> Any:
        key = (stage, backend, options)
        with self._guard:
            if key in self._models:
                return self._models[key]
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:  # load outside the guard so two different models load in parallel
            if key not in self._models:
                cls = backend_class(stage, backend)
                args = () if options is None else (options,)
                kwargs = {"scheduler": self.scheduler} if stage in SCHEDULED_STAGES else {}
                self._models[key] = cls(*args, **kwargs)
            return self._models[key]

    def asr(self, o: ASROptions):
        return self.get("asr", o.backend, o)

    def llm(self, o: LLMOptions):
        return self.get("llm", o.backend, o)

    def tts(self, o: TTSOptions):
        tts = self.get("tts", o.backend, o)
        if o.lead and tts.lead is None:
            tts.lead = self.get("tts", o.lead, TTSOptions(backend=o.lead, speed=o.speed))
        return tts

    def vad(self):
        return self.get("vad", "silero")

    def eot(self, model: str):
        """The end-of-turn model named by ``audio.end_of_turn`` (a bundled name or a path)."""
        return self.get("eot", "smart-turn", model)

    def loaded(self) -> list[tuple[str, str]]:
        return [(stage, backend) for stage, backend, _ in self._models]
