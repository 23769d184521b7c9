"""Several utterances through Whisper in one CTranslate2 pass: one encode, one greedy generate.

faster-whisper's ``transcribe`` takes one audio; its batched pipeline splits one long audio.
Calls' utterances are short and separate, so this does for a batch of them what ``transcribe``
does for one utterance under :class:`~models.asr.faster_whisper.FasterWhisperASR`'s settings
(one window, no timestamps, one temperature, the same prompt, suppressed tokens and no-speech
rule), with faster-whisper's own feature extractor, tokenizer and prompt, for utterances of
one encoder window and token budget (the caller groups them). A batch encodes and decodes in
less time than its utterances one by one, and so shortens the ASR time that callers wait on
for first audio (bench call, 4 at once).
"""

from __future__ import annotations

import numpy as np

from dialplan.options import ASROptions
from models.asr.base import Hypothesis

NO_SPEECH_THRESHOLD = 0.6
LOG_PROB_THRESHOLD = -1.0
"""faster-whisper's defaults: a window more likely silence than speech, decoded with low
confidence, has no segment."""
MAX_INITIAL_TIMESTAMP_S = 1.0
HOP = 160
"""Samples of 16 kHz audio a log-mel frame advances."""
WINDOW_FRAMES = 3000
"""Whisper's fixed 30 s window, in frames, which faster-whisper pads every segment to."""


def padded(audio: np.ndarray, frames: int | None) -> np.ndarray:
    """``audio`` followed by digital silence up to its encoder window (``frames``; None: 30 s).

    Whisper was trained on audio padded with silence, whose log-mel frames sit at the clip's
    floor. faster-whisper pads the *features* with zeros instead, a level well above that floor,
    and in a short window Whisper then stops early on fast speakers (a whole question heard
    as its first word, or its last word cut to a letter: bench answers, hibari and Kokoro
    voices) with low confidence. Padding the audio gives the encoder what it was trained on.
    """
    want = (frames or WINDOW_FRAMES) * HOP
    return audio if len(audio) >= want else np.pad(audio, (0, want - len(audio)))


class BatchDecoder:
    """Batched Whisper decoding over a loaded faster-whisper ``WhisperModel``."""

    def __init__(self, model, options: ASROptions, english_only: bool):
        import ctranslate2
        from faster_whisper.tokenizer import Tokenizer
        from faster_whisper.transcribe import get_suppressed_tokens

        self._ct2 = ctranslate2
        self._model = model
        self._o = options
        language = "en" if english_only or not model.model.is_multilingual else options.language
        self._tokenizer = Tokenizer(model.hf_tokenizer, model.model.is_multilingual,
                                    task="transcribe", language=language)
        previous = []
        if options.initial_prompt:
            previous = self._tokenizer.encode(" " + options.initial_prompt.strip())
        self._prompt = model.get_prompt(self._tokenizer, previous, without_timestamps=True,
                                        prefix=None,
                                        hotwords=" ".join(options.hotwords) or None)
        self._suppress = get_suppressed_tokens(self._tokenizer, [-1])
        self._max_initial = int(round(MAX_INITIAL_TIMESTAMP_S / model.time_precision))

    def decode(self, audios: list[np.ndarray], frames: int, budget: int) -> list[Hypothesis]:
        """Each utterance's text; ``frames``: their encoder window, ``budget``: new tokens."""
        return self.generate(self.encode(audios, frames), budget)

    def encode(self, audios: list[np.ndarray], frames: int):
        """The encoder's output for utterances of one window (a CTranslate2 StorageView)."""
        # Silence, not zero features, after the speech: see padded.
        feats = [self._model.feature_extractor(padded(a, frames))[:, :frames] for a in audios]
        x = self._ct2.StorageView.from_array(np.ascontiguousarray(np.stack(feats), np.float32))
        return self._model.model.encode(x, to_cpu=False)

    def generate(self, encoded, budget: int) -> list[Hypothesis]:
        """Greedy decoding of :meth:`encode`'s output, up to faster-whisper's ``budget``."""
        results = self._model.model.generate(
            encoded, [self._prompt] * encoded.shape[0],
            beam_size=self._o.beam_size, patience=1, length_penalty=1, repetition_penalty=1,
            no_repeat_ngram_size=0, max_length=len(self._prompt) + budget,
            return_scores=True, return_no_speech_prob=True, suppress_blank=True,
            suppress_tokens=self._suppress, max_initial_timestamp_index=self._max_initial)
        return [self._hypothesis(r) for r in results]

    def _hypothesis(self, result) -> Hypothesis:
        tokens = result.sequences_ids[0]
        n = len(tokens)
        avg_logprob = result.scores[0] * n / (n + 1)
        if result.no_speech_prob > NO_SPEECH_THRESHOLD and avg_logprob <= LOG_PROB_THRESHOLD:
            return Hypothesis("")
        text = self._tokenizer.decode(tokens).strip()
        if not text:
            return Hypothesis("")
        return Hypothesis(text, avg_logprob, result.no_speech_prob)
