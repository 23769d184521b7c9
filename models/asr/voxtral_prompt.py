"""The Voxtral prompt seam: (utterances, language) in, model inputs out, and token ids back to text.

Two builders sit behind one interface, chosen from what the checkpoint directory holds:

- :class:`ProcessorPromptBuilder`: real checkpoints (a ``tekken.json`` is present, or a hub id):
  ``VoxtralProcessor.apply_transcription_request`` from transformers + mistral-common.
- :class:`MinimalPromptBuilder`: checkpoints marked by ``callagent_prompt.json`` (the tiny random
  model of :mod:`models.asr.voxtral_tiny`): Whisper log-mel features cut into the encoder's fixed
  chunks, and the same token layout as the real transcription template,
  ``<s>[INST][BEGIN_AUDIO][AUDIO]*n[/INST]lang:xx[TRANSCRIBE]``.

Both return per-utterance token lists and feature chunks; :func:`collate` left-pads them into one
batch, so everything after this module is the same code in tests and in production. This module
imports torch/transformers only inside functions called after the backend checked they exist.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from models.errors import ModelMissingError

SAMPLE_RATE = 16000
PROMPT_FILE = "callagent_prompt.json"
"""Marker file: a checkpoint holding it (and no tekken.json) uses the minimal prompt builder."""
HOP_LENGTH = 160
"""Whisper's mel hop (10 ms): frames = samples / 160."""


@dataclass
class Prompt:
    """One utterance's prompt: token ids and its mel feature chunks ``(chunks, mels, frames)``."""

    token_ids: list[int]
    features: Any


@dataclass
class PromptBatch:
    """Left-padded model inputs for one ``generate()``."""

    input_ids: Any
    """``(batch, prompt_len)`` int64."""
    attention_mask: Any
    """``(batch, prompt_len)``; 0 on left padding."""
    input_features: Any
    """``(total_chunks, mels, frames)``, utterances in batch order."""

    @property
    def prompt_len(self) -> int:
        return int(self.input_ids.shape[1])


def collate(prompts: list[Prompt], pad_id: int) -> PromptBatch:
    """Left-pad prompts into one batch (decoder-only generation continues at the right edge).

    Args:
        prompts: One prompt per utterance.
        pad_id: Token id used for padding (masked out, so its value does not matter).

    Returns:
        The batch; audio chunks are concatenated in batch order, matching the row-major order in
        which the model scatters audio embeddings into ``[AUDIO]`` placeholders.
    """
    import torch

    width = max(len(p.token_ids) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, p in enumerate(prompts):
        n = len(p.token_ids)
        ids[row, width - n :] = torch.tensor(p.token_ids, dtype=torch.long)
        mask[row, width - n :] = 1
    feats = torch.cat([torch.as_tensor(p.features) for p in prompts], dim=0)
    return PromptBatch(input_ids=ids, attention_mask=mask, input_features=feats)


class PromptBuilder(ABC):
    """Turns utterances into model inputs and generated ids into text."""

    kind: str = ""
    pad_id: int = 0
    eos_ids: tuple[int, ...] = ()

    @abstractmethod
    def prompts(self, audios: list[np.ndarray], language: str | None) -> list[Prompt]:
        """Return one prompt per utterance (16 kHz mono float32, non-empty)."""

    @abstractmethod
    def decode(self, ids: list[int]) -> str:
        """Return the text of generated ids, special tokens dropped."""

    def build(self, audios: list[np.ndarray], language: str | None) -> PromptBatch:
        """Return the left-padded batch for ``audios``."""
        return collate(self.prompts(audios, language), self.pad_id)


class MinimalPromptBuilder(PromptBuilder):
    """Prompt builder for checkpoints without ``tekken.json`` (the tiny test model).

    Text uses a byte-level stand-in for tekken: ids below ``num_special`` are special tokens and
    id ``num_special + b`` is byte ``b`` (higher ids wrap), enough to encode ``lang:xx`` and to
    decode whatever a random model emits.
    """

    kind = "minimal"

    def __init__(self, model_dir: Path, config: Any) -> None:
        from transformers import WhisperFeatureExtractor

        marker = json.loads((model_dir / PROMPT_FILE).read_text())
        self.ids: dict[str, int] = marker["special_ids"]
        self.num_special: int = marker["num_special"]
        self.fe = WhisperFeatureExtractor.from_pretrained(str(model_dir))
        audio = config.audio_config
        # The encoder accepts exactly 2 x max_source_positions frames per chunk (conv stride 2),
        # and the projector stacks intermediate/hidden frames into one text-side token.
        self.frames_per_chunk = 2 * audio.max_source_positions
        self.samples_per_chunk = self.frames_per_chunk * HOP_LENGTH
        self.tokens_per_chunk = (
            audio.max_source_positions * audio.hidden_size // audio.intermediate_size
        )
        self.pad_id = config.text_config.pad_token_id or 0
        self.eos_ids = (self.ids["eos"],)

    def features(self, audio: np.ndarray) -> np.ndarray:
        """Log-mel chunks ``(chunks, mels, frames)`` of one utterance, padded to whole chunks."""
        # Pad to whole chunks like VoxtralProcessor (pad_to_multiple_of=480000 for 30 s): long
        # audio becomes several chunks that the encoder sees as separate batch rows.
        chunks = max(1, -(-len(audio) // self.samples_per_chunk))
        padded = np.zeros(chunks * self.samples_per_chunk, dtype=np.float32)
        padded[: len(audio)] = audio
        mel = self.fe(
            padded, sampling_rate=SAMPLE_RATE, padding=False, truncation=False,
            return_tensors="np",
        )["input_features"][0]
        mel = mel[:, : chunks * self.frames_per_chunk]
        return mel.reshape(mel.shape[0], chunks, self.frames_per_chunk).transpose(1, 0, 2).copy()

    def prompts(self, audios: list[np.ndarray], language: str | None) -> list[Prompt]:
        out = []
        ids = self.ids
        lang = self._encode(f"lang:{language}") if language else []
        for audio in audios:
            feats = self.features(audio)
            n_audio = feats.shape[0] * self.tokens_per_chunk
            tokens = [ids["bos"], ids["inst"], ids["begin_audio"], *[ids["audio"]] * n_audio,
                      ids["inst_end"], *lang, ids["transcribe"]]
            out.append(Prompt(token_ids=tokens, features=feats))
        return out

    def _encode(self, text: str) -> list[int]:
        return [self.num_special + b for b in text.encode()]

    def decode(self, ids: list[int]) -> str:
        data = bytes((i - self.num_special) % 256 for i in ids if i >= self.num_special)
        return data.decode("utf-8", errors="replace")


class ProcessorPromptBuilder(PromptBuilder):
    """Prompt builder for real checkpoints: transformers' ``VoxtralProcessor`` + mistral-common."""

    kind = "processor"

    def __init__(self, source: str, config: Any) -> None:
        from transformers import AutoProcessor

        try:
            self.processor = AutoProcessor.from_pretrained(source)
        except (OSError, ValueError, ImportError) as exc:
            raise ModelMissingError(
                f"Cannot load the Voxtral processor from {source!r} ({exc}). Real checkpoints "
                "need their tekken.json and mistral-common: pip install 'callagent[voxtral]'."
            ) from exc
        self.source = source
        tok = self.processor.tokenizer
        self.pad_id = tok.pad_token_id if tok.pad_token_id is not None else 11
        self.eos_ids = (tok.eos_token_id,)
        audio = config.audio_config
        self.tokens_per_chunk = (
            audio.max_source_positions * audio.hidden_size // audio.intermediate_size
        )

    def prompts(self, audios: list[np.ndarray], language: str | None) -> list[Prompt]:
        inputs = self.processor.apply_transcription_request(
            audio=list(audios), model_id=self.source, language=language,
            sampling_rate=SAMPLE_RATE, format=["wav"] * len(audios),
        )
        ids, mask, feats = inputs["input_ids"], inputs["attention_mask"], inputs["input_features"]
        audio_id = self.processor.audio_token_id
        # Per-row chunk counts follow from the [AUDIO] count; split the stacked features back.
        per_chunk = self.tokens_per_chunk  # 375 for the 3B/24B checkpoints (30 s chunks)
        out, start = [], 0
        for row in range(ids.shape[0]):
            tokens = ids[row][mask[row].bool()].tolist()
            chunks = max(1, tokens.count(audio_id) // per_chunk)
            out.append(Prompt(token_ids=tokens, features=feats[start : start + chunks]))
            start += chunks
        return out

    def decode(self, ids: list[int]) -> str:
        return self.processor.tokenizer.decode(ids, skip_special_tokens=True)


def make_prompt_builder(source: str, config: Any) -> PromptBuilder:
    """Pick the prompt builder for a checkpoint.

    Args:
        source: Local checkpoint directory or hub id.
        config: The loaded ``VoxtralConfig``.

    Returns:
        The processor builder when the checkpoint has ``tekken.json`` (or is a hub id), else the
        minimal builder when it carries ``callagent_prompt.json``.

    Raises:
        ModelMissingError: A local directory with neither file.
    """
    path = Path(source)
    if not path.is_dir() or (path / "tekken.json").exists():
        return ProcessorPromptBuilder(source, config)
    if (path / PROMPT_FILE).exists():
        return MinimalPromptBuilder(path, config)
    raise ModelMissingError(
        f"{path} has no tekken.json (real Voxtral checkpoints ship one) and no {PROMPT_FILE}; "
        "copy the whole checkpoint directory: callagent models install voxtral --from PATH."
    )
