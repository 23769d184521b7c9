"""``callagent bench pipeline|asr|call``: benchmarks that print numbers and ratios."""

from __future__ import annotations

import argparse
import importlib

BENCHES = {
    "pipeline": ("agent.bench_pipeline", "speech loop on 5 fixed utterances, p50/p95 per stage"),
    "asr": ("agent.bench_asr", "ASR backends: load time, latency, RTF, optimization speedups"),
    "wer": ("agent.bench_wer", "ASR word error rate on 8 kHz phone audio per model and voice"),
    "call": ("agent.bench_call", "voice-to-voice on the wire with sipp, 1 and 4 calls"),
}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="benchmarks (numbers, not pass/fail)")
    bsub = p.add_subparsers(dest="bench", required=True)
    for name, (module, help_text) in BENCHES.items():
        bp = bsub.add_parser(name, help=help_text)
        mod = importlib.import_module(module)
        mod.add_arguments(bp)
        bp.set_defaults(func=mod.run)
