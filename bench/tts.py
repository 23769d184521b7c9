"""``callagent bench tts``: TTS voices compared on speed and on intelligibility over the phone.

For each voice, the agent's typical replies are spoken twice over: the first clause alone (what
the runner speaks first, cut by the same :class:`ClauseSplitter`) and the whole sentence, timed
on a warm model; then each whole reply goes through the 8 kHz G.711 line and back through
Whisper, and the round-trip word error rate says how well a caller would understand it. The
numbers behind the choice of the default voice (BENCHMARKS.md); no pass/fail.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import asdict, dataclass, field

import numpy as np
from rich.console import Console
from rich.table import Table

from agent.turn.textsplit import ClauseSplitter
from bench.header import markdown_header, rich_to_markdown
from bench.scoring import wer
from dialplan.options import ASROptions, TTSOptions
from models.audio import ASR_RATE, PHONE_RATE, pcm16_to_float, resample, through_phone_line
from models.registry import ModelCache

REPLIES = (
    "The library opens at 10 am on Saturday and closes at 4 pm.",
    "Yes, you can renew your books over the phone with your library card number.",
    "We are closed on Sunday, but you can return books in the book return outside.",
    "On weekdays we are open from 9 am until 6 pm.",
    "We have a large gardening section on the second floor, next to the cookbooks.",
    "You can borrow up to twenty books at a time for three weeks.",
    "Study rooms can be booked at the front desk for two hours at a time.",
    "Late fees are ten cents a day for each book, and children's books have no fees.",
    "The reading hour for children is every Wednesday morning at ten.",
    "Sorry, I didn't catch that. Could you say it again?",
)
"""Replies like the default profile's LLM gives: short spoken sentences about the library.
(No "drop box" or "story time": Whisper writes them "Dropbox", "storytime", which the
scorer counts as errors though nothing was misheard.)"""

DEFAULT_VOICES = ("kokoro-onnx:af_heart", "kokoro-onnx:bf_emma", "kokoro-onnx:am_michael",
                  "hibari:heart", "piper:en_US-joe-medium")
PAD_S = 0.3
"""Silence around each reply, as on the line. Piper starts speaking at almost its first sample;
cut that close, Whisper base looped ("the set of the set of ...") on some renderings of a reply,
and on none with the silence (bench tts)."""


@dataclass
class VoiceResult:
    """One voice's figures over all replies."""

    voice: str
    load_s: float
    sample_rate: int
    first_clause_s: list[float] = field(default_factory=list)
    """Time to first audio when the runner speaks the first clause (median of the rounds)."""
    sentence_s: list[float] = field(default_factory=list)
    """Time to first audio when the whole sentence is spoken at once."""
    synth_s: float = 0.0
    audio_s: float = 0.0
    wer: dict[str, float] = field(default_factory=dict)
    """Round-trip WER per ASR model, over every rendering of every reply."""
    misheard: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    """(reply, transcript) pairs that did not come back exactly, per ASR model."""
    heard: int = 0
    """Renderings transcribed per ASR model."""

    @property
    def rtf(self) -> float:
        return self.synth_s / self.audio_s if self.audio_s else 0.0


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register the ``bench tts`` options on ``p``."""
    p.add_argument(
        "--voices", nargs="+", default=list(DEFAULT_VOICES),
        help="BACKEND:NAME, NAME being the voice for kokoro-onnx and the voice model (bundled "
             "name or .onnx path) for piper (default: %(default)s)",
    )
    p.add_argument("--asr", nargs="+", default=["tiny.en", "base"], help="ASR models for WER")
    p.add_argument("--rounds", type=int, default=3, help="timed syntheses per text (median)")
    p.add_argument("--law", choices=("ulaw", "alaw"), default="ulaw")
    p.add_argument("--first-words", type=int, default=TTSOptions.first_chunk_words,
                   help="first clause as the runner cuts it (tts.first_chunk_words)")
    p.add_argument("--show", action="store_true", help="print the replies heard wrong")
    p.add_argument("--json", action="store_true", help="print the results as JSON")


def voice_options(spec: str) -> TTSOptions:
    """``kokoro-onnx:jf_alpha`` or ``piper:en_US-joe-medium`` as TTS options.

    Raises:
        ValueError: naming the spec, when it is not BACKEND:NAME.
    """
    backend, sep, name = spec.partition(":")
    if not sep or not name:
        raise ValueError(f"--voices: '{spec}' is not BACKEND:NAME (e.g. piper:en_US-joe-medium)")
    if backend == "piper":
        return TTSOptions(backend="piper", model=name)
    return TTSOptions(backend=backend, voice=name)  # type: ignore[arg-type]


def first_clause(text: str, first_words: int) -> str:
    """The chunk the runner speaks first when the LLM has streamed ``text``."""
    splitter = ClauseSplitter(first_words=first_words)
    chunks = splitter.push(text) + splitter.flush()
    return chunks[0]


def line_audio(audio, rate: int, law: str, pad_s: float = PAD_S):
    """TTS output as the caller's side hears it, in the line's silence, resampled for Whisper."""
    heard = resample(pcm16_to_float(through_phone_line(audio, rate, law)), PHONE_RATE, ASR_RATE)
    silence = np.zeros(int(pad_s * ASR_RATE), np.float32)
    return np.concatenate([silence, heard, silence])


def _timed(tts, text: str, rounds: int) -> tuple[float, list]:
    times, speeches = [], []
    for _ in range(rounds):
        t0 = time.monotonic()
        speeches.append(tts.synthesize(text))
        times.append(time.monotonic() - t0)
    return statistics.median(times), speeches


def measure(cache: ModelCache, specs: list[str], asr_models: list[str], rounds: int, law: str,
            first_words: int, replies=REPLIES) -> list[VoiceResult]:
    """Time and round-trip each voice over ``replies``.

    The voices take turns on each text, so load from other work on a shared machine falls on
    all of them alike rather than on whichever voice happened to run during it.
    """
    voices, results = [], []
    for spec in specs:
        t0 = time.monotonic()
        tts = cache.tts(voice_options(spec))
        results.append(VoiceResult(spec, time.monotonic() - t0, tts.sample_rate))
        tts.synthesize(replies[0])  # onnxruntime's first run allocates; calls see warm models
        voices.append(tts)
    lines: list[list] = [[] for _ in voices]
    for text in replies:
        clause = first_clause(text, first_words)
        for tts, result, heard in zip(voices, results, lines, strict=True):
            clause_s, _ = _timed(tts, clause, rounds)
            sentence_s, speeches = _timed(tts, text, rounds)
            result.first_clause_s.append(clause_s)
            result.sentence_s.append(sentence_s)
            result.synth_s += sentence_s
            result.audio_s += len(speeches[0].audio) / speeches[0].sample_rate
            # Every round is heard: a VITS voice samples noise, so each rendering differs.
            heard += [(text, line_audio(sp.audio, sp.sample_rate, law)) for sp in speeches]
    for model in asr_models:
        asr = cache.asr(ASROptions(model=model))
        for result, heard in zip(results, lines, strict=True):
            refs = [text for text, _ in heard]
            hyps = [asr.transcribe(audio).text for _, audio in heard]
            result.heard = len(hyps)
            result.wer[model] = wer(refs, hyps)
            result.misheard[model] = [(r, h) for r, h in zip(refs, hyps, strict=True)
                                      if wer(r, h) > 0]
    return results


def run(args: argparse.Namespace) -> int:
    try:
        specs = [(s, voice_options(s)) for s in args.voices]
    except ValueError as e:
        Console(stderr=True).print(f"[red]{e}[/]")
        return 2
    results = measure(ModelCache(), [s for s, _ in specs], args.asr, args.rounds, args.law,
                      args.first_words)
    if args.json:
        print(json.dumps([asdict(r) | {"rtf": r.rtf} for r in results], indent=1))
        return 0
    table = Table(
        title=f"TTS on {len(REPLIES)} agent replies; WER after an 8 kHz {args.law} line",
        caption=f"time to first audio: p50 (max) over replies, each the median of {args.rounds} "
                f"runs on a warm model; WER (renderings not heard exactly) over all {args.rounds} "
                "renderings of each reply",
    )
    for col in ("voice", "load s", "Hz", "first clause s", "sentence s", "RTF",
                *(f"WER {m}" for m in args.asr)):
        table.add_column(col, justify="left" if col == "voice" else "right")
    for r in results:
        table.add_row(
            r.voice, f"{r.load_s:.2f}", str(r.sample_rate),
            f"{statistics.median(r.first_clause_s):.2f} ({max(r.first_clause_s):.2f})",
            f"{statistics.median(r.sentence_s):.2f} ({max(r.sentence_s):.2f})",
            f"{r.rtf:.2f}",
            *(f"{r.wer[m]:.1%} ({len(r.misheard[m])}/{r.heard})" for m in args.asr),
        )
    print(markdown_header("bench tts") + "\n")
    print(rich_to_markdown(table))
    if args.show:
        print()
        for r in results:
            for model, pairs in r.misheard.items():
                for ref, hyp in pairs:
                    print(f"- {r.voice} / {model}: {ref} -> {hyp}")
    return 0
