"""``callagent bench asr``: ASR load time, latency p50/p95, RTF and optimisation speedups.

Owns the ASR benchmark only: utterances are espeak-ng sentences resampled to 16 kHz with soxr;
each variant (for ``--compare``: eager, SDPA, SDPA + static cache, optional compile, batched, and
the backend's own defaults) runs on the same utterances, and its speedup over eager is printed
with whether its transcripts equal eager's. Numbers only, no pass/fail. Backends are imported
only when benchmarked; no pipeline logic lives here.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from bench.header import markdown_header, markdown_table
from db.stats import percentile
from dialplan.options import ASROptions, VoxtralOptions
from models.audio import ASR_RATE

EAGER = VoxtralOptions(attention="eager", dtype="float32", compile="off", static_cache="off",
                       batch_window_s=0.0)


@dataclass
class Result:
    """One benchmarked variant."""

    name: str
    load_s: float
    latencies_s: list[float] = field(default_factory=list)
    audio_s: float = 0.0
    """Seconds of audio transcribed (all rounds)."""
    texts: list[str] = field(default_factory=list)
    batched: bool = False
    """Latencies are each batch's wall time, counted for every utterance in it."""
    total_s: float = 0.0
    """Wall time of all transcriptions (a batch counts once)."""

    @property
    def rtf(self) -> float:
        return self.total_s / self.audio_s if self.audio_s else 0.0

    def pct_ms(self, q: float) -> str:
        """The ``q``-th latency percentile in ms, for the table."""
        v = percentile(self.latencies_s, q)
        return "-" if v is None else f"{v * 1000:.1f}"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register the ``bench asr`` options on ``p``."""
    p.add_argument("--backend", choices=("voxtral", "faster-whisper"), default="voxtral")
    p.add_argument("--model", default=None,
                   help="voxtral: checkpoint dir, hub id or 'tiny' (random weights, built into "
                        "a temp dir; default); faster-whisper: tiny.en (default), base or a dir")
    p.add_argument("--compare", action="store_true",
                   help="voxtral: time each optimisation against the eager path")
    p.add_argument("--compile", action="store_true",
                   help="with --compare on CPU, also time torch.compile (slow to warm up)")
    p.add_argument("--n", type=int, default=8, help="utterances (espeak-ng sentences)")
    p.add_argument("--rounds", type=int, default=2, help="passes over the utterances")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--threads", type=int, default=2)


def utterances(n: int) -> list[np.ndarray]:
    """``n`` spoken sample questions at 16 kHz (espeak-ng → soundfile → soxr)."""
    import soundfile as sf
    import soxr

    from testkit.samples import QUESTIONS, speak_to_file

    out = []
    with tempfile.TemporaryDirectory() as d:
        for i in range(n):
            wav = speak_to_file(QUESTIONS[i % len(QUESTIONS)], Path(d) / f"{i}.wav",
                                wpm=150 + 10 * (i // len(QUESTIONS)))
            audio, rate = sf.read(str(wav), dtype="float32", always_2d=True)
            mono = audio.mean(axis=1)
            out.append(soxr.resample(mono, rate, ASR_RATE).astype(np.float32))
    return out


def _load(options: ASROptions):
    if options.backend == "voxtral":
        from models.asr.voxtral import VoxtralASR

        return VoxtralASR(options)
    from models.asr.faster_whisper import FasterWhisperASR

    return FasterWhisperASR(options)


def _timed(asr, res: Result, group: list[np.ndarray], keep_text: bool) -> None:
    """Transcribe ``group`` (one batch, or one by one) and add its timings to ``res``."""
    if res.batched:
        out = asr.transcribe_batch(group)
        res.total_s += out[0].metrics.duration_s
    else:
        out = [asr.transcribe(a) for a in group]
        res.total_s += sum(t.metrics.duration_s for t in out)
    res.latencies_s += [t.metrics.duration_s for t in out]
    res.audio_s += sum(t.metrics.audio_s for t in out)
    if keep_text:
        res.texts += [t.text for t in out]


def bench(rows: list[tuple[str, ASROptions, bool]], audios: list[np.ndarray], rounds: int = 1,
          batch: int = 4) -> list[Result]:
    """Load every variant, then time them interleaved on the same utterances.

    Args:
        rows: ``(label, options, batched)`` per variant.
        audios: Utterances, 16 kHz float32.
        rounds: Passes over ``audios``; more passes, steadier percentiles.
        batch: Utterances per group; batched variants transcribe a group in one call.

    Returns:
        One result per row. Variants take turns group by group, so load from other processes on
        a shared machine hits all of them alike instead of whichever ran during a spike. The first
        utterance runs once untimed after load (lazy init, compilation), counted in ``load_s``.
    """
    loaded = []
    for name, options, batched in rows:
        started = time.monotonic()
        asr = _load(options)
        asr.transcribe(audios[0])
        loaded.append((asr, Result(name=name, load_s=time.monotonic() - started, batched=batched)))
        print(f"  loaded {name} in {loaded[-1][1].load_s:.2f} s")
    for r in range(rounds):
        for k in range(0, len(audios), batch):
            for asr, res in loaded:
                _timed(asr, res, audios[k : k + batch], keep_text=r == 0)
    for asr, _ in loaded:
        if hasattr(asr, "close"):
            asr.close()
    return [res for _, res in loaded]


def voxtral_variants(base: ASROptions, compare: bool, with_compile: bool,
                     cuda: bool) -> list[tuple[str, ASROptions, bool]]:
    """The (label, options, batched) rows to run for Voxtral."""
    auto = replace(base.voxtral, batch_window_s=0.0)  # single-thread bench: no cross-call wait
    if not compare:
        return [("defaults", replace(base, voxtral=auto), False)]
    sdpa = replace(EAGER, attention="sdpa")
    rows = [
        ("eager", replace(base, voxtral=EAGER), False),
        ("sdpa", replace(base, voxtral=sdpa), False),
        ("sdpa+static", replace(base, voxtral=replace(sdpa, static_cache="on")), False),
    ]
    if with_compile or cuda:
        comp = replace(sdpa, static_cache="on", compile="on")
        rows.append(("sdpa+static+compile", replace(base, voxtral=comp), False))
    if cuda:
        rows.append(("bf16 defaults", replace(base, voxtral=auto), False))
    rows.append(("sdpa batched x4", replace(base, voxtral=replace(sdpa, max_batch=4)), True))
    if cuda:  # on CPU the defaults are exactly the "sdpa batched x4" row
        rows.append(("defaults batched x4", replace(base, voxtral=replace(auto, max_batch=4)),
                     True))
    return rows


def _print(results: list[Result], title: str) -> None:
    ref = results[0]
    rows = []
    for r in results:
        speed = ref.total_s / r.total_s if r.total_s else 0.0
        same = "yes" if r.texts == ref.texts else "NO"
        rows.append((r.name, f"{r.load_s:.2f}", r.pct_ms(50), r.pct_ms(95), f"{r.rtf:.3f}",
                     f"{speed:.2f}x", same if r is not ref else "-"))
    print(markdown_header(f"bench asr, {title}") + "\n")
    print(markdown_table(("variant", "load s", "p50 ms", "p95 ms", "RTF", "speedup vs first",
                          "same text"), rows, right=range(1, 6)))


def run(args: argparse.Namespace) -> int:
    """Run ``callagent bench asr``; prints a markdown table, returns the exit status."""
    audios = utterances(max(1, args.n))
    total = sum(len(a) for a in audios) / ASR_RATE
    print(f"{len(audios)} utterances, {total:.1f} s of espeak-ng speech at 16 kHz")
    if args.backend == "faster-whisper":
        opts = ASROptions(backend="faster-whisper", model=args.model or "tiny.en",
                          device=args.device, threads=args.threads)
        results = bench([(opts.model, opts, False)], audios, args.rounds)
        if args.compare:
            print("--compare times Voxtral's optimisations; faster-whisper has one path")
        _print(results, f"faster-whisper {opts.model}")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model or "tiny"
        if model == "tiny":
            from models.asr.voxtral_tiny import build_tiny_voxtral

            model = str(build_tiny_voxtral(Path(tmp) / "voxtral-tiny"))
            print("model: tiny random Voxtral (gibberish text; timings show relative speed)")
        import torch

        cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
        base = ASROptions(backend="voxtral", model=model, device=args.device,
                          threads=args.threads)
        rows = voxtral_variants(base, args.compare, args.compile, cuda)
        results = bench(rows, audios, args.rounds)
        _print(results, f"Voxtral {Path(model).name} on {'cuda' if cuda else 'cpu'}")
    return 0
