"""The ASR stage interface: 16 kHz mono float32 utterance in, text out, timing recorded.

Backends implement ``_transcribe_impl`` (and optionally ``_transcribe_batch_impl``); the public
methods here time them, so every backend reports :class:`~models.metrics.ASRMetrics`, and run
them as jobs of the model's :attr:`~models.scheduled.Scheduled.scheduler` (metrics time the
compute, not the wait for a slot).
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from models.coalesce import Coalescer
from models.metrics import ASRMetrics
from models.scheduled import Scheduled

SAMPLE_RATE = 16000


@dataclass(frozen=True)
class Transcript:
    """What was said in one utterance, and how long it took to find out."""

    text: str
    metrics: ASRMetrics
    language: str | None = None
    avg_logprob: float | None = None
    """Mean token log-probability of the decoded text (None: the backend does not say)."""
    no_speech_prob: float | None = None
    """The model's probability that there was no speech at all."""


@dataclass(frozen=True)
class Hypothesis:
    """What a backend may return instead of bare text: the text and how sure it is."""

    text: str
    avg_logprob: float | None = None
    no_speech_prob: float | None = None


class ASR(Scheduled, ABC):
    """Speech recognition on whole utterances (VAD-bounded)."""

    backend: str = "asr"
    model_name: str = ""
    _coalescer: Coalescer[np.ndarray, Transcript] | None = None
    """Set by a backend whose batches run in one pass (:meth:`batch_waiting`)."""
    narrow: bool = False
    """A pass may run on one core beside another turn's job (the backend asks
    ``self.scheduler.cores()`` inside it which it got)."""

    def batch_waiting(self, max_batch: int) -> None:
        """Transcribe utterances that wait for the CPU together in one batch, up to ``max_batch``.

        For backends whose ``_transcribe_batch_impl`` runs a batch in one pass.
        """
        self._coalescer = (Coalescer(self.transcribe_batch, "asr", max_batch,
                                     scheduler=self.scheduler, narrow=self.narrow,
                                     key=self._pass_key)
                           if max_batch > 1 else None)

    def _pass_key(self, audio: np.ndarray) -> object:
        """Utterances with equal keys share one pass (None: every utterance may)."""
        return None

    def warm_up_lengths_s(self) -> tuple[float, ...]:
        """Input lengths the backend sizes its buffers for, to meet in :meth:`warm_up`."""
        return (1.0,)

    def warm_up(self) -> None:
        """Transcribe silence at each of :meth:`warm_up_lengths_s` (first-pass cost, memory)."""
        for s in self.warm_up_lengths_s():
            self.transcribe(np.zeros(int(SAMPLE_RATE * s), np.float32))

    def transcribe(self, audio: np.ndarray) -> Transcript:
        """Transcribe one utterance of 16 kHz mono float32 samples.

        With :meth:`batch_waiting`, in one batch with the other utterances waiting for the CPU.
        """
        if self._coalescer is not None:
            return self._coalescer.submit(audio)
        return self.transcribe_batch([audio])[0]

    def transcribe_batch(self, audios: list[np.ndarray]) -> list[Transcript]:
        """Transcribe several utterances; backends that batch do it in one pass."""
        audios = [np.ascontiguousarray(a, dtype=np.float32).reshape(-1) for a in audios]
        with self.scheduler.job("asr", narrow=self.narrow):
            if getattr(getattr(self, "options", None), "denoise", "off") == "rnnoise":
                from models.asr.denoise import denoise

                audios = [denoise(a, SAMPLE_RATE) for a in audios]
            if len(audios) > 1:
                self.scheduler.note(f"utterances={len(audios)}")
            started = time.monotonic()
            texts = self._transcribe_batch_impl(audios)
            ended = time.monotonic()
        return self._transcripts(audios, texts, started, ended)

    def transcribe_in_steps(self, audio: np.ndarray) -> Transcript:
        """Transcribe background audio (the words so far) in short scheduler jobs.

        A job is not preempted: a caller whose speech ends while a background pass runs waits
        for it. Backends that can split a pass (:meth:`_transcribe_steps`) run it as shorter
        jobs, between which urgent work goes first (and a cancel stops it); others run it as
        one job.
        """
        audio = np.ascontiguousarray(audio, dtype=np.float32).reshape(-1)
        started = time.monotonic()
        hyp = self._transcribe_steps(audio) if len(audio) else ""
        if hyp is None:
            return self.transcribe(audio)
        return self._transcripts([audio], [hyp], started, time.monotonic())[0]

    def _transcribe_steps(self, audio: np.ndarray) -> str | Hypothesis | None:
        """One utterance in several scheduler jobs (None: this backend cannot split it)."""
        return None

    def _transcripts(self, audios: list[np.ndarray], texts: list[str | Hypothesis],
                     started: float, ended: float) -> list[Transcript]:
        out = []
        for audio, hyp in zip(audios, texts, strict=True):
            hyp = hyp if isinstance(hyp, Hypothesis) else Hypothesis(hyp)
            m = ASRMetrics(
                model=self.model_name,
                started_at=started,
                ended_at=ended,
                audio_s=len(audio) / SAMPLE_RATE,
                backend=self.backend,
                batch_size=len(audios),
            )
            out.append(Transcript(text=hyp.text.strip(), metrics=m, avg_logprob=hyp.avg_logprob,
                                  no_speech_prob=hyp.no_speech_prob))
        return out

    def _transcribe_batch_impl(self, audios: list[np.ndarray]) -> list[str | Hypothesis]:
        return [self._transcribe_impl(a) if len(a) else "" for a in audios]

    @abstractmethod
    def _transcribe_impl(self, audio: np.ndarray) -> str | Hypothesis:
        """Return the text of one non-empty utterance (with its confidence, if known)."""
