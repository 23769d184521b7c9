"""``callagent bench pipeline``: the call session on spoken questions, 1 and N calls at once.

Every question is a simulated call (:func:`agent.simulate.simulate`, no greeting, virtual clock
over the caller's audio): the same session, turn-taking, playout and records as ``serve``, so
these are the figures a call gets, minus the network and the phone's jitter buffer
(``bench call`` measures those on the wire). With ``--calls 1,4`` the questions are also asked
by 4 simultaneous calls sharing the process's models. The naive serial pipeline on the same
models and questions (:mod:`bench.baseline`) runs in the same process, and the table
prints the ratio against it. Last, questions said with a 0.7 s pause mid-thought give the false
end-of-turn rate (answered after the first half instead of once, after the whole).
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from dataclasses import asdict

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from agent.simulate import SimulatedCall, simulate
from agent.turn.load import LoadPolicy
from agent.turn.profiles import ReadyProfiles
from agent.turn.runner import StageCache
from bench import scoring
from bench.baseline import serial_turn
from bench.header import markdown_header
from db.records import TurnRecord
from db.stats import percentile
from dialplan import Config, Dialplan
from models.registry import ModelCache
from models.scheduler import Scheduler
from testkit.samples import PAUSED, QUESTIONS, spoken, spoken_with_pause

USES_CONFIG = True
STAGES = (
    ("endpoint", "endpoint_s"),
    ("ASR after endpoint", "asr_s"),
    ("LLM first token", "llm_ttft_s"),
    ("first clause", "first_chunk_s"),
    ("TTS first audio", "tts_first_audio_s"),
    ("playout", "playout_s"),
    ("voice-to-voice", "voice_to_voice_s"),
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", default="default")
    p.add_argument("--rounds", type=int, default=1, help="times to ask the questions")
    p.add_argument("--calls", default="1,4",
                   help="comma-separated numbers of simultaneous calls (default 1,4)")
    p.add_argument("--format", choices=("table", "json"), default="table")


def run(args: argparse.Namespace, config: Config) -> int:
    profile = config.profiles[args.profile]
    console = Console(stderr=True)
    t0 = time.monotonic()
    scheduler = Scheduler(pairs=config.scheduler.pairs)
    ready = ReadyProfiles(Dialplan.from_config(config), StageCache(ModelCache(scheduler)))
    load = LoadPolicy(scheduler)  # one per process: calls at once share it, as serve's do
    # As serve prepares them, with the models turns that start behind other calls' use
    # (limits.under_load_*).
    ready.prepare(profile)
    stages, phrase, cheap = ready.for_call(profile)
    load_s = time.monotonic() - t0
    clips = [(q, *spoken(q)) for q in QUESTIONS]
    levels = [int(x) for x in args.calls.split(",") if x.strip()]
    # Warm-up: first inference allocates buffers; not counted.
    simulate(clips[0][1], clips[0][2], profile, stages, fast=True, greeting=False, phrase=phrase,
             under_load=cheap)
    results: dict[str, dict] = {}
    with Progress(console=console) as bar:
        task = bar.add_task("serial baseline", total=len(clips) * args.rounds)
        serial = []
        for _ in range(args.rounds):
            for _, audio, rate in clips:
                serial.append(serial_turn(audio, rate, profile, stages))
                bar.advance(task)
        for n in levels:
            task = bar.add_task(f"{n} call(s) at once", total=len(clips) * args.rounds)
            calls: list[tuple[str, SimulatedCall]] = []
            for _ in range(args.rounds):
                for i in range(0, len(clips), n):
                    batch = [clips[(i + k) % len(clips)] for k in range(n)]
                    calls.extend(_at_once(batch, profile, stages, phrase, cheap, load))
                    bar.advance(task, len(batch))
            results[str(n)] = _summary(calls)
        task = bar.add_task("mid-sentence pauses", total=len(PAUSED))
        false_ends = 0
        for first, second in PAUSED:
            audio, rate = spoken_with_pause(first, second)
            call = simulate(audio, rate, profile, stages, fast=True, greeting=False,
                            phrase=phrase, source="bench", under_load=cheap)
            heard = [t for t in call.turns if not t.unanswered]
            false_ends += len(heard) != 1  # answered after the first half, or not at all
            bar.advance(task)
    base = [t.voice_to_voice_s for t in serial]
    baseline = {"voice_to_voice_s": {"p50": percentile(base, 50), "p95": percentile(base, 95)},
                "compute_s_p50": percentile([t.compute_s for t in serial], 50),
                "turns": [asdict(t) for t in serial]}
    pauses = {"questions": len(PAUSED), "false_end_of_turn": false_ends}
    if args.format == "json":
        print(json.dumps({"profile": profile.name, "load_s": load_s, "baseline": baseline,
                          "calls": results, "mid_sentence_pauses": pauses}))
        return 0
    print(markdown_header("bench pipeline"))
    Console().print(_table(profile, results, baseline))
    for n, r in results.items():
        Console().print(f"{n} call(s): {r['turns']} turns, {r['unanswered']} unanswered, "
                        f"ASR WER {r['wer']:.1%}")
    Console().print(f"false end of turn: {false_ends}/{len(PAUSED)} questions with a 0.7 s "
                    f"mid-sentence pause were not answered as one turn")
    hangover_ms = profile.audio.endpoint_silence_s * 1000
    Console().print(f"models loaded in {load_s:.1f} s; serial baseline = hangover "
                    f"{hangover_ms:.0f} ms + ASR + LLM to first clause + TTS")
    return 0


def _at_once(batch, profile, stages, phrase, cheap,
             load: LoadPolicy) -> list[tuple[str, SimulatedCall]]:
    """Simulate one call per question, all started together."""
    out: list[tuple[str, SimulatedCall] | None] = [None] * len(batch)

    # Several calls run in real time: each simulated call has its own clock, and the scheduler
    # orders their jobs by speech-end stamps, which are comparable only on one shared clock.
    fast = len(batch) == 1

    def one(k: int) -> None:
        text, audio, rate = batch[k]
        out[k] = (text, simulate(audio, rate, profile, stages, fast=fast, greeting=False,
                                 phrase=phrase, source="bench", under_load=cheap, load=load))

    threads = [threading.Thread(target=one, args=(k,)) for k in range(len(batch))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [x for x in out if x is not None]


def _summary(calls: list[tuple[str, SimulatedCall]]) -> dict:
    turns: list[TurnRecord] = [t for _, c in calls for t in c.turns]
    stages = {}
    for _, field in (*STAGES, ("", "asr_rtf"), ("", "tts_rtf")):
        vals = [getattr(t, field) for t in turns if getattr(t, field) is not None]
        stages[field] = {"p50": percentile(vals, 50), "p95": percentile(vals, 95), "n": len(vals)}
    answered = sum(1 for _, c in calls if any(t.voice_to_voice_s is not None for t in c.turns))
    return {
        "calls": len(calls),
        "turns": len(turns),
        "unanswered": len(calls) - answered,
        "wer": scoring.wer([q for q, _ in calls],
                           [" ".join(t.transcript for t in c.turns) for _, c in calls]),
        "stages": stages,
    }


def _table(profile, results: dict, baseline: dict) -> Table:
    table = Table(title=f"bench pipeline: profile {profile.name} (asr {profile.asr.model}, "
                        f"llm {profile.llm.model}), ms p50 / p95")
    table.add_column("stage")
    for n in results:
        table.add_column(f"{n} call(s)", justify="right")
    for name, field in STAGES:
        table.add_row(name, *(_pair(r["stages"][field], scale=1000) for r in results.values()))
    for name, field in (("ASR RTF", "asr_rtf"), ("TTS RTF", "tts_rtf")):
        table.add_row(name, *(_pair(r["stages"][field], 2) for r in results.values()))
    b = baseline["voice_to_voice_s"]
    table.add_row("serial baseline v2v", *([_pair(b, scale=1000)] * len(results)))
    table.add_row("v2v p50 / baseline p50", *(
        _ratio(r["stages"]["voice_to_voice_s"]["p50"], b["p50"]) for r in results.values()))
    return table


def _pair(s: dict, digits: int = 0, scale: float = 1.0) -> str:
    def f(v):
        return "-" if v is None else f"{v * scale:.{digits}f}"

    return f"{f(s['p50'])} / {f(s['p95'])}"


def _ratio(a: float | None, b: float | None) -> str:
    return "-" if a is None or not b else f"{a / b:.2f}x"
