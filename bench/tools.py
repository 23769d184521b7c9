"""``callagent bench tools``: does the agent do what a caller asks on the phone line?

Each of :data:`REQUESTS` (asks for each directory entry phrased variously, goodbyes, asks to
leave a message, and questions that need no tool) is said by the bundled Piper voice (or an
espeak-ng voice), passed through the 8 kHz μ-law line (:mod:`bench.wer.line`),
transcribed by the profile's ASR and answered by a real :class:`~agent.turn.reply.Reply` on the
profile's LLM and TTS: the same system prompt with its tools, the same scanner, checks and
spoken-goodbye rule a call uses, as the first turn of a call. What the call would then do is
compared with what the request needs. It runs for the profile's models and for its under-load
profile's (the persona and tools stay the profile's, as in a call); the first is the
baseline of the ratios.

The profile is ``config.toml``'s (``--profile``); a profile without tools gets the library's
directory and tools of :data:`LIBRARY`, so the bench runs before a config offers them.
Tables: :mod:`bench.tools_report` (which also defines a false claim).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
from rich.console import Console

from agent.answer import answer
from agent.turn.runner import StageCache, TurnRunner
from agent.turn.tools import target_of
from bench.header import markdown_header, progress_printer
from bench.tools_report import (
    NONE,
    REPEAT,
    SILENT,
    ModelRun,
    Turn,
    confusion_table,
    failures,
    latency_table,
    summary_table,
)
from bench.wer.line import CONDITIONS, REFERENCE, apply, seed_for
from dialplan import Config, parse_config
from dialplan.options import TTSOptions
from dialplan.plan import under_load
from dialplan.profile import Profile
from models import catalog
from models.asr.base import Transcript
from models.audio import ASR_RATE
from testkit.clips import kept_clip
from testkit.samples import spoken

USES_CONFIG = True
REPLY_TIMEOUT_S = 300.0
"""A reply not over by then failed the bench (a stuck model), not a slow turn."""


@dataclass(frozen=True)
class Request:
    """One thing a caller says, and what the agent should do about it."""

    text: str
    tool: str = NONE
    target: str = ""
    """The directory entry a transfer should reach."""


def _to(target: str, *texts: str) -> list[Request]:
    return [Request(t, "transfer", target) for t in texts]


REQUESTS: tuple[Request, ...] = (
    *_to("children",
         "Can you put me through to the children's section?",
         "I'd like to speak to the children's librarian, please.",
         "Could I talk to someone about story time for my kids?",
         "Please transfer me to the kids' department."),
    *_to("accounts",
         "I'd like to talk to someone about a late fee.",
         "Can you connect me with accounts? I want to pay a fine.",
         "I was charged for a lost book and I need to speak to someone about it.",
         "Put me through to whoever handles payments, please."),
    *_to("front-desk",
         "Can I speak to someone at the front desk?",
         "Transfer me to the front desk, please.",
         "I'd like to talk to a real person, please.",
         "Could you connect me to the front desk? I need help with my library card."),
    *[Request(t, "end_call") for t in (
        "That's all, thank you, goodbye.",
        "Okay, thanks for your help. Bye!",
        "No, that's everything. Goodbye.",
        "Great, thank you so much, bye bye.",
        "I'm done, you can hang up now.",
        "Thanks, that answers my question. Have a nice day, goodbye.")],
    *[Request(t, "take_message") for t in (
        "Can I leave a message for the librarian?",
        "I'd like to leave a message for the head of the library.",
        "Could you take a message for Mrs. Patel in the reference section?",
        "I want to leave a message about a book I donated.",
        "Please tell the manager I called. I'd like to leave a message.",
        "Nobody is answering, can I leave a message instead?")],
    *[Request(t) for t in (
        "What time do you open on Saturday?",
        "Do you have books about dinosaurs?",
        "Is the library open on Sunday?",
        "How late are you open on weekdays?",
        "What time do you close on Friday?",
        "Do you have any books about gardening?",
        "Do you have audiobooks I can borrow?",
        "Can I use the computers at the library?",
        "Do you have books in Spanish?",
        "Is the library open on Monday morning?")],
)
"""The requests, each with the tool it needs (``none`` for a plain question)."""

QUICK = (0, 4, 8, 12, 18, 24, 25, 26)
"""``--quick``: one ask per directory entry, a goodbye, a message, two questions."""

LIBRARY = {
    "tools": ["end_call", "transfer", "take_message"],
    "directory": {
        "front-desk": {"uri": "sip:front-desk@127.0.0.1",
                       "description": "general questions, library cards, room bookings"},
        "children": {"uri": "sip:children@127.0.0.1",
                     "description": "the children's section: children's books, story time"},
        "accounts": {"uri": "sip:accounts@127.0.0.1",
                     "description": "fees, fines, payments and charges for lost books"},
    },
}
"""The library's directory and tools, for a profile that has none yet."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register the ``bench tools`` options on ``p``."""
    p.add_argument("--profile", default="default",
                   help="whose prompt, tools, directory and models answer (and its under_load)")
    p.add_argument("--quick", action="store_true",
                   help=f"{len(QUICK)} of the {len(REQUESTS)} requests")
    p.add_argument("--no-under-load", action="store_true",
                   help="only the profile's own models, not its under-load profile's too")
    p.add_argument("--espeak", metavar="VOICE", default="",
                   help="callers speak with this espeak-ng voice (en-gb, en-us+f3) instead of "
                        "the bundled Piper voice")
    p.add_argument("--fresh", action="store_true",
                   help="say the requests anew instead of reusing the Piper clips kept by an "
                        "earlier run")
    p.add_argument("--json", metavar="PATH", help="write every turn here too")


def with_tools(profile: Profile) -> Profile:
    """``profile`` itself if it offers tools, else with :data:`LIBRARY`'s tools and directory."""
    if profile.tools:
        return profile
    lib = parse_config({"profiles": {"library": LIBRARY}}).profiles["library"]
    return replace(profile, tools=lib.tools, directory=lib.directory)


def profiles_for(config: Config, name: str, under: bool = True) -> list[Profile]:
    """The profile (with tools) and, with ``under``, what answers it under load.

    Raises:
        ValueError: an unknown profile, or one whose tools or directory cannot serve the
            requests (named).
    """
    if name not in config.profiles:
        raise ValueError(f"--profile: unknown '{name}' (profiles: {', '.join(config.profiles)})")
    profile = with_tools(config.profiles[name])
    missing = sorted({r.tool for r in REQUESTS} - {NONE} - set(profile.tools))
    if missing:
        raise ValueError(f"profile {name} lacks the tools {', '.join(missing)} "
                         f"(it has {', '.join(profile.tools)})")
    absent = sorted({r.target for r in REQUESTS if r.target} - set(profile.directory))
    if absent:
        raise ValueError(f"profile {name}'s directory lacks {', '.join(absent)} "
                         f"(it has {', '.join(profile.directory)})")
    out = [profile]
    if under and profile.under_load:
        out.append(under_load(profile, config.profiles[profile.under_load]))
    return out


def caller_audio(requests: Sequence[Request], cache: StageCache, espeak: str = "",
                 clips: Path | None = None, progress: Callable[[str], None] = lambda s: None
                 ) -> list[np.ndarray]:
    """Each request said by a caller and received through the μ-law line: 16 kHz float32.

    Piper's timbre noise is random, so the same text is heard differently from run to run
    (some transcripts changed between two runs of this bench): its clips are kept in
    ``clips`` (when given) and said once, so that runs compare the LLMs on the same words.
    """
    opts = TTSOptions(backend="piper")
    out = []
    for i, r in enumerate(requests):
        if espeak:
            audio, rate = spoken(r.text, voice=espeak)
        else:
            audio, rate = _piper_clip(cache, opts, r.text, clips)
        out.append(apply(CONDITIONS[REFERENCE], audio, rate, seed_for("bench tools", r.text)))
        progress(f"said {i + 1}/{len(requests)}: {r.text}")
    return out


def _piper_clip(cache: StageCache, opts: TTSOptions, text: str,
                clips: Path | None) -> tuple[np.ndarray, int]:
    def make() -> tuple[np.ndarray, int]:
        speech = cache.models.tts(opts).synthesize(text)
        return speech.audio, speech.sample_rate

    return kept_clip(clips, f"{opts.model}\0{opts.voice}\0{text}", make)


def turn_of(request: Request, runner: TurnRunner, tr: Transcript, audio_s: float) -> Turn:
    """Answer one transcribed request and record what the call would do."""
    r, t = answer(runner, tr, audio_in_s=audio_s, timeout_s=REPLY_TIMEOUT_S)
    action = r.action
    chosen = (REPEAT if r.asked_to_repeat else action.name if action is not None
              else NONE if r.reply_text.strip() else SILENT)
    target = (target_of(action, runner.profile) or "") if chosen == "transfer" else ""
    refused = [u for u in r.tools if u.outcome in ("invalid", "malformed")]

    def since(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else b - a

    return Turn(
        text=request.text, expected=request.tool, expected_target=request.target,
        heard=tr.text, chosen=chosen, target=target,
        implicit=bool(action is not None and action.implicit), reply=r.reply_text,
        refused=[u.outcome for u in refused], refused_text=[u.detail for u in refused],
        decision_s=since(t.asr_done_at, t.first_chunk_text_at),
        tts_s=since(t.first_chunk_text_at, t.tts_first_audio_at),
        first_audio_s=since(t.asr_done_at, t.tts_first_audio_at))


def llm_label(model: str) -> str:
    """A bundled LLM's name, with the file it stands for when that differs (``-fastest``)."""
    try:
        stem = catalog.resolve(model, "llm").stem
    except Exception:  # noqa: BLE001 - a path or a server's model: its name is the label
        return model
    return model if stem in (model, Path(model).stem) else f"{model} ({stem})"


def measure(profiles: Sequence[Profile], requests: Sequence[Request], cache: StageCache,
            espeak: str = "", clips: Path | None = None,
            progress: Callable[[str], None] = lambda s: None) -> list[ModelRun]:
    """The whole measurement: say, transcribe and answer every request with each profile.

    Args:
        profiles: each answers every request (the first is the tables' baseline).
        requests: what the callers say.
        cache: loads each model once (the profiles may share some).
        espeak: an espeak-ng voice for the callers; empty = the bundled Piper voice.
        clips: where the Piper clips are kept between runs (None: said afresh).
        progress: receives a line per step (the run is long).
    """
    audio = caller_audio(requests, cache, espeak, clips, progress)
    heard: dict = {}  # ASR options -> transcripts: profiles that share an ASR hear alike
    runs = []
    for profile in profiles:
        stages = cache.stages(profile)
        if profile.asr not in heard:
            heard[profile.asr] = []
            for i, a in enumerate(audio):
                heard[profile.asr].append(stages.asr.transcribe(a))
                progress(f"heard {i + 1}/{len(audio)} ({profile.asr.model}): "
                         f"{heard[profile.asr][-1].text}")
        runner = TurnRunner(stages, profile)
        progress(f"{profile.name}: warming up {profile.llm.model}")
        runner.warm_up()
        run = ModelRun(profile.name, llm_label(profile.llm.model), profile.asr.model)
        for i, (req, tr, a) in enumerate(zip(requests, heard[profile.asr], audio, strict=True)):
            turn = turn_of(req, runner, tr, len(a) / ASR_RATE)
            run.turns.append(turn)
            ok = turn.right_tool and (req.tool != "transfer" or turn.right_target)
            progress(f"{profile.name} {i + 1}/{len(requests)} {'ok   ' if ok else 'WRONG'} "
                     f"expected {turn.label(True)}, chose {turn.label(False)}"
                     f"{' (said goodbye)' if turn.implicit else ''}; first audio "
                     f"{_secs(turn.first_audio_s)}; \"{' '.join(turn.reply.split())[:80]}\"")
        runs.append(run)
    return runs


def _secs(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f} s"


def report(runs: list[ModelRun], requests: Sequence[Request], profile: Profile,
           voice: str) -> str:
    """The markdown ``bench tools`` prints, under the date/CPU header."""
    kinds = {k: sum(r.tool == k for r in requests)
             for k in dict.fromkeys(r.tool for r in requests)}
    parts = [
        markdown_header("bench tools"),
        f"**{len(requests)} spoken requests** ({', '.join(f'{n} {k}' for k, n in kinds.items())}"
        f"), said by {voice} through the 8 kHz μ-law line, heard by the profile's ASR and "
        f"answered as a call's first turn; profile {profile.name}, tools "
        f"{', '.join(profile.tools)}, directory {', '.join(profile.directory)}.",
        summary_table(runs),
        "Right tool: the action the call would carry out (a spoken goodbye ends the call too) "
        "is the one needed, and no false claim; silent: the caller heard nothing and nothing "
        "was done (wrong whatever was asked); refused calls: tool calls with an unknown tool "
        "or target, or none could be read (each sent back to the model); first audio: from the "
        "transcript to the first audio of the reply (the announcement of a tool call; turns "
        "with a refused call or a repeat are left out). "
        "Ratios are against the first row, measured in the same run.",
        "**Latency of a tool turn** (transcript to first audio)",
        latency_table(runs),
    ]
    for r in runs:
        parts += [f"**Confusion: {r.name}** (rows expected, columns chosen)",
                  confusion_table(r)]
        wrong = failures(r)
        if wrong:
            parts += [f"**Wrong: {r.name}**", "\n".join(wrong)]
    return "\n\n".join(parts)


def run(args: argparse.Namespace, config: Config) -> int:
    err = Console(stderr=True)
    try:
        profiles = profiles_for(config, args.profile, not args.no_under_load)
    except ValueError as e:
        err.print(f"callagent bench tools: {e}")
        return 2
    requests = [REQUESTS[i] for i in QUICK] if args.quick else list(REQUESTS)
    started = time.monotonic()
    progress = progress_printer(err)

    clips = catalog.cache_dir() / "bench-tools"
    if args.fresh and clips.exists():
        for old in clips.glob("*.npz"):
            old.unlink()
    runs = measure(profiles, requests, StageCache(), args.espeak, clips, progress)
    voice = f"espeak-ng {args.espeak}" if args.espeak else f"Piper {TTSOptions().voice}"
    print(report(runs, requests, profiles[0], voice))
    print(f"\n{time.monotonic() - started:.0f} s in all.")
    if args.json:
        with open(args.json, "w") as f:
            json.dump([asdict(r) for r in runs], f, indent=1)
    return 0
