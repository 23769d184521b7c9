"""``callagent simulate caller.wav``: one call from a file into a real call session, logged.

The audio reaches the same :class:`~agent.call.session.CallSession` a SIP call does (through
:func:`agent.simulate.simulate`); the turns printed are the records it wrote to the call log.
"""

from __future__ import annotations

import argparse
import time

import soundfile as sf
from rich.console import Console

from agent import log
from agent.cli import options as cliopts
from agent.cli import runtime
from agent.cli.format import turn_json, turns_table
from agent.simulate import simulate
from agent.turn.profiles import ReadyProfiles
from agent.turn.runner import StageCache
from dialplan import Dialplan
from models.audio import read_audio
from models.registry import ModelCache


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("simulate", help="run a WAV through VAD, ASR, LLM and TTS as a phone call")
    p.add_argument("wav", help="caller audio, any rate/encoding soundfile reads")
    p.add_argument("--profile", default="default", help="profile name from the config")
    p.add_argument("--out", help="write the agent's replies (8 kHz WAV) here")
    p.add_argument("--fast", action="store_true",
                   help="skip the clock over frames while no model work is in flight")
    p.add_argument("--no-greeting", action="store_true",
                   help="do not play the profile's greeting (answer timing only)")
    p.add_argument("--echo", type=float, default=0.0, metavar="GAIN",
                   help="mix the agent's own voice back into the caller's channel at this level")
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.add_argument("--no-log", action="store_true", help="do not write the call log")
    cliopts.add_common(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    config = cliopts.load(args)
    if args.profile not in config.profiles:
        raise SystemExit(
            f"callagent: unknown profile '{args.profile}' (defined: {', '.join(config.profiles)})"
        )
    profile = config.profiles[args.profile]
    console = Console(stderr=True)
    audio, rate = read_audio(args.wav)
    t0 = time.monotonic()
    ready = ReadyProfiles(Dialplan.from_config(config),
                          StageCache(ModelCache(runtime.scheduler(config))))
    ready.prepare(profile)  # exactly as serve prepares it before answering
    stages, phrase, cheap = ready.for_call(profile)
    console.print(
        f"models loaded in {time.monotonic() - t0:.1f} s "
        f"(asr {profile.asr.backend}:{profile.asr.model}, llm {profile.llm.model}, "
        f"tts {profile.tts.voice})"
    )
    writer = None
    if not args.no_log:
        from db.writer import CallLogWriter

        writer = CallLogWriter(config.db, on_event=log.event)
    try:
        call = simulate(audio, rate, profile, stages, call_log=writer, fast=args.fast,
                        greeting=not args.no_greeting, echo_gain=args.echo, phrase=phrase,
                        under_load=cheap)
    finally:
        if writer is not None:
            writer.close()
    if args.out:
        sf.write(args.out, call.reply_audio, 8000, subtype="PCM_16")
    if args.format == "json":
        for turn in call.turns:
            print(turn_json(turn))
    else:
        Console().print(turns_table(call.turns, title=f"call {call.call_id} ({call.end_reason})"))
    return 0 if call.turns else 1
