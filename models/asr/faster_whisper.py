"""faster-whisper (CTranslate2) ASR backend; the offline default.

Greedy decoding (beam 5 was no better on the line for its time: bench wer), no timestamps, no
VAD filter (utterances are VAD-bounded), and a token budget from the utterance's length. The
model is the profile's: ``bench wer`` is what chose base over tiny.en.
"""

from __future__ import annotations

import math
import threading
from pathlib import Path

import numpy as np

from dialplan.options import ASROptions
from models import catalog
from models.asr.base import ASR, Hypothesis
from models.asr.whisper_batch import HOP, WINDOW_FRAMES, padded
from models.audio import ASR_RATE
from models.errors import ModelMissingError
from models.scheduler import Scheduler

TOKENS_PER_S = 8
"""Fast speech is ~4 words (~5 tokens) a second: more than this is a decoding loop. Greedy
decoding does loop now and then on line audio ("the the the..." to the 448-token limit: bench
wer), each loop costing seconds of decoding and a nonsense answer."""


MAX_NEW_TOKENS = 200
"""Whisper's window is 448 tokens, prompt included, and faster-whisper keeps up to 224 of an
``initial_prompt`` (plus hotwords and special tokens): 200 always fits beside them."""


def max_tokens(duration_s: float) -> int:
    """The most tokens an utterance this long can hold (a bound on runaway decoding).

    Counted in started seconds, like the encoder's window, so utterances that share a window
    (with a whole-second ``window_margin_s``) share a budget too, and can decode in one batch
    exactly as each would alone (the budget of a loop decides where it stops).

    What comes back is about half of it: faster-whisper passes ``len(prompt) + max_new_tokens``
    as CTranslate2's ``max_length``, and CTranslate2's Whisper decodes at most half of that
    (``min(max_length / 2, ...)``, CTranslate2 issue 1856: a result holds ``max_length // 2``
    tokens). So the cap is half of ``TOKENS_PER_S`` a second. Twice the budget changes few ``bench
    wer`` transcripts, even of fast speakers through the phone line: loops run on, and fast
    ones gain their final "." (no word was cut). Not changed here: it needs a full ``bench
    wer`` run.
    """
    return min(MAX_NEW_TOKENS, TOKENS_PER_S * math.ceil(duration_s) + 8)


FRAMES_PER_S = ASR_RATE // HOP
"""Whisper's log-mel frames per second of audio."""
WARM_UP_MAX_S = 10
"""The warm-up meets every encoder window of utterances up to this long (whole seconds)."""


def _short_window_model(base: type) -> type:
    """``WhisperModel`` whose encoder reads only the frames that hold the utterance.

    faster-whisper pads every segment's features to 30 s before ``encode``, and the encoder's
    time goes mostly to the padding (bench wer, ``window_margin_s`` against the full window).
    CTranslate2's Whisper encoder accepts a shorter input, and the decoder attends to what it
    gets, so the padding is cut off here, the one place faster-whisper hands features over.
    """

    class ShortWindowWhisper(base):  # type: ignore[misc, valid-type]
        frames = threading.local()
        """Frames to keep for the transcription running on this thread (None: all)."""

        def encode(self, features):
            keep = getattr(self.frames, "n", None)
            if keep is not None and features.shape[-1] > keep:
                features = features[..., :keep]
            return super().encode(features)

    return ShortWindowWhisper


class FasterWhisperASR(ASR):
    """Whisper through CTranslate2 (int8 on CPU)."""

    backend = "faster-whisper"

    def __init__(self, options: ASROptions, scheduler: Scheduler | None = None):
        self.scheduler = scheduler  # first: whether to load the one-thread twins is its pairs
        try:
            from faster_whisper import WhisperModel
        except ImportError as e:
            raise ModelMissingError(
                "faster-whisper missing: pip install faster-whisper==1.2.1"
            ) from e
        self.options = options
        self.model_name = options.model
        path = self._model_dir(options.model)
        device = "cuda" if options.device == "cuda" else "cpu"
        self._wide = _short_window_model(WhisperModel)(
            str(path),
            device=device,
            compute_type=options.compute_type,
            cpu_threads=options.threads,
            num_workers=1,
        )
        # For passes the scheduler runs on one core beside another job: two workers of one
        # thread (two such passes may run at once). A pass is slower on one thread, but two
        # side by side get through more than one on two threads beside an LLM or TTS job
        # (bench call, 4 at once).
        self._one = None
        self._one_warm = False
        if device == "cpu" and options.threads > 1 and self.scheduler.pairs:
            self._one = _short_window_model(WhisperModel)(
                str(path), device=device, compute_type=options.compute_type, cpu_threads=1,
                num_workers=2)
            self.narrow = True
        self._english_only = path.name.endswith(".en") or options.model.endswith(".en")
        self._decoders: dict[int, object] = {}
        self.batch_waiting(options.max_batch)

    @property
    def _model(self):
        """The model for the running job: one thread if the scheduler gave it one core."""
        return self._one if self._one is not None and self.scheduler.cores() == 1 else self._wide

    @staticmethod
    def _model_dir(name: str) -> Path:
        if catalog.lookup(name) is not None:
            p = catalog.resolve(name, "asr")
            return p.parent if p.is_file() else p
        p = Path(name).expanduser()
        if p.is_dir():
            return p
        # A hub id (e.g. "Systran/faster-whisper-small") works for users who are online.
        from faster_whisper.utils import download_model

        try:
            return Path(download_model(name))
        except Exception as e:  # offline: say what would work
            raise ModelMissingError(
                f"ASR model '{name}' is not bundled, not a local directory, and the hub is "
                f"unreachable ({e.__class__.__name__}); bundled: tiny.en, base"
            ) from e

    def warm_up_lengths_s(self) -> tuple[float, ...]:
        """One utterance per encoder window of questions up to 10 s.

        CTranslate2 keeps kernels and buffers per input length; meeting them here keeps that
        growth out of the first calls (after a one-length warm-up the process grows through
        them; after this one it stays flat: bench soak). Longer utterances are rare and add
        their window when they come.
        """
        if self.options.window_margin_s < 0:
            return (1.0,)  # the full 30 s window: one length
        return tuple(float(s) for s in range(1, WARM_UP_MAX_S + 1))

    def warm_up(self) -> None:
        """Both models meet every window: the one-thread one is used under load only."""
        super().warm_up()
        if self._one is None or self._one_warm:
            return  # once per model: every profile that uses it warms it up
        self._one_warm = True
        from concurrent.futures import ThreadPoolExecutor

        def warm(_: int) -> None:
            for s in self.warm_up_lengths_s():
                audio = np.zeros(int(ASR_RATE * s), np.float32)
                shape = self._pass_shape(audio)
                if shape is not None:
                    self._decoder(self._one).decode([audio], *shape)

        with ThreadPoolExecutor(2) as pool:  # side by side: both workers meet the windows
            list(pool.map(warm, range(2)))

    def _window_frames(self, audio: np.ndarray) -> int | None:
        """Encoder frames for this utterance (None: Whisper's full 30 s window)."""
        margin = self.options.window_margin_s
        # Whole seconds (even frames, for the encoder's stride-2 convolution): every distinct
        # input length costs the CPU backend kernels and buffers it keeps. One length per
        # utterance grew a process with every transcription, never levelling off; whole
        # seconds, at most 25 lengths, level off after the first calls (bench soak).
        window_s = math.ceil(len(audio) / ASR_RATE + margin)
        if margin >= 0 and window_s * FRAMES_PER_S < WINDOW_FRAMES:
            return window_s * FRAMES_PER_S
        return None

    def _transcribe_batch_impl(self, audios: list[np.ndarray]) -> list[str | Hypothesis]:
        """Utterances of one encoder window and token budget in one pass, others alone.

        Only equal windows share a pass: padding an utterance to a longer one's window changes
        what Whisper hears (base: one utterance came out in other words alone and in a window of
        its own length than padded 1 s more: bench asr). And only
        equal budgets: where a loop stops depends on it. An unknown language is detected per
        utterance, alone.
        """
        out: list[str | Hypothesis] = ["" for _ in audios]
        groups: dict[tuple[int, int] | None, list[int]] = {}
        for i, a in enumerate(audios):
            if len(a):
                groups.setdefault(self._pass_shape(a), []).append(i)
        for key, members in groups.items():
            if key is None or len(members) == 1:
                for i in members:
                    out[i] = self._transcribe_impl(audios[i])
                continue
            frames, budget = key
            hyps = self._decoder().decode([audios[i] for i in members], frames, budget)
            for i, hyp in zip(members, hyps, strict=True):
                out[i] = hyp
        return out

    def _transcribe_steps(self, audio: np.ndarray) -> Hypothesis | None:
        """The encoder as one job, the decoder as another.

        For a short question the encoder, with the features, is the larger part of a pass.
        Decoding in jobs of 4 tokens (each step reads the tokens so far again) cost more in
        all, for jobs no shorter than the encoder's: not done (bench call).
        """
        shape = self._pass_shape(audio)
        if shape is None:
            return None
        frames, budget = shape
        decoder = self._decoder()
        with self.scheduler.job("asr"):
            self.scheduler.note("encode")
            encoded = decoder.encode([audio], frames)
        with self.scheduler.job("asr"):
            self.scheduler.note("decode")
            return decoder.generate(encoded, budget)[0]

    def _pass_key(self, audio: np.ndarray) -> object:
        """Under pairing, only utterances of one pass share a job: the others run side by side.

        Whisper runs a group of different windows one after another (bench call, 4 at once);
        as jobs of their own, two run at once on a core each. Without pairing one job still
        runs them all (fewer hand-offs).
        """
        return self._pass_shape(audio) if self.narrow else None

    def _pass_shape(self, audio: np.ndarray) -> tuple[int, int] | None:
        """Encoder window and token budget of a pass through :class:`BatchDecoder`.

        None where only faster-whisper's own ``transcribe`` will do: Whisper's full 30 s
        window, or a language still to be detected.
        """
        frames = self._window_frames(audio)
        if frames is None or not (self._english_only or self.options.language):
            return None
        return frames, max_tokens(len(audio) / ASR_RATE)

    def _decoder(self, model=None):
        model = model or self._model
        if id(model) not in self._decoders:
            from models.asr.whisper_batch import BatchDecoder

            self._decoders[id(model)] = BatchDecoder(model, self.options, self._english_only)
        return self._decoders[id(model)]

    def _transcribe_impl(self, audio: np.ndarray) -> Hypothesis:
        o = self.options
        model = self._model
        model.frames.n = self._window_frames(audio)
        try:
            return self._decode(model, padded(audio, model.frames.n), o,
                                max_tokens(len(audio) / ASR_RATE))
        finally:
            model.frames.n = None

    def _decode(self, model, audio: np.ndarray, o: ASROptions, budget: int) -> Hypothesis:
        segments, _info = model.transcribe(
            audio,
            language=None if self._english_only else (o.language or None),
            beam_size=o.beam_size,
            temperature=0.0,
            condition_on_previous_text=False,
            initial_prompt=o.initial_prompt or None,
            hotwords=" ".join(o.hotwords) or None,
            without_timestamps=True,
            vad_filter=False,  # utterances are already VAD-bounded
            max_new_tokens=budget,
        )
        segments = list(segments)
        text = " ".join(s.text.strip() for s in segments)
        if not segments:
            return Hypothesis(text)
        # Weighted by segment length in tokens, as Whisper's own fallback rule averages.
        weights = [max(1, len(s.tokens)) for s in segments]
        logprob = sum(s.avg_logprob * w for s, w in zip(segments, weights, strict=True))
        return Hypothesis(text, logprob / sum(weights), max(s.no_speech_prob for s in segments))
