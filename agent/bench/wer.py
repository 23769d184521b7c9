"""``callagent bench wer``: ASR word error rate on phone-line audio, per model and voice.

The 5 sample questions are spoken by several voices (espeak-ng at 3 rates and 2 accents, two
Kokoro voices), sent through an 8 kHz μ-law line, and transcribed by each model: the
measurement behind the default ASR model. No recordings ship, so synthetic voices stand in.
"""

from __future__ import annotations

import argparse
import time

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from agent.bench.samples import QUESTIONS, spoken
from agent.bench.scoring import wer
from dialplan.options import ASROptions, TTSOptions
from models.audio import ASR_RATE, PHONE_RATE, pcm16_to_float, resample, through_phone_line
from models.registry import ModelCache

ESPEAK_VOICES = (("en-us", 175), ("en-us", 160), ("en-us", 140), ("en-gb", 160), ("en-us+f3", 160))
KOKORO_VOICES = ("jm_kumo", "jf_alpha")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--models", nargs="+", default=["base", "tiny.en"])
    p.add_argument("--law", choices=("ulaw", "alaw"), default="ulaw")


def _line(audio, rate: int, law: str):
    return resample(pcm16_to_float(through_phone_line(audio, rate, law)), PHONE_RATE, ASR_RATE)


def run(args: argparse.Namespace) -> int:
    cache = ModelCache()
    sets = {
        f"espeak {v} {wpm}wpm": [_line(*spoken(q, voice=v, wpm=wpm), args.law) for q in QUESTIONS]
        for v, wpm in ESPEAK_VOICES
    }
    for voice in KOKORO_VOICES:
        tts = cache.tts(TTSOptions(voice=voice))
        sets[f"kokoro {voice}"] = [
            _line(tts.synthesize(q).audio, tts.sample_rate, args.law) for q in QUESTIONS
        ]
    refs = list(QUESTIONS)
    table = Table(title=f"ASR WER on 8 kHz {args.law} speech ({len(QUESTIONS)} questions/voice)")
    table.add_column("voice")
    for model in args.models:
        table.add_column(f"{model} WER", justify="right")
        table.add_column(f"{model} s/question", justify="right")
    rows: dict[str, list[str]] = {name: [] for name in sets}
    all_refs: list[str] = []
    all_hyps: dict[str, list[str]] = {m: [] for m in args.models}
    with Progress(console=Console(stderr=True)) as bar:
        task = bar.add_task("transcribing", total=len(args.models) * len(sets))
        for model in args.models:
            asr = cache.asr(ASROptions(model=model))
            for name, clips in sets.items():
                t0 = time.monotonic()
                hyps = [asr.transcribe(c).text for c in clips]
                per = (time.monotonic() - t0) / len(clips)
                rows[name] += [f"{wer(refs, hyps):.1%}", f"{per:.2f}"]
                all_hyps[model] += hyps
                if model == args.models[0]:
                    all_refs += refs
                bar.advance(task)
    for name, cells in rows.items():
        table.add_row(name, *cells)
    table.add_row(
        "all", *[c for m in args.models for c in (f"{wer(all_refs, all_hyps[m]):.1%}", "")]
    )
    Console().print(table)
    return 0
