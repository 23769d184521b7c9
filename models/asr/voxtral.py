"""Voxtral ASR backend: ``VoxtralForConditionalGeneration`` transcribing, tuned for latency.

Owns :class:`VoxtralASR` (loading, device/dtype/attention/compile/static-cache choices, batched
greedy ``generate()``, cross-call batching) and :func:`install_from` (checkpoint validation and
copy). Prompt building lives behind the seam in :mod:`models.asr.voxtral_prompt`; the collector
thread in :mod:`models.asr.voxtral_batcher`. transformers is imported only when a VoxtralASR is
built, with a :class:`~models.errors.ModelMissingError` naming the extra when it is missing.
Nothing here imports agent/ or dialplan/ code other than the options dataclasses.
"""

from __future__ import annotations

import importlib.util
import logging
import math
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dialplan.options import ASROptions, VoxtralOptions
from models.asr.base import ASR, SAMPLE_RATE, Transcript
from models.asr.voxtral_batcher import MicroBatcher
from models.errors import ModelMissingError
from models.scheduler import Scheduler

log = logging.getLogger(__name__)

MAX_NEW_TOKENS_CAP = 448
"""Hard ceiling on generated tokens per utterance, whatever its length."""
WEIGHT_PATTERNS = ("*.safetensors", "*.bin", "consolidated.*")


@dataclass(frozen=True)
class Resolved:
    """The concrete settings one VoxtralASR runs with, after resolving every ``auto``."""

    device: str
    dtype: str
    attention: str
    compile: bool
    static_cache: bool


def resolve(options: ASROptions, cuda_available: bool, flash_available: bool) -> Resolved:
    """Turn the ``auto`` switches of ``options`` into concrete settings for this machine.

    Args:
        options: ASR options (``device`` and ``voxtral``).
        cuda_available: Whether torch sees a CUDA device.
        flash_available: Whether the ``flash_attn`` package is importable.

    Returns:
        The resolved settings. Defaults: CUDA when present; bf16 on CUDA, fp32 on CPU; flash
        attention 2 on CUDA when installed, else SDPA; compile (and the static cache it needs)
        on CUDA only, because on CPU inductor compiles for minutes and the static cache makes
        each uncompiled decode step attend over the whole preallocated length.
    """
    vx: VoxtralOptions = options.voxtral
    device = options.device if options.device != "auto" else ("cuda" if cuda_available else "cpu")
    cuda = device.startswith("cuda")
    dtype = vx.dtype if vx.dtype != "auto" else ("bfloat16" if cuda else "float32")
    attention = vx.attention
    if attention == "auto":
        attention = "flash_attention_2" if cuda and flash_available else "sdpa"
    if attention == "flash_attention_2" and not (cuda and flash_available):
        log.warning("flash_attention_2 needs CUDA and flash_attn; using sdpa")
        attention = "sdpa"
    compile_ = vx.compile == "on" or (vx.compile == "auto" and cuda)
    static = vx.static_cache == "on" or (vx.static_cache == "auto" and compile_)
    return Resolved(device=device, dtype=dtype, attention=attention, compile=compile_,
                    static_cache=static)


def max_new_tokens(audio_s: float, tokens_per_second: float) -> int:
    """Upper bound on tokens for an utterance of ``audio_s`` seconds (greedy stops earlier)."""
    return min(MAX_NEW_TOKENS_CAP, math.ceil(audio_s * tokens_per_second) + 8)


def _require_transformers() -> None:
    if any(importlib.util.find_spec(m) is None for m in ("transformers", "torch")):
        raise ModelMissingError(
            "The Voxtral ASR backend needs transformers (and torch): "
            "pip install 'callagent[voxtral]'"
        )


def _resolve_source(model: str) -> str:
    """Return a loadable source: an existing directory, or a hub id when the hub is reachable."""
    path = Path(model).expanduser()
    if path.is_dir():
        if not (path / "config.json").exists():
            raise ModelMissingError(f"{path} has no config.json: not a Voxtral checkpoint")
        return str(path)
    looks_like_path = model.startswith((".", "/", "~")) or model.count("/") != 1
    # The hub's own reading of HF_HUB_OFFLINE (the CLI sets it): what from_pretrained obeys.
    from huggingface_hub import constants

    offline = constants.HF_HUB_OFFLINE
    if looks_like_path or offline:
        raise ModelMissingError(
            f"Voxtral model {model!r} not found" + (" (HF_HUB_OFFLINE is set)" if offline else "")
            + ": download a checkpoint directory and run "
            "'callagent models install voxtral --from PATH', or set [asr] model to its path."
        )
    return model


class VoxtralASR(ASR):
    """Voxtral speech recognition with batched greedy decoding.

    Args:
        options: ASR options; ``model`` is a checkpoint directory (or a hub id when online),
            ``language`` the spoken language ("" or "auto" lets the model detect it) and
            ``voxtral`` the optimisation switches.
        scheduler: the process's, whose jobs its passes run as (None: one of its own).

    Raises:
        ModelMissingError: transformers is missing, or the model cannot be found.
    """

    backend = "voxtral"

    def __init__(self, options: ASROptions, scheduler: Scheduler | None = None) -> None:
        self.scheduler = scheduler
        _require_transformers()
        import torch

        self.options = options
        self.vx = options.voxtral
        source = _resolve_source(options.model)
        self.model_name = Path(source).name if Path(source).is_dir() else source
        flash = importlib.util.find_spec("flash_attn") is not None
        self.settings = resolve(options, torch.cuda.is_available(), flash)
        self.language = None if options.language in ("", "auto") else options.language
        self._lock = threading.Lock()  # one generate() at a time: the model and cache are shared
        self._compile_failed_logged = False
        started = time.monotonic()
        self._load(source)
        self._batcher: MicroBatcher[np.ndarray, Transcript] | None = None
        if self.vx.max_batch > 1 and self.vx.batch_window_s > 0:
            self._batcher = MicroBatcher(
                self.transcribe_batch, self.vx.batch_window_s, self.vx.max_batch,
                name="voxtral-batcher",
            )
        self.load_s = time.monotonic() - started

    # -- loading --------------------------------------------------------------------------------

    def _load(self, source: str) -> None:
        import torch
        from transformers import CompileConfig, VoxtralConfig, VoxtralForConditionalGeneration

        from models.asr.voxtral_prompt import make_prompt_builder

        s = self.settings
        if s.device == "cpu":
            torch.set_num_threads(self.options.threads)
        config = VoxtralConfig.from_pretrained(source)
        if config.model_type != "voxtral":
            raise ModelMissingError(f"{source} is a {config.model_type!r} model, not voxtral")
        self.model = VoxtralForConditionalGeneration.from_pretrained(
            source, dtype=getattr(torch, s.dtype), attn_implementation=s.attention,
        ).to(s.device).eval()
        # Processor / feature extractor once per process, never per utterance.
        self.prompt = make_prompt_builder(source, config)
        gen = self.model.generation_config
        gen.do_sample, gen.num_beams = False, 1  # greedy: deterministic and the cheapest search
        gen.temperature = gen.top_p = gen.top_k = None
        gen.pad_token_id = self.prompt.pad_id
        gen.eos_token_id = list(self.prompt.eos_ids)
        if s.static_cache:
            gen.cache_implementation = "static"
            # One cache size for every call: a changing size would reallocate and recompile.
            one_chunk = len(self.prompt.prompts([np.zeros(SAMPLE_RATE, np.float32)],
                                                self.language)[0].token_ids)
            gen.max_cache_len = one_chunk + max_new_tokens(30.0, self.vx.tokens_per_second)
        if s.compile:
            cuda = s.device.startswith("cuda")
            # reduce-overhead = CUDA graphs, which only exist on CUDA; plain inductor elsewhere.
            cc = CompileConfig(mode="reduce-overhead" if cuda else "default", fullgraph=False)
            cc._compile_all_devices = True  # transformers only auto-compiles on accelerators
            gen.compile_config = cc
            gen.disable_compile = False
        else:
            gen.disable_compile = True  # a static cache alone must not trigger auto-compile
        if self.vx.warmup:
            self._warmup()

    def _warmup(self) -> None:
        """Run one utterance so lazy init (and compiling, when on) happens before the first call."""
        noise = np.random.default_rng(0).normal(0, 0.01, SAMPLE_RATE).astype(np.float32)
        started = time.monotonic()
        self._transcribe_batch_impl([noise])
        log.info("voxtral warm-up %.2f s (%s)", time.monotonic() - started, self.settings)

    # -- transcription --------------------------------------------------------------------------

    def transcribe(self, audio: np.ndarray) -> Transcript:
        """Transcribe one utterance; concurrent callers within the batch window share a batch."""
        if self._batcher is None:
            return super().transcribe(audio)
        return self._batcher.submit(audio)

    def close(self) -> None:
        """Stop the cross-call batcher (queued utterances are still transcribed)."""
        if self._batcher is not None:
            self._batcher.close()

    def __enter__(self) -> VoxtralASR:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _transcribe_impl(self, audio: np.ndarray) -> str:
        return self._transcribe_batch_impl([audio])[0]

    def _transcribe_batch_impl(self, audios: list[np.ndarray]) -> list[str]:
        texts = [""] * len(audios)
        todo = [i for i, a in enumerate(audios) if len(a)]
        step = max(1, self.vx.max_batch)
        for start in range(0, len(todo), step):
            idx = todo[start : start + step]
            for i, ids in zip(idx, self.generate_ids([audios[i] for i in idx]), strict=True):
                texts[i] = self.prompt.decode(ids)
        return texts

    def generate_ids(self, audios: list[np.ndarray]) -> list[list[int]]:
        """Greedy-decode several non-empty utterances in one ``generate()``.

        Args:
            audios: 16 kHz mono float32 utterances (one batch; no ``max_batch`` split here).

        Returns:
            Generated token ids per utterance, cut at EOS and at the utterance's own token bound,
            so the ids do not depend on which other utterances shared the batch.
        """
        batch = self.prompt.build(audios, self.language)
        bounds = [max_new_tokens(len(a) / SAMPLE_RATE, self.vx.tokens_per_second) for a in audios]
        with self._lock:
            out = self._generate(batch, bounds)
        eos = set(self.prompt.eos_ids)
        result = []
        for row, bound in zip(out[:, batch.prompt_len :].tolist(), bounds, strict=True):
            row = row[:bound]
            cut = next((k for k, t in enumerate(row) if t in eos), len(row))
            result.append(row[:cut])
        return result

    def _generate(self, batch: Any, bounds: list[int]) -> Any:
        import torch

        dev = self.settings.device
        kwargs = dict(
            input_ids=batch.input_ids.to(dev),
            attention_mask=batch.attention_mask.to(dev),
            input_features=batch.input_features.to(dev, getattr(torch, self.settings.dtype)),
            max_new_tokens=max(bounds),
            stopping_criteria=_row_budget(batch.prompt_len, bounds),
        )
        with torch.inference_mode():
            try:
                return self.model.generate(**kwargs)
            except Exception as exc:  # noqa: BLE001 - compile failures surface here
                if self.model.generation_config.disable_compile:
                    raise
                if not self._compile_failed_logged:
                    log.warning("voxtral: torch.compile failed (%s); decoding uncompiled", exc)
                    self._compile_failed_logged = True
                self.model.generation_config.disable_compile = True
                return self.model.generate(**kwargs)


def _row_budget(prompt_len: int, bounds: list[int]) -> Any:
    """A stopping criterion that retires each row once it generated its own bound of tokens.

    Without it a short utterance batched with a long one would keep decoding to the long one's
    bound; with it, generation stops as soon as every row is done (or hit EOS).
    """
    import torch
    from transformers import StoppingCriteria, StoppingCriteriaList

    limit = torch.tensor(bounds)

    class RowBudget(StoppingCriteria):
        def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
            done = (input_ids.shape[1] - prompt_len) >= limit
            return done.to(input_ids.device)

    return StoppingCriteriaList([RowBudget()])


def install_from(src: Path, dest: Path) -> Path:
    """Validate a Voxtral checkpoint directory and copy it into the model store.

    Args:
        src: Checkpoint directory (``config.json`` with ``model_type`` voxtral, and weights).
        dest: Store directory; the checkpoint lands in ``dest / src.name``.

    Returns:
        The installed directory.

    Raises:
        ModelMissingError: ``src`` is not a directory, or lacks a voxtral config or weights.
    """
    import json

    src, dest = Path(src).expanduser().resolve(), Path(dest).expanduser()
    if not src.is_dir():
        raise ModelMissingError(f"{src} is not a directory")
    cfg_path = src / "config.json"
    if not cfg_path.exists():
        raise ModelMissingError(f"{src} has no config.json")
    model_type = json.loads(cfg_path.read_text()).get("model_type")
    if model_type != "voxtral":
        raise ModelMissingError(f"{src} holds a {model_type!r} model, not voxtral")
    if not any(next(src.glob(p), None) for p in WEIGHT_PATTERNS):
        raise ModelMissingError(f"{src} has no weights (*.safetensors or *.bin)")
    target = dest / src.name
    if target.resolve() == src:
        return target
    if target.exists():
        shutil.rmtree(target)
    dest.mkdir(parents=True, exist_ok=True)
    # Copy, not symlink: the store must survive the user deleting their download folder.
    shutil.copytree(src, target)
    return target
