"""``callagent bench pipeline``: the speech loop on 5 fixed spoken questions, p50/p95 per stage.

Each question is one simulated call through an 8 kHz μ-law line (faster than real time: stage
timings are wall-clock, the endpoint hangover is audio time). Targets on 2 cores:
voice-to-voice p50 <= 1.2 s, ASR RTF <= 0.15, TTS RTF <= 0.35.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from agent.bench import scoring
from agent.bench.samples import QUESTIONS, spoken
from agent.simulate import simulate
from agent.turn.runner import StageCache
from db.records import TurnRecord
from dialplan import Config

STAGES = (
    ("endpoint", "endpoint_ms"),
    ("ASR", "asr_ms"),
    ("LLM first token", "llm_ttft_ms"),
    ("first clause", "first_chunk_ms"),
    ("TTS first audio", "tts_first_audio_ms"),
    ("playout", "playout_ms"),
    ("LLM total", "llm_total_ms"),
    ("voice-to-voice", "voice_to_voice_ms"),
)
USES_CONFIG = True
TARGETS = {"voice_to_voice_ms": 1200.0, "asr_rtf": 0.15, "tts_rtf": 0.35}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", default="default")
    p.add_argument("--rounds", type=int, default=1, help="times to run the 5 questions")
    p.add_argument("--format", choices=("table", "json"), default="table")


def percentile(values: list[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if values else None


def summarize(turns: list[TurnRecord]) -> dict[str, dict[str, float | None]]:
    """p50/p95 of every stage and RTF over the turns."""
    out = {}
    for _, field in (*STAGES, ("", "asr_rtf"), ("", "tts_rtf")):
        vals = [getattr(t, field) for t in turns if getattr(t, field) is not None]
        out[field] = {"p50": percentile(vals, 50), "p95": percentile(vals, 95), "n": len(vals)}
    return out


def run(args: argparse.Namespace, config: Config) -> int:
    profile = config.profiles[args.profile]
    console = Console(stderr=True)
    t0 = time.monotonic()
    stages = StageCache().stages(profile)
    load_s = time.monotonic() - t0
    clips = [(q, *spoken(q)) for q in QUESTIONS]
    # Warm-up call: first inference allocates buffers; not counted.
    simulate(clips[0][1], clips[0][2], profile, stages, fast=True, source="bench")
    turns: list[TurnRecord] = []
    refs, hyps = [], []
    with Progress(console=console) as bar:
        task = bar.add_task("bench pipeline", total=len(clips) * args.rounds)
        for _ in range(args.rounds):
            for text, audio, rate in clips:
                call = simulate(audio, rate, profile, stages, fast=True, source="bench")
                turns.extend(call.turns)
                refs.append(text)
                hyps.append(" ".join(t.transcript for t in call.turns))
                bar.advance(task)
    summary = summarize(turns)
    wer = scoring.wer(refs, hyps)
    if args.format == "json":
        print(
            json.dumps(
                {
                    "profile": profile.name,
                    "load_s": load_s,
                    "wer": wer,
                    "turns": len(turns),
                    "stages": summary,
                }
            )
        )
        return 0
    table = Table(
        title=f"bench pipeline: profile {profile.name}, {len(turns)} turns, "
        f"asr {profile.asr.model}, llm {profile.llm.model}"
    )
    for col in ("stage", "p50", "p95", "target"):
        table.add_column(col, justify="right" if col != "stage" else "left")
    for name, field in STAGES:
        s = summary[field]
        table.add_row(
            f"{name} ms", _fmt(s["p50"], 0), _fmt(s["p95"], 0), _fmt(TARGETS.get(field), 0)
        )
    for name, field in (("ASR RTF", "asr_rtf"), ("TTS RTF", "tts_rtf")):
        s = summary[field]
        table.add_row(name, _fmt(s["p50"], 2), _fmt(s["p95"], 2), _fmt(TARGETS[field], 2))
    Console().print(table)
    Console().print(f"models loaded in {load_s:.1f} s; ASR WER on 8 kHz μ-law: {wer:.1%}")
    return 0


def _fmt(v: float | None, digits: int) -> str:
    return "-" if v is None else f"{v:.{digits}f}"
