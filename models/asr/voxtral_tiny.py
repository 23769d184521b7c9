"""Build and save a tiny random-weight Voxtral checkpoint (tests, ``bench asr --model tiny``).

Owns the shrunk :class:`~transformers.VoxtralConfig` and the on-disk layout of a checkpoint that
has no ``tekken.json``: ``config.json`` + ``model.safetensors`` + ``preprocessor_config.json``
(a :class:`~transformers.WhisperFeatureExtractor`) + ``callagent_prompt.json``, the marker that
tells :mod:`models.asr.voxtral_prompt` to use its minimal prompt builder. The weights are random,
so the text is gibberish; what the tiny model is for is checking that every optimisation gives
the same token ids as the eager path, through the real loading code. Imports transformers lazily.
"""

from __future__ import annotations

import json
from pathlib import Path

# Tekken ids of the special tokens in the real Voxtral tokenizer, reused so that the tiny prompt
# has the same shape as ``apply_transcription_request``'s: <s>[INST][BEGIN_AUDIO][AUDIO]*n[/INST]
# lang:xx[TRANSCRIBE] (mistral-common ``InstructTokenizerV7._encode_instruct_transcription``).
SPECIAL_IDS = {"bos": 1, "eos": 2, "inst": 3, "inst_end": 4, "audio": 24, "begin_audio": 25,
               "transcribe": 34}
NUM_SPECIAL = 100
"""Ids below this are special tokens; ids from here on decode as bytes (a tekken-like layout)."""
PROMPT_FILE = "callagent_prompt.json"
"""Marker file: a checkpoint holding it (and no tekken.json) uses the minimal prompt builder."""


def tiny_config(max_source_positions: int = 1500, vocab_size: int = 1000):
    """Return a shrunk VoxtralConfig that generates on CPU in milliseconds.

    Args:
        max_source_positions: Encoder positions per chunk; the encoder takes exactly twice as many
            mel frames (1500 = 30 s chunks, as in the real model).
        vocab_size: Text vocabulary size.

    Returns:
        A ``transformers.VoxtralConfig``.
    """
    from transformers import LlamaConfig, VoxtralConfig, VoxtralEncoderConfig

    audio = VoxtralEncoderConfig(
        hidden_size=64,
        intermediate_size=256,  # 4 x hidden: the projector stacks 4 frames per token, like 3B
        num_hidden_layers=2,
        num_attention_heads=4,
        num_mel_bins=128,
        max_source_positions=max_source_positions,
    )
    text = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=4096,
        bos_token_id=SPECIAL_IDS["bos"],
        eos_token_id=SPECIAL_IDS["eos"],
        pad_token_id=11,  # tekken's <pad>
        # Wider init than the 0.02 default: peakier logits, so greedy argmax is not decided by
        # float noise between kernels (we assert exact token equality across optimisations).
        initializer_range=0.2,
    )
    return VoxtralConfig(audio_config=audio, text_config=text, audio_token_id=SPECIAL_IDS["audio"])


def build_tiny_voxtral(dest: Path, seed: int = 0, max_source_positions: int = 1500) -> Path:
    """Build a random tiny Voxtral and save it as a loadable checkpoint directory.

    Args:
        dest: Directory to write (created if missing).
        seed: Torch seed for the random weights (same seed, same weights).
        max_source_positions: See :func:`tiny_config`.

    Returns:
        ``dest``.
    """
    import torch
    from transformers import VoxtralForConditionalGeneration, WhisperFeatureExtractor

    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    config = tiny_config(max_source_positions=max_source_positions)
    torch.manual_seed(seed)
    model = VoxtralForConditionalGeneration(config).eval()
    model.generation_config.bos_token_id = SPECIAL_IDS["bos"]
    model.generation_config.eos_token_id = SPECIAL_IDS["eos"]
    model.generation_config.pad_token_id = 11
    model.save_pretrained(dest)
    # 30 s chunks of 2 x max_source_positions frames at Whisper's 10 ms hop.
    chunk_s = 2 * max_source_positions * 160 // 16000
    WhisperFeatureExtractor(feature_size=128, chunk_length=chunk_s).save_pretrained(dest)
    marker = {"builder": "minimal", "special_ids": SPECIAL_IDS, "num_special": NUM_SPECIAL}
    (dest / PROMPT_FILE).write_text(json.dumps(marker, indent=2) + "\n")
    return dest
