"""``callagent bench answers``: does a caller get the right answer, in many voices?

Each question of :mod:`agent.bench.answers_questions` (facts the library persona and its
knowledge file hold, and questions they do not answer) is said by a voice of every group of
:data:`GROUPS` (Kokoro's native English voices, Kokoro's Spanish, French, Hindi, Italian and
Portuguese speakers reading English, espeak-ng variants, hibari), passed through the 8 kHz
μ-law line, transcribed by the profile's ASR and answered by a real
:class:`~agent.turn.reply.Reply` as a call's first turn (the persona, its facts, tools and
TTS), for the profile's models and for its under-load profile's. Only a reply's first clause
is synthesised (the rest is not heard by anyone here, and the answer is judged on its text).
Tables: :mod:`agent.bench.answers_report`.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
from rich.console import Console

from agent.bench.answers_questions import (
    PARAPHRASES,
    QUESTIONS,
    QUICK,
    Question,
    invented,
    numbers,
    right,
)
from agent.bench.clips import kept_clip
from agent.bench.header import progress_printer
from agent.bench.samples import spoken
from agent.bench.scoring import normalize, wer
from agent.bench.tools import answer, llm_label
from agent.bench.wer.line import CONDITIONS, REFERENCE, apply, seed_for
from agent.turn.knowledge import known_numbers as numbers_in
from agent.turn.runner import StageCache, TurnRunner
from dialplan import Config
from dialplan.options import TTSOptions
from dialplan.plan import under_load
from dialplan.profile import Profile
from models import catalog
from models.asr.base import Transcript
from models.audio import ASR_RATE
from models.metrics import ASRMetrics

USES_CONFIG = True

GROUPS: dict[str, tuple[str, ...]] = {
    "Kokoro US/UK": ("kokoro:af_heart", "kokoro:am_michael", "kokoro:bf_emma",
                     "kokoro:bm_george", "kokoro:af_bella", "kokoro:am_adam"),
    "Kokoro accented": ("kokoro:ef_dora", "kokoro:ff_siwis", "kokoro:hf_alpha",
                        "kokoro:if_sara", "kokoro:pf_dora", "kokoro:im_nicola"),
    "espeak-ng": ("espeak:en-us", "espeak:en-gb+f3", "espeak:en-us+m5", "espeak:en-gb-x-rp"),
    "hibari": ("hibari:heart",),
    "typed": ("text:typed",),
}
"""The callers: each question is said once per group, by its voices in turn. ``typed`` says
nothing: its words go to the model as written, so the ear's share of the misses shows."""


@dataclass
class Turn:
    """One question, said by one voice, answered by one model."""

    question: str
    kind: str
    voice: str
    group: str
    heard: str
    wer: float
    words: int
    reply: str
    action: str
    repeat: bool
    right: bool
    invented: list[str]
    asr_s: float
    first_audio_s: float | None
    """From the transcript to the reply's first audio."""

    @property
    def answer_s(self) -> float | None:
        """From the end of the caller's audio to the first audio, endpointing left out."""
        return None if self.first_audio_s is None else self.asr_s + self.first_audio_s


@dataclass
class ModelRun:
    name: str
    llm: str
    asr: str
    turns: list[Turn] = field(default_factory=list)


class FirstClauseOnly:
    """The profile's TTS for a reply's first clause; nothing for the rest (not listened to)."""

    def __init__(self, tts):
        self._tts = tts

    def synthesize(self, text: str, first: bool = False):
        return self._tts.synthesize(text if first else "", first)

    def __getattr__(self, name):
        return getattr(self._tts, name)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", default="default", help="whose persona, facts and models answer")
    p.add_argument("--quick", action="store_true",
                   help=f"{len(QUICK)} of the {len(QUESTIONS)} questions")
    p.add_argument("--paraphrases", action="store_true",
                   help=f"the {len(PARAPHRASES)} held-out questions in other words instead")
    p.add_argument("--no-under-load", action="store_true",
                   help="only the profile's own models, not its under-load profile's too")
    p.add_argument("--groups", default=",".join(GROUPS),
                   help=f"voice groups, comma-separated (of: {', '.join(GROUPS)})")
    p.add_argument("--json", metavar="PATH", help="write every turn here too")


def plan(questions: Sequence[Question], groups: Sequence[str]) -> list[tuple[Question, str, str]]:
    """(question, voice, group) for each question once per group, voices taken in turn."""
    out = []
    for g in groups:
        voices = GROUPS[g]
        out += [(q, voices[i % len(voices)], g) for i, q in enumerate(questions)]
    return out


def say(voice: str, text: str, cache: StageCache, clips: Path) -> tuple[np.ndarray, int]:
    """``voice`` (``engine:name``) saying ``text``; model voices' clips are kept in ``clips``."""
    engine, name = voice.split(":", 1)
    if engine == "espeak":
        return spoken(text, voice=name, wpm=165)
    opts = (TTSOptions(backend="hibari") if engine == "hibari"
            else TTSOptions(backend="kokoro-onnx", voice=name))

    def make() -> tuple[np.ndarray, int]:
        speech = cache.models.tts(opts).synthesize(text)
        return speech.audio, speech.sample_rate

    return kept_clip(clips, f"{voice}\0{text}", make)


def known_numbers(profile: Profile) -> set[str]:
    """Every number the persona, its facts and its greeting state: those are not invented."""
    return numbers_in(
        [profile.system_prompt, profile.greeting, *(f.shown for f in profile.facts)])


def measure(profiles: Sequence[Profile], questions: Sequence[Question], groups: Sequence[str],
            cache: StageCache, clips: Path,
            progress: Callable[[str], None] = lambda s: None) -> list[ModelRun]:
    """Say, hear and answer every planned question with each profile (the first: baseline)."""
    planned = plan(questions, groups)
    audio = []
    for i, (q, voice, _) in enumerate(planned):
        if voice.startswith("text:"):
            audio.append(None)
            continue
        a, rate = say(voice, q.text, cache, clips)
        audio.append(apply(CONDITIONS[REFERENCE], a, rate, seed_for("bench answers", voice + q.text)))
        progress(f"said {i + 1}/{len(planned)} ({voice}): {q.text}")
    heard: dict = {}
    runs = []
    own = None  # the first profile's runner: what an under-load one asks what its model refuses
    for profile in profiles:
        stages = cache.stages(profile)
        if profile.asr not in heard:
            heard[profile.asr] = []
            for i, (a, (q, _, _)) in enumerate(zip(audio, planned, strict=True)):
                if a is None:  # typed: the words as written
                    heard[profile.asr].append((typed(q.text), 0.0))
                    continue
                t0 = time.monotonic()
                tr = stages.asr.transcribe(a)
                heard[profile.asr].append((tr, time.monotonic() - t0))
                progress(f"heard {i + 1}/{len(audio)} ({profile.asr.model}): {tr.text}")
        runner = TurnRunner(replace(stages, tts=FirstClauseOnly(stages.tts)), profile)
        progress(f"{profile.name}: warming up {profile.llm.model}")
        runner.warm_up()
        own = own or runner
        known = known_numbers(profile)
        run = ModelRun(profile.name, llm_label(profile.llm.model), profile.asr.model)
        for i, ((q, voice, group), (tr, asr_s), a) in enumerate(
                zip(planned, heard[profile.asr], audio, strict=True)):
            reply, t = answer(runner, tr, 0.0 if a is None else len(a) / ASR_RATE,
                              escalate=None if runner is own else own)
            r = reply.result
            action = r.action.name if r.action is not None else "none"
            first = (None if t.tts_first_audio_at is None or t.asr_done_at is None
                     else t.tts_first_audio_at - t.asr_done_at)
            ref = normalize(q.text).split()
            turn = Turn(
                question=q.text, kind=q.kind, voice=voice, group=group, heard=tr.text,
                wer=wer(q.text, tr.text), words=len(ref), reply=r.reply_text, action=action,
                repeat=bool(r.asked_to_repeat),
                right=right(q, r.reply_text, action, known | numbers(q.text)),
                invented=sorted(invented(r.reply_text, known | numbers(q.text))),
                asr_s=asr_s, first_audio_s=first)
            run.turns.append(turn)
            progress(f"{profile.name} {i + 1}/{len(planned)} {'ok   ' if turn.right else 'WRONG'}"
                     f" {q.kind:7} {voice:18} heard \"{tr.text.strip()[:50]}\" -> "
                     f"\"{' '.join(r.reply_text.split())[:90]}\""
                     f"{' [' + action + ']' if action != 'none' else ''}")
        runs.append(run)
    return runs


def typed(text: str) -> Transcript:
    """``text`` as if heard perfectly (the ``typed`` group)."""
    return Transcript(text=text, metrics=ASRMetrics("typed", 0.0, 0.0, 0.0))


def profiles_for(config: Config, name: str, under: bool = True) -> list[Profile]:
    """The profile and, with ``under``, what answers it under load.

    Raises:
        ValueError: an unknown profile, or one without facts (named).
    """
    if name not in config.profiles:
        raise ValueError(f"--profile: unknown '{name}' (profiles: {', '.join(config.profiles)})")
    profile = config.profiles[name]
    if not profile.facts:
        raise ValueError(f"profile {name} has no knowledge file: the questions are about the "
                         f"library's facts (dialplan/personas/library.md)")
    out = [profile]
    if under and profile.under_load:
        out.append(under_load(profile, config.profiles[profile.under_load]))
    return out


def run(args: argparse.Namespace, config: Config) -> int:
    from agent.bench.answers_report import report

    err = Console(stderr=True)
    groups = [g.strip() for g in args.groups.split(",") if g.strip()]
    unknown = [g for g in groups if g not in GROUPS]
    try:
        if unknown:
            raise ValueError(f"--groups: unknown {', '.join(unknown)} (known: {', '.join(GROUPS)})")
        profiles = profiles_for(config, args.profile, not args.no_under_load)
    except ValueError as e:
        err.print(f"callagent bench answers: {e}")
        return 2
    questions = (list(PARAPHRASES) if args.paraphrases
                 else [QUESTIONS[i] for i in QUICK] if args.quick else list(QUESTIONS))
    started = time.monotonic()
    progress = progress_printer(err)

    runs = measure(profiles, questions, groups, StageCache(), catalog.cache_dir() / "bench-answers",
                   progress)
    print(report(runs, profiles[0], groups))
    print(f"\n{time.monotonic() - started:.0f} s in all.")
    if args.json:
        with open(args.json, "w") as f:
            json.dump([asdict(r) for r in runs], f, indent=1)
    return 0
