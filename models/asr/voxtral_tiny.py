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

from models.asr.voxtral_prompt import PROMPT_FILE

# Tekken ids of the special tokens in the real Voxtral tokenizer, reused so that the tiny prompt
# has the same shape as ``apply_transcription_request``'s: <s>[INST][BEGIN_AUDIO][AUDIO]*n[/INST]
# lang:xx[TRANSCRIBE] (mistral-common ``InstructTokenizerV7._encode_instruct_transcription``).
SPECIAL_IDS = {"bos": 1, "eos": 2, "inst": 3, "inst_end": 4, "audio": 24, "begin_audio": 25,
               "transcribe": 34}
NUM_SPECIAL = 1000
"""Ids below this are special tokens; id ``NUM_SPECIAL + b`` is byte ``b``, as in tekken (whose
first 256 ranks are the single bytes), so the tiny vocabulary is 1000 specials + 256 bytes."""


def tiny_config(max_source_positions: int = 1500, vocab_size: int = NUM_SPECIAL + 256):
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


def write_tekken(dest: Path) -> Path:
    """Write a byte-only ``tekken.json`` (v7, with Voxtral's audio config) into ``dest``.

    With it, a tiny checkpoint loads through the real ``VoxtralProcessor`` path (needs
    mistral-common), which lets tests check that the minimal builder produces the same prompt.

    Args:
        dest: Checkpoint directory.

    Returns:
        The written file.
    """
    import base64

    # Control tokens every v7 instruct tokenizer looks up, at the real Voxtral ranks.
    names = dict(enumerate((
        "<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]",
        "[TOOL_RESULTS]", "[/TOOL_RESULTS]", "[TOOL_CALLS]", "[IMG]", "<pad>", "[IMG_BREAK]",
        "[IMG_END]", "[PREFIX]", "[MIDDLE]", "[SUFFIX]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]",
        "[TOOL_CONTENT]",
    )))
    names |= {24: "[AUDIO]", 25: "[BEGIN_AUDIO]", 34: "[TRANSCRIBE]"}
    special = [{"rank": i, "token_str": names.get(i, f"<SPECIAL_{i}>"), "is_control": True}
               for i in range(NUM_SPECIAL)]
    vocab = [{"rank": b, "token_bytes": base64.b64encode(bytes([b])).decode(),
              "token_str": bytes([b]).decode("latin-1")} for b in range(256)]
    tekken = {
        "config": {"pattern": r"[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+|\s+",
                   "num_vocab_tokens": 256, "default_vocab_size": NUM_SPECIAL + 256,
                   "default_num_special_tokens": NUM_SPECIAL, "version": "v7"},
        "vocab": vocab,
        "special_tokens": special,
        "audio": {"sampling_rate": 16000, "frame_rate": 12.5, "chunk_length_s": 30.0,
                  "audio_encoding_config": {"num_mel_bins": 128, "hop_length": 160,
                                            "window_size": 400},
                  "transcription_format": "instruct"},
    }
    path = Path(dest) / "tekken.json"
    path.write_text(json.dumps(tekken))
    return path
