"""``callagent bench wer``: ASR word error rate on phone-line audio, broad enough to choose by.

Issue 13: one small set of questions picked the wrong default model. This bench asks 30 phone
questions (:mod:`.questions`) in every espeak-ng English accent and variant and the bundled
Kokoro voices (:mod:`.voices`), through several line conditions (:mod:`.line`: μ-law, A-law,
G.722, lost packets with and without concealment, a quiet talker, babble and pink noise), on
each model, beam width and ASR context (:mod:`.engine`), and prints WER with 95 % bootstrap
intervals beside the cost (:mod:`.report`). Seeded: the same arguments give the same WER.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from bench.header import markdown_header, rich_to_markdown
from bench.wer import engine, report
from bench.wer.line import REFERENCE, parse_conditions
from bench.wer.questions import NAMES, QUESTIONS
from bench.wer.voices import Synthesizer, broad_plan, parse_voices
from dialplan import Config
from dialplan.options import TTSOptions
from models.registry import ModelCache

USES_CONFIG = True
QUICK_QUESTIONS = 10
QUICK_VOICES = ("en-us", "en-gb")
CONTEXTS = ("domain", "greeting", "hotwords")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--models", nargs="+", default=["tiny.en", "base"],
                   help="ASR models (bundled names or directories; default tiny.en base)")
    p.add_argument("--voices", nargs="+", default=[],
                   help="accents | variants | kokoro (parts of the broad set), or voices that "
                        "say every question: en-gb, en-us+f3, en-029@140, kokoro:jf_alpha")
    p.add_argument("--conditions", nargs="+", default=[],
                   help="line conditions (default: all; see the table for names)")
    p.add_argument("--quick", action="store_true",
                   help=f"{QUICK_QUESTIONS} questions, voices {' '.join(QUICK_VOICES)} unless "
                        "--voices, μ-law only unless --conditions, no beam/context runs")
    p.add_argument("--questions", type=int, default=0, metavar="N",
                   help=f"ask only the first N questions (default all {len(QUESTIONS)}; "
                        f"--quick: {QUICK_QUESTIONS})")
    p.add_argument("--subset", type=int, default=40,
                   help="utterances for the other conditions, beams and context (default 40)")
    p.add_argument("--beams", type=int, nargs="*", default=[5],
                   help="beam widths besides 1, on the subset (default 5; none: --beams)")
    p.add_argument("--contexts", nargs="*", default=list(CONTEXTS), choices=CONTEXTS,
                   help="ASR context variants on the subset (default all; none: --contexts)")
    p.add_argument("--profile", default="default",
                   help="profile whose system prompt, greeting, hotwords and ASR options apply")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--worst", type=int, default=0, help="list each model's N worst utterances")
    p.add_argument("--json", metavar="PATH", help="write every transcription and score here")
    p.add_argument("--from-json", metavar="PATH",
                   help="print the tables of an earlier --json run instead of measuring")


def settings_from(args: argparse.Namespace, config: Config) -> engine.Settings:
    """The run's settings from the command line and the profile.

    Raises:
        ValueError: an unknown profile, condition or voice, named.
    """
    if args.profile not in config.profiles:
        raise ValueError(f"--profile: unknown '{args.profile}' "
                         f"(profiles: {', '.join(config.profiles)})")
    profile = config.profiles[args.profile]
    if not 0 <= args.questions <= len(QUESTIONS):
        raise ValueError(f"--questions: 1 to {len(QUESTIONS)}")
    n_q = args.questions or (QUICK_QUESTIONS if args.quick else len(QUESTIONS))
    voices = args.voices or (list(QUICK_VOICES) if args.quick else [])
    plan = parse_voices(voices, n_q, args.seed) if voices else broad_plan(n_q, args.seed)
    if not plan.items:
        raise ValueError("--voices: no utterances left to transcribe")
    conditions = parse_conditions(args.conditions or ([REFERENCE] if args.quick else []))
    if args.subset < 1:
        raise ValueError("--subset: must be at least 1")
    if any(b < 1 for b in args.beams):
        raise ValueError("--beams: a beam width is at least 1")
    return engine.Settings(
        models=tuple(args.models),
        conditions=tuple(conditions),
        plan=plan,
        subset=len(plan.items) if args.quick else args.subset,
        beams=() if args.quick else tuple(args.beams),
        contexts=() if args.quick else tuple(args.contexts),
        domain=profile.system_prompt,
        greeting=profile.greeting,
        hotwords=profile.asr.hotwords or NAMES,
        asr=profile.asr,
        seed=args.seed,
        questions=QUESTIONS[:n_q],
    )


def synthesizer(models: ModelCache, cache: Path | None = None) -> Synthesizer:
    """Says the planned utterances; its Kokoro voices are Kokoro's whatever ``[tts]`` uses.

    The default TTS is Piper, whose one speaker is not a Kokoro voice: a factory that took
    the default backend failed on the broad set's first Kokoro utterance.
    """
    return Synthesizer(lambda voice: models.tts(TTSOptions(backend="kokoro-onnx", voice=voice)),
                       cache)


def bench(s: engine.Settings, console: Console | None = None) -> engine.Results:
    """Synthesise, pass through the line, transcribe and score: the whole measurement."""
    console = console or Console(stderr=True)
    synth = synthesizer(ModelCache())
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn())
    with Progress(*columns, console=console) as bar:
        task = bar.add_task("speaking the questions", total=len(s.plan.items))
        utts = engine.synthesize(s, synth, lambda: bar.advance(task))
        n_sub = sum(u.in_subset for u in utts)
        total = engine.transcriptions(s, len(utts), n_sub)
        task2 = bar.add_task("transcribing", total=total)

        def tick(label: str) -> None:
            bar.update(task2, advance=1, description=f"transcribing {label}")

        runs = engine.measure(s, synth, utts, tick)
    return engine.Results(s, utts, runs)


def run(args: argparse.Namespace, config: Config) -> int:
    err = Console(stderr=True)
    t0 = time.monotonic()
    try:
        if args.from_json:
            with open(args.from_json) as f:
                results = report.from_json(json.load(f))
            s = results.settings
        else:
            s = settings_from(args, config)
    except (OSError, ValueError) as e:
        err.print(f"callagent bench wer: {e}")
        return 2
    if not args.from_json:
        results = bench(s, err)
    print(markdown_header("bench wer"))
    tables = [report.summary_table(results), report.condition_table(results),
              report.condition_legend(results), report.group_table(results),
              report.decoding_table(results), report.context_table(results)]
    tables += [report.worst(results, m, args.worst) for m in (s.models if args.worst else ())]
    for table in tables:
        if table is not None:
            print(f"\n{table if isinstance(table, str) else rich_to_markdown(table)}")
    n_sub = len(results.subset)
    print(
        f"\n{len(results.utterances)} utterances ({len(s.questions)} questions, "
        f"{len({u.voice.name for u in results.utterances})} voices), {n_sub} in the subset; "
        f"seed {s.seed}; {time.monotonic() - t0:.0f} s. Cost is compute per utterance on this "
        "machine (noisy when shared); WER is deterministic."
    )
    if s.plan.skipped:
        print(f"skipped: {'; '.join(s.plan.skipped)}")
    if args.json and not args.from_json:
        with open(args.json, "w") as f:
            json.dump(report.as_json(results), f, indent=1)
    return 0

