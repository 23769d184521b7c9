"""``callagent bench call``: voice-to-voice and packet pacing measured on the wire.

Every caller asks a different question (the 30 of ``bench wer``, in turn, two espeak-ng voices),
and all of a round's callers ask at once: one question asked by every call would be answered
from the LLM's prompt cache after the first call, which no real caller gets.

For each setup of ``--workers`` (``1``: one supervised ``callagent serve``; ``N >= 2``:
``callagent cluster --workers N``, kamailio in front), a subprocess with its own ports and
SQLite call log is started, loopback RTP is captured with ``tshark`` over every worker's RTP
range, and ``sipp`` calls it ``--concurrency`` at a time, each caller streaming a spoken question
(espeak-ng, 8 kHz μ-law); through kamailio the caller's ACK and BYE follow Record-Route. Per
round, from the capture:

* voice-to-voice = first agent RTP packet with speech after the question - last caller RTP
  packet with speech (packet timestamps from the kernel, not the agent's own stamps);
* reply packet gap = interval between consecutive agent RTP packets inside a reply (target
  <= 40 ms);
* dead air = holes of zero-sample frames inside a reply (>= 60 ms): the agent keeps sending
  20 ms packets when a reply's next chunk is late, so the packet gap cannot show it (a voice's
  own pause may be zeros too, a small part of a round's total);

and from the call log: calls answered of those placed (a refused call leaves no record; sipp's
error file gives the status the caller got), unanswered turns by reason, and calls per worker.
``--workers 1,2`` runs both setups in one invocation and prints their rounds in one table,
beside the naive serial pipeline.

``--turns 2`` or ``3``: each call is a conversation whose later questions are follow-ups
(:mod:`bench.call_conversations`), asked ``--gap-s`` apart in one stream; every question
is read off the wire and matched to its logged turn (:mod:`bench.call_turns`), and a
second table gives first turns and follow-ups apart. ``--turns 1`` (the default) is the
one-question call above, read as before.

A benchmark, not a test: it prints numbers and asserts nothing. Wire reading and the sipp /
tshark tools are :mod:`testkit.wire`, starting the agent :mod:`testkit.agentproc`.
Imports no pjsua2 until it runs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Collection
from pathlib import Path

import numpy as np

from agent.supervisor import terminate
from bench.call_conversations import MAX_TURNS
from bench.call_round import Round, refused_text, split_text
from bench.call_turns import (
    MIN_GAP_S,
    Layout,
    conversation_audio,
    log_turns,
    print_turns_table,
    turn_stats,
    wire_turns,
)
from bench.header import markdown_header, markdown_table
from bench.wer.questions import QUESTIONS
from db.stats import percentile
from dialplan.options import LLMOptions
from testkit.agentproc import (
    bench_config,
    caller_media,
    free_block,
    free_port,
    read_call_log,
    start_cluster,
    start_serve,
)
from testkit.wire import (
    ROUTED,
    Capture,
    dead_air_ms,
    each_call,
    gaps_ms,
    scenario,
    sipp_argv,
    sipp_refusals,
    split_calls,
    spoken_ulaw,
)

TOOLS = ("sipp", "tshark", "espeak-ng", "sox")
VOICES = ("en-us", "en")
"""The callers' espeak-ng voices, in turn (American, British)."""
SHIPPED_UNDER_LOAD = ("base", "qwen2.5-coder-0.5b-instruct-iq4_nl")
"""(ASR, LLM) of config.toml's default profile's ``under_load`` profile ("lite"), which the
bench profile gets unless told otherwise: its figures are what the shipped config gives."""
SERIAL_QUESTIONS = 6
"""Questions the naive serial pipeline answers (its median is the ratios' base)."""


def worker_counts(text: str) -> list[int]:
    """``--workers`` value: ``"1,2"`` -> ``[1, 2]``, each at least 1."""
    try:
        counts = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a list of worker counts such as 1,2") from None
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: every worker count must be at least 1")
    return counts


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workers", type=worker_counts, default=[1], metavar="N[,N...]",
                        help="agent processes: 1 = one serve, N >= 2 = callagent cluster with "
                             "kamailio; a list runs each setup in turn (default: 1)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4],
                        help="simultaneous calls per round (default: 1 4)")
    parser.add_argument("--rounds", type=int, default=2, help="calls per caller slot")
    parser.add_argument("--profile-llm", default=LLMOptions().model,
                        help="LLM of the bench profile (default: the shipped default)")
    parser.add_argument("--llm-backend", default="llama-batch",
                        choices=("llama-cpp", "llama-batch", "xllamacpp"),
                        help="LLM backend of the bench profile")
    parser.add_argument("--asr-model", default="base", help="ASR model of the bench profile")
    parser.add_argument("--tts", choices=("kokoro", "piper"), default="kokoro",
                        help="the bench profile's voice: kokoro as shipped (af_heart, hibari's "
                             "lead, hibari under load) or piper (en_US-joe-medium throughout)")
    parser.add_argument("--threads", type=int, default=None,
                        help="ASR, LLM and TTS threads per worker (default: CPU cores / workers, "
                             "at least 1; each worker's scheduler runs one model job at a time)")
    parser.add_argument("--llm-threads", type=int, default=None,
                        help="llama.cpp threads, over --threads")
    parser.add_argument("--hold-s", type=float, default=20.0,
                        help="call length after answer (with --turns 2 or more: silence after "
                             "the last question); the caller sends silence till its BYE")
    parser.add_argument("--turns", type=int, default=1, choices=range(1, MAX_TURNS + 1),
                        help="questions per call: 1 = one of bench wer's questions; 2 or 3 = "
                             "a conversation whose later questions are follow-ups (default: 1)")
    parser.add_argument("--gap-s", type=float, default=7.0,
                        help="with --turns 2 or more: silence after each question but the "
                             f"last, the reply's time (default: 7, at least {MIN_GAP_S:g})")
    parser.add_argument("--under-load", type=_model_pair, default=SHIPPED_UNDER_LOAD,
                        metavar="ASR,LLM",
                        help="the bench profile's under_load profile's models, e.g. "
                             "tiny.en,smollm2-135m, or none (default: config.toml's, "
                             f"{','.join(SHIPPED_UNDER_LOAD)})")
    parser.add_argument("--persona", default=None, metavar="PROFILE",
                        help="serve this config.toml profile's persona (system prompt, greeting, "
                             "knowledge file, tools, directory) instead of a one-line one")
    parser.add_argument("--keep", default=None, help="keep captures and logs in this folder")


def _persona(name: str | None):
    """The shipped profile ``name`` of the checkout's config.toml, or None."""
    if name is None:
        return None
    from dialplan import load_config
    from testkit.agentproc import ROOT

    profiles = load_config(ROOT / "config.toml").profiles
    if name not in profiles:
        raise SystemExit(f"bench call: --persona: no profile {name!r} in config.toml "
                         f"({', '.join(profiles)})")
    return profiles[name]


def _model_pair(text: str) -> tuple[str, str] | None:
    """``--under-load`` value: ``"tiny.en,smollm2-135m"`` -> ``("tiny.en", "smollm2-135m")``."""
    if text.strip().lower() == "none":
        return None
    parts = [x.strip() for x in text.split(",")]
    if len(parts) != 2 or not all(parts):
        raise argparse.ArgumentTypeError(f"{text!r} is not ASR,LLM such as tiny.en,smollm2-135m")
    return parts[0], parts[1]


def run(args: argparse.Namespace) -> int:
    tools = TOOLS + (("kamailio",) if max(args.workers) > 1 else ())
    for tool in tools:
        # Debian puts kamailio in /usr/sbin, outside a normal user's PATH.
        if shutil.which(tool) is None and not os.path.exists(f"/usr/sbin/{tool}"):
            print(f"bench call: {tool} not found (make setup installs it)", file=sys.stderr)
            return 2
    if args.turns > 1 and args.gap_s < MIN_GAP_S:
        print(f"bench call: --gap-s must be at least {MIN_GAP_S:g}", file=sys.stderr)
        return 2
    work = Path(args.keep or tempfile.mkdtemp(prefix="callagent-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    # Silence after the question until the BYE: a phone keeps sending RTP (no RTP = dead line).
    layout = None
    if args.turns > 1:
        layout, audio = conversation_audio(args.rounds * max(args.concurrency), args.turns,
                                           work, args.gap_s, args.hold_s, VOICES)
    else:
        n_audio = min(len(QUESTIONS), max(args.rounds * max(args.concurrency), SERIAL_QUESTIONS))
        audio = [spoken_ulaw(QUESTIONS[i], work / f"question{i}.ulaw", tail_s=args.hold_s,
                             voice=VOICES[i % len(VOICES)]) for i in range(n_audio)]
    rounds: list[Round] = []
    configs = []
    for n in args.workers:
        setup = work / f"workers-{n}"
        setup.mkdir(exist_ok=True)
        configs.append(setup / "config.toml")
        done = run_setup(n, args, setup, configs[-1], audio, layout)
        if done is None:
            return 1
        rounds += done
    baseline = _serial_baseline(configs[0])
    print_table(rounds, baseline)
    if layout is not None:
        print_turns_table(rounds, baseline, layout, args.gap_s)
    print(f"captures and logs: {work}")
    return 0


def run_setup(n: int, args, setup: Path, config: Path, audio: list[Path],
              layout: Layout | None) -> list[Round] | None:
    """Start one serve (``n`` = 1) or a cluster of ``n``, run every concurrency, stop it."""
    from agent.sip.useragent import (
        RTP_PORT_RANGE,  # pjsua2 only when the bench runs, not at CLI parse
    )

    threads = args.threads or max(1, (os.cpu_count() or 1) // n)
    port = free_block(n + 1)  # kamailio's, then worker i on port + i (a serve takes the first)
    # The cluster gives each worker RTP_PORT_RANGE ports from rtp_port, in worker order.
    rtp = free_block(n * RTP_PORT_RANGE)
    agent_ports = range(rtp, rtp + n * RTP_PORT_RANGE)
    config.write_text(bench_config(port, rtp, setup, args.profile_llm,
                                   args.llm_threads or threads, args.asr_model,
                                   stage_threads=threads, max_silence_s=args.hold_s + 30,
                                   llm_backend=args.llm_backend, under_load=args.under_load,
                                   tts=args.tts, persona=_persona(args.persona)))
    log = setup / ("serve.log" if n == 1 else "cluster.log")
    proc = start_serve(config, log) if n == 1 else start_cluster(config, log, n)
    if proc is None:
        print(f"bench call: agent did not start, see {log}", file=sys.stderr)
        return None
    print(f"{'serve' if n == 1 else f'cluster of {n} workers'} up on 127.0.0.1:{port}, "
          f"{threads} thread(s) per stage", flush=True)
    try:
        return [one_round(n, c, args, setup, port, audio, agent_ports, layout)
                for c in args.concurrency]
    finally:
        terminate(proc, 90)


def one_round(n: int, concurrency: int, args, setup: Path, port: int, audio: list[Path],
              agent_ports: range, layout: Layout | None = None) -> Round:
    db = setup / "calls.db"
    before = set(_query(db, "SELECT id FROM calls"))
    placed = concurrency * args.rounds
    call_s = args.hold_s if layout is None else layout.duration_s  # stream start to BYE
    xmls, rcs = [], []
    with Capture(setup / f"calls_{concurrency}.pcap", agent_ports) as capture:
        for r in range(args.rounds):
            # One sipp per caller, all started together: each streams its own question.
            procs = []
            media = caller_media(concurrency, agent_ports)
            for i in range(concurrency):
                k = r * concurrency + i
                # Through kamailio the ACK and BYE must follow Record-Route to the worker.
                xml = scenario(ROUTED if n > 1 else "uac_stream",
                               setup / f"stream_{concurrency}_{k}.xml",
                               audio=audio[k % len(audio)], hold_ms=int(call_s * 1000))
                xmls.append(xml)
                argv = sipp_argv(xml, "101", port, free_port(), media[i],
                                 timeout_s=call_s + 60)
                procs.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                                              stderr=subprocess.DEVNULL))
            for proc in procs:
                try:
                    rcs.append(proc.wait(call_s + 75))
                except subprocess.TimeoutExpired:
                    proc.kill()
                    rcs.append(proc.wait())
    calls = _settled(db, before)
    turns = _query(db, "SELECT call_id, unanswered FROM turns") if calls else []
    turns = [why for cid, why in turns if cid in calls]
    unanswered: dict[str, int] = {}
    for why in turns:
        if why:
            unanswered[why] = unanswered.get(why, 0) + 1
    per_worker: dict[str, int] = {}
    for worker in calls.values():
        per_worker[worker or "serve"] = per_worker.get(worker or "serve", 0) + 1
    v2v, gaps, holes, wire = [], [], [], []
    for call in each_call(split_calls(capture.packets(), agent_ports)):
        wire.append(wire_turns(call, layout))
        for turn in wire[-1]:
            if turn.v2v_s is not None:
                v2v.append(turn.v2v_s * 1000)
            # Dead air reply by reply: between replies the agent listens, sending zeros.
            gaps.extend(gaps_ms(call.agent, turn.replies))
            if turn.replies:
                holes.append(dead_air_ms(call.agent, turn.replies))
    refused: dict[int, int] = {}
    for xml in xmls:
        for code, k in sipp_refusals(xml).items():
            refused[code] = refused.get(code, 0) + k
    r = Round(n, concurrency, placed, len(calls), refused, v2v, gaps, len(turns),
              unanswered, per_worker, max(rcs, default=0), events_of(db, "under-load", calls),
              events_of(db, "asked-to-repeat", calls), holes,
              None if layout is None else turn_stats(wire, log_turns(db, calls).values(), layout))
    print(r.line(), flush=True)
    return r


def events_of(db: Path, kind: str, calls: Collection[str]) -> int:
    """Call-log events of ``kind`` (one per turn) in ``calls``: this round's, not earlier ones'."""
    rows = _query(db, "SELECT call_id FROM events WHERE kind = ?", (kind,))
    return sum(1 for cid in rows if cid in calls)


def _query(db: Path, sql: str, params: tuple = ()) -> list:
    """:func:`read_call_log`, a one-column row as its value."""
    return [r[0] if len(r) == 1 else r for r in read_call_log(db, sql, params)]


def _settled(db: Path, before: set[str], timeout_s: float = 30) -> dict[str, str | None]:
    """The round's calls (id -> worker) once each has ended in the call log.

    sipp is done when the last BYE is answered; the call log is written a moment later.
    """
    end = time.monotonic() + timeout_s
    while True:
        rows = [r for r in _query(db, "SELECT id, worker, ended_at FROM calls")
                if r[0] not in before]
        if all(ended for _, _, ended in rows) or time.monotonic() > end:
            return {cid: worker for cid, worker, _ in rows}
        time.sleep(0.5)


def print_table(rounds: list[Round], baseline_s: float) -> None:
    """Every round of every setup in one markdown table, with p50 over the naive serial pipeline."""
    rows = []
    for r in rounds:
        p50 = percentile(r.v2v_ms, 50)
        ratio = "n/a" if p50 is None else f"{p50 / 1000 / baseline_s:.2f}x"
        rows.append((r.setup, r.concurrency, f"{r.answered}/{r.placed}", refused_text(r.refused),
                     r.pct(r.v2v_ms, 50), r.pct(r.v2v_ms, 95), ratio,
                     f"{sum(r.unanswered.values())}/{r.turns}", r.pct(r.gaps_ms, 99),
                     f"{r.dead_air_s:.1f}", split_text(r.per_worker)))
    print("\n" + markdown_header("bench call"))
    print(f"\nNaive serial pipeline (same models, the first {SERIAL_QUESTIONS} questions, "
          f"hangover + ASR + LLM to first clause + TTS): {baseline_s * 1000:.0f} ms.\n")
    print(markdown_table(("setup", "calls", "answered", "refused", "v2v p50 ms", "v2v p95 ms",
                          "p50/serial", "unanswered", "gap p99 ms", "dead air s", "per worker"),
                         rows, right=range(1, 10)))
    print("\ncalls: simultaneous callers; answered: calls in the call log of those placed; "
          "refused: N x SIP status the callers got; v2v (voice-to-voice) and gap on the wire; "
          "unanswered: turns without reply audio / turns; dead air: silence inside replies.")


def _serial_baseline(config: Path) -> float:
    """Median voice-to-voice (s) of the naive serial pipeline on the bench's first questions.

    The same models and voices, loaded in this process once the agent has stopped (same
    machine, same run); each question once, after a warm-up on another.
    """
    from agent.turn.runner import StageCache
    from bench.baseline import serial_turn
    from dialplan import load_config
    from testkit.samples import spoken

    profile = load_config(config).profiles["fast"]
    stages = StageCache().stages(profile)
    serial_turn(*spoken(QUESTIONS[-1]), profile, stages)  # warm-up
    return float(np.median([
        serial_turn(*spoken(QUESTIONS[i], voice=VOICES[i % len(VOICES)]), profile,
                    stages).voice_to_voice_s
        for i in range(SERIAL_QUESTIONS)]))
