"""``callagent bench flood``: allowed callers' voice-to-voice while one source floods INVITEs.

A supervised ``callagent serve`` (its own ports and SQLite call log) allows callers from
127.0.0.1 only (``sip.allow``) at the default ``sip.invite_rate``. A round is quiet or flooded:

* quiet: ``--callers`` sipp callers from 127.0.0.1 each stream a spoken question at once;
* flooded: the same, started ``FLOOD_LEAD_S`` after a sipp on 127.0.0.3 began sending
  ``--rate`` INVITEs a second for ``--flood-s`` seconds, as a scanner outside the allowed
  networks would. The agent's gate refuses the flood before any media: 503 with
  ``Retry-After`` over the source's rate, 403 (not allowed) for the few its bucket lets by.

Questions differ in length and in the reply they draw, and one asked again of the same agent is
answered from the LLM's prompt cache, so each of the ``--rounds`` is a balanced square: two
sets of questions, two fresh agents, the first agent asking set A quiet then set B flooded, the
second set A flooded then set B quiet. Every set is heard once quiet and once flooded, each
first once and second once, and never twice by one agent; a flooded round is compared with the
quiet round of the same questions.

Voice-to-voice is read on the wire (tshark on the agent's RTP ports, as ``bench call`` does:
the caller's last speech packet to the agent's first reply speech packet); the call log says
which calls were answered; sipp's summary and error file say how the flood was answered; the
CPU seconds the agent's processes used in each round say what refusing the flood cost it.

A benchmark, not a test: it prints numbers and asserts nothing. Imports no pjsua2.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from agent.supervisor import terminate
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
    start_serve,
    tree_cpu_s,
)
from testkit.wire import (
    Capture,
    each_call,
    scenario,
    sipp_argv,
    sipp_refusals,
    split_calls,
    spoken_ulaw,
)

TOOLS = ("sipp", "tshark", "espeak-ng", "sox")
CALLERS_FROM = "127.0.0.1"
FLOOD_FROM = "127.0.0.3"
FLOOD_LEAD_S = 0.5
"""The flood runs this long before the callers dial: they talk into a flood already going."""
RTP_PORTS = 100
"""The agent's RTP range (``agent.sip.pjconfig.RTP_PORT_RANGE``, not imported: pjsua2)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rate", type=int, default=200, help="flood INVITEs per second")
    parser.add_argument("--flood-s", type=float, default=10.0, help="flood length (s)")
    parser.add_argument("--callers", type=int, default=2,
                        help="allowed callers per round, all at once")
    parser.add_argument("--rounds", type=int, default=1,
                        help="balanced squares: each is 2 agents, 2 quiet and 2 flooded rounds")
    parser.add_argument("--profile-llm", default=LLMOptions().model,
                        help="LLM of the bench profile (default: the shipped default)")
    parser.add_argument("--asr-model", default="base", help="ASR model of the bench profile")
    parser.add_argument("--threads", type=int, default=2, help="threads per model stage")
    parser.add_argument("--hold-s", type=float, default=20.0,
                        help="call length after answer; the caller sends silence till its BYE")
    parser.add_argument("--keep", default=None, help="keep captures and logs in this folder")


@dataclass
class FloodRound:
    """One round of allowed callers, quiet or under a flood."""

    flooded: bool
    placed: int
    answered: int
    """Calls of this round in the call log."""
    v2v_ms: list[float]
    """Voice-to-voice on the wire, one per call where both sides spoke."""
    sipp_rc: int
    sent: int = 0
    """Flood INVITEs sipp sent."""
    flood: dict[int, int] = field(default_factory=dict)
    """How the flood was answered: SIP status -> INVITEs."""
    unanswered: int = 0
    """Flood INVITEs with no final answer within sipp's timeout."""
    replies_in_flood: int = 0
    """Calls whose reply began before the flood ended."""
    questions: int = 0
    """Which set of questions the callers asked (a quiet and a flooded round share each)."""
    agent_cpu_s: float = 0.0
    """CPU seconds the agent's processes used during the round."""
    flood_cpu_s: float = 0.0
    """CPU seconds the flooding sipp used (on this machine, beside the agent)."""

    @property
    def kind(self) -> str:
        return "flooded" if self.flooded else "quiet"


def run(args: argparse.Namespace) -> int:
    for tool in TOOLS:
        if shutil.which(tool) is None:
            print(f"bench flood: {tool} not found (make setup installs it)", file=sys.stderr)
            return 2
    work = Path(args.keep or tempfile.mkdtemp(prefix="callagent-flood-"))
    work.mkdir(parents=True, exist_ok=True)
    rounds = measure(args, work)
    if rounds is None:
        return 1
    print_table(rounds, args)
    print(f"captures and logs: {work}")
    return 0


def plan(rounds: int, balanced: bool = True) -> list[list[tuple[bool, int]]]:
    """Per agent started, its rounds in order: (flooded, question set).

    Balanced: each square's two agents ask sets ``2k`` and ``2k+1``, one quiet first and one
    flooded first. Not balanced (the test's short form): one agent, quiet then flooded.
    """
    if not balanced:
        return [[(bool(i % 2), i) for i in range(2 * rounds)]]
    out = []
    for k in range(rounds):
        a, b = 2 * k, 2 * k + 1
        out += [[(False, a), (True, b)], [(True, a), (False, b)]]
    return out


def measure(args: argparse.Namespace, work: Path,
            balanced: bool = True) -> list[FloodRound] | None:
    """Start each agent of :func:`plan`, run its rounds, stop it; None if one did not start."""
    agents = plan(args.rounds, balanced)
    sets = 1 + max(q for rounds in agents for _, q in rounds)
    audio = [spoken_ulaw(QUESTIONS[i % len(QUESTIONS)], work / f"question{i}.ulaw",
                         tail_s=args.hold_s, voice=("en-us", "en")[i % 2])
             for i in range(sets * args.callers)]
    out = []
    for n, rounds in enumerate(agents):
        port, rtp = free_port(), free_block(RTP_PORTS)
        agent_ports = range(rtp, rtp + RTP_PORTS)
        where = work if len(agents) == 1 else work / f"agent{n}"
        where.mkdir(parents=True, exist_ok=True)
        config = where / "config.toml"
        config.write_text(bench_config(port, rtp, where, args.profile_llm, args.threads,
                                       args.asr_model, stage_threads=args.threads,
                                       max_silence_s=args.hold_s + 30, under_load=None,
                                       sip_extra=f'allow = ["{CALLERS_FROM}/32"]'))
        log = where / "serve.log"
        proc = start_serve(config, log)
        if proc is None:
            print(f"bench flood: agent did not start, see {log}", file=sys.stderr)
            return None
        print(f"agent {n + 1}/{len(agents)}: serve up on 127.0.0.1:{port}", flush=True)
        try:
            for flooded, q in rounds:
                questions = audio[q * args.callers:(q + 1) * args.callers]
                r = one_round(flooded, args, where / f"round{len(out)}", port, questions,
                              agent_ports, proc.pid)
                r.questions = q
                out.append(r)
                print(line(out[-1]), flush=True)
        finally:
            terminate(proc, 90)
    return out


def flood_argv(xml: Path, port: int, rate: int, seconds: float,
               source: str = FLOOD_FROM) -> list[str]:
    """The sipp that sends ``rate`` INVITEs a second for ``seconds`` from ``source``.

    ``source`` is another address of this machine (127.0.0.0/8 is all loopback).
    """
    total = int(rate * seconds)
    argv = sipp_argv(xml, "101", port, free_port(), free_port(), calls=total, concurrent=rate,
                     timeout_s=seconds + 20)
    argv[argv.index("-i") + 1] = source
    argv[argv.index("-mi") + 1] = source
    argv[argv.index("-l") + 1] = str(2 * rate)  # refusals end at once: few are open together
    return argv


def one_round(flooded: bool, args, where: Path, port: int, audio: list[Path],
              agent_ports: range, agent_pid: int) -> FloodRound:
    where.mkdir(parents=True, exist_ok=True)
    db = where.parent / "calls.db"
    before = {r[0] for r in read_call_log(db, "SELECT id FROM calls")}
    flood = flood_xml = None
    started = flood_end = flood_cpu = 0.0
    cpu0 = tree_cpu_s(agent_pid)
    with Capture(where / "calls.pcap", agent_ports) as cap:
        if flooded:
            flood_xml = scenario("uac_refused", where / "flood.xml", code=503,
                                 header="Retry-After", value="^ *[1-9][0-9]*$")
            flood = subprocess.Popen(flood_argv(flood_xml, port, args.rate, args.flood_s),
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            started = time.time()
            time.sleep(FLOOD_LEAD_S)
        media = caller_media(len(audio), agent_ports)
        callers = [subprocess.Popen(
            sipp_argv(scenario("uac_stream", where / f"caller{i}.xml", audio=q,
                               hold_ms=int(args.hold_s * 1000)), "101", port, free_port(),
                      media[i], timeout_s=args.hold_s + 60),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for i, q in enumerate(audio)]
        if flood is not None:  # its CPU time, read before sipp exits and is reaped
            while flood.poll() is None and time.time() < started + args.flood_s + 60:
                flood_cpu = tree_cpu_s(flood.pid) or flood_cpu
                time.sleep(0.2)
        rcs = [_wait(c, args.hold_s + 75) for c in callers]
        flood_out = ""
        if flood is not None:
            flood_out, _ = flood.communicate(timeout=args.flood_s + 60)
            flood_end = started + args.flood_s
            (where / "flood.out").write_text(flood_out)
    answered = [r for r in read_call_log(db, "SELECT id FROM calls") if r[0] not in before]
    v2v, in_flood = [], 0
    for call in each_call(split_calls(cap.packets(), agent_ports)):
        if (v := call.voice_to_voice_s()) is not None:
            v2v.append(v * 1000)
            replies = call.reply_runs()
            in_flood += bool(flooded and replies and replies[0][0] < flood_end)
    r = FloodRound(flooded, len(audio), len(answered), v2v, max(rcs, default=0),
                   replies_in_flood=in_flood, agent_cpu_s=tree_cpu_s(agent_pid) - cpu0,
                   flood_cpu_s=flood_cpu)
    if flood_xml is not None:
        r.sent, r.flood, r.unanswered = flood_outcome(flood_out, flood_xml)
    return r


def _wait(proc: subprocess.Popen, timeout_s: float) -> int:
    try:
        return proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


def flood_outcome(summary: str, xml: Path,
                  expected: int = 503) -> tuple[int, dict[int, int], int]:
    """(INVITEs sent, answers by status, INVITEs never answered) of the flood's sipp.

    A call of the refusal scenario succeeds on the ``expected`` status (503 with
    ``Retry-After``); the error file names the status of each that got something else, and
    what is left timed out.
    """
    def count(label: str) -> int:
        m = re.search(rf"{label}\s*\|\s*\d+\s*\|\s*(\d+)", summary)
        return int(m.group(1)) if m else 0

    ok, failed = count("Successful call"), count("Failed call")
    answers = sipp_refusals(xml)
    if ok:
        answers[expected] = answers.get(expected, 0) + ok
    return ok + failed, answers, failed - sum(k for c, k in answers.items() if c != expected)


def line(r: FloodRound) -> str:
    v2v = ", ".join(f"{v:.0f}" for v in r.v2v_ms) or "none"
    text = (f"{r.kind} (questions {r.questions}): answered {r.answered}/{r.placed}, "
            f"voice-to-voice ms {v2v}, sipp rc={r.sipp_rc}, agent CPU {r.agent_cpu_s:.1f} s")
    if r.flooded:
        text += (f" | flood: {r.sent} INVITEs, {_answers(r.flood)}, {r.unanswered} unanswered, "
                 f"{r.replies_in_flood} replies began during the flood, flood sipp CPU "
                 f"{r.flood_cpu_s:.1f} s")
    return text


def _answers(answers: dict[int, int]) -> str:
    return ", ".join(f"{n} x {code}" for code, n in sorted(answers.items())) or "none"


def paired(rounds: list[FloodRound]) -> list[tuple[int, float, float]]:
    """(question set, quiet p50, flooded p50) for every set heard both ways, in set order."""
    by: dict[int, dict[bool, float]] = {}
    for r in rounds:
        if (p50 := percentile(r.v2v_ms, 50)) is not None:
            by.setdefault(r.questions, {})[r.flooded] = p50
    return [(q, v[False], v[True]) for q, v in sorted(by.items()) if len(v) == 2]


def print_table(rounds: list[FloodRound], args) -> None:
    """The rounds as one markdown table, each flooded one over the quiet one of its questions."""
    both = paired(rounds)
    pairs = {q: quiet for q, quiet, _ in both}
    rows = []
    for r in rounds:
        p50 = percentile(r.v2v_ms, 50)
        base = pairs.get(r.questions)
        ratio = ("-" if not r.flooded else "n/a" if p50 is None or not base
                 else f"{p50 / base:.2f}x")
        rows.append((r.kind, str(r.questions), f"{r.answered}/{r.placed}",
                     ", ".join(f"{v:.0f}" for v in r.v2v_ms) or "-",
                     "-" if p50 is None else f"{p50:.0f}", ratio, f"{r.agent_cpu_s:.1f}",
                     f"{r.sent} at {args.rate}/s" if r.flooded else "-",
                     _answers(r.flood) if r.flooded else "-",
                     f"{r.replies_in_flood}/{len(r.v2v_ms)}" if r.flooded else "-"))
    print("\n" + markdown_header("bench flood"))
    print(f"\nModels: {args.asr_model} + {args.profile_llm}, {args.threads} thread(s) a stage; "
          f"{args.callers} callers from {CALLERS_FROM} (allowed) per round; flood from "
          f"{FLOOD_FROM} (not allowed) for {args.flood_s:g} s.\n")
    quiet = percentile([v for r in rounds if not r.flooded for v in r.v2v_ms], 50)
    flooded = percentile([v for r in rounds if r.flooded for v in r.v2v_ms], 50)
    ratios = [f / q for _, q, f in both if q]
    rows.append(("all", "", f"{sum(r.answered for r in rounds)}/{sum(r.placed for r in rounds)}",
                 "", f"quiet {quiet:.0f}, flooded {flooded:.0f}" if quiet and flooded else "-",
                 f"{flooded / quiet:.2f}x" if quiet and flooded else "n/a", "", "", "", ""))
    print(markdown_table(("round", "questions", "answered", "v2v ms", "v2v p50 ms",
                          "p50 / quiet", "agent CPU s", "flood", "flood answered",
                          "replies in flood"), rows, right=range(2, 7)))
    cost = [(f.agent_cpu_s - q.agent_cpu_s, f.sent) for f in rounds if f.flooded
            for q in rounds if not q.flooded and q.questions == f.questions]
    spent = ", ".join(f"{c:+.1f} CPU s ({1000 * c / n:.2f} ms an INVITE)" for c, n in cost if n)
    median = f" (median {percentile(ratios, 50):.2f}x)" if ratios else ""
    sipp = ", ".join(f"{r.flood_cpu_s:.1f}" for r in rounds if r.flooded)
    print(f"\nFlooded over quiet, per set of questions: "
          f"{', '.join(f'{x:.2f}x' for x in ratios) or 'n/a'}{median}. The flood cost the "
          f"agent {spent or 'n/a'} over the quiet round of the same questions; the flooding "
          f"sipp itself used {sipp} CPU s on this machine.")
    print("\nv2v: voice-to-voice on the wire (caller's last speech packet to the agent's first "
          "reply packet); p50 / quiet: over the quiet round of the same questions (each set is "
          "asked quiet of one agent and flooded of another); flood answered: the agent's final "
          "answers to the flood's INVITEs (503 over the source's rate, 403 for those within "
          "it: the source is not allowed).")
