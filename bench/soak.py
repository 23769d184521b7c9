"""``callagent bench soak``: many calls with unruly callers against a real supervised ``serve``.

Starts ``callagent serve`` (supervised worker, the bench profile of :func:`bench_config` on
extension 101; small models by default so a soak is cheap, ``--shipped`` for the models
config.toml's default profile runs) and places ``--calls`` sipp calls,
``--concurrency`` at a time (one sipp process per call, its own ports), until the calls or
``--max-minutes`` run out. Each caller behaves at random (seeded by ``--seed``): asks a spoken
question and waits for the answer; hangs up mid-question or mid-reply; talks over the agent
with a second question 4-8 s after the first (while it thinks or replies); stays silent (quiet
RTP) and hangs up; sends an RFC 2833 DTMF digit. Before some calls it sends a few malformed SIP
requests (the kind SIP.md reports once crashed a pjsua2 agent) straight at the agent's port,
and before some a few INVITEs from 127.0.0.2, which ``sip.allow`` leaves out (each should be
answered 403; the callers are 127.0.0.1).

At the end it prints what a long run should not show: calls placed / answered (200 OK), turns
and unanswered turns (call log), unauthorised INVITEs sent / answered 403, worker crashes
(``event=worker-died`` lines of the serve log), call records still open after the agent stopped,
calls without an end reason, the worker's RSS at start / end / peak (sampled every second from
``/proc``) and its growth after the first tenth of the calls, and the reply packet gap p99 from
a loopback capture. A benchmark, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from agent.supervisor import terminate
from bench.header import markdown_header, markdown_table
from bench.malformed import send_malformed
from bench.soak_callers import (
    ALLOWED_FROM,
    BEHAVIOURS,
    UNAUTHORISED_FROM,
    Outcome,
    Plan,
    place,
    plan_calls,
    send_unauthorised,
)
from db.stats import percentile
from testkit.agentproc import (
    bench_config,
    caller_media,
    free_block,
    free_port,
    read_call_log,
    shipped_models,
    start_serve,
)
from testkit.wire import Capture, each_call, gaps_ms, split_calls

# ---- the worker's memory ------------------------------------------------------------------------

class RssSampler(threading.Thread):
    """VmRSS (kB) of the latest ``event=worker-started pid=..`` of the serve log, every second."""

    def __init__(self, serve_log: Path):
        super().__init__(daemon=True)
        self.serve_log = serve_log
        self.samples: list[tuple[int, int, float]] = []
        """(pid, VmRSS kB, monotonic time) every second."""
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(1.0):
            pids = re.findall(r"event=worker-started .*?pid=(\d+)",
                              self.serve_log.read_text(errors="replace"))
            if not pids:
                continue
            try:
                status = Path(f"/proc/{pids[-1]}/status").read_text()
            except OSError:
                continue
            if m := re.search(r"^VmRSS:\s+(\d+) kB", status, re.M):
                self.samples.append((int(pids[-1]), int(m.group(1)), time.monotonic()))


# ---- the bench ----------------------------------------------------------------------------------

@dataclass
class Result:
    calls_planned: int
    calls_placed: int
    answered: int
    sipp_failed: int
    rejected: dict = field(default_factory=dict)
    refused_then_redialled: dict = field(default_factory=dict)
    behaviours: dict = field(default_factory=dict)
    malformed_sent: int = 0
    unauthorised_sent: int = 0
    """INVITEs from 127.0.0.2 (outside ``sip.allow``)."""
    unauthorised_answered_403: int = 0
    unauthorised_answers: dict = field(default_factory=dict)
    """Their final answers: SIP status -> INVITEs (all 403 when the gate holds)."""
    unauthorised_unanswered: int = 0
    unauthorised_logged: int = 0
    """``event=call-rejected`` lines of the serve log with code 403 for 127.0.0.2."""
    turns: int = 0
    unanswered_turns: int = 0
    unanswered_by_reason: dict = field(default_factory=dict)
    call_records: int = 0
    worker_crashes: int = 0
    worker_starts: int = 0
    open_records_before_stop: int = 0
    open_records_after_stop: int = 0
    calls_without_end_reason: int = 0
    end_reasons: dict = field(default_factory=dict)
    rss_start_mb: float | None = None
    rss_end_mb: float | None = None
    rss_peak_mb: float | None = None
    rss_warm_mb: float | None = None
    """RSS once a tenth of the calls had ended: arenas and caches have met most inputs."""
    warm_calls: int = 0
    rss_growth_after_warm_pct: float | None = None
    reply_gap_p99_ms: float | None = None
    minutes: float = 0.0
    models: str = ""
    """What the bench profile ran."""
    work: str = ""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--calls", type=int, default=40, help="calls to place (default 40)")
    parser.add_argument("--concurrency", type=int, default=4, help="calls at once (default 4)")
    parser.add_argument("--max-minutes", type=float, default=20.0,
                        help="stop launching calls after this long (default 20)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the callers' behaviour")
    parser.add_argument("--shipped", action="store_true",
                        help="the bench profile runs config.toml's default profile's models "
                             "(ASR; LLM with its backend, threads and max_tokens; under_load's "
                             "ASR and LLM; voice) instead of --asr-model, --profile-llm, "
                             "--llm-backend and --llm-threads")
    parser.add_argument("--profile-llm", default="smollm2-135m", help="LLM of the bench profile")
    parser.add_argument("--llm-backend", default="llama-batch",
                        choices=("llama-cpp", "llama-batch", "xllamacpp"),
                        help="LLM backend of the bench profile")
    parser.add_argument("--asr-model", default="tiny.en", help="ASR model of the bench profile")
    parser.add_argument("--llm-threads", type=int, default=2, help="llama.cpp threads")
    parser.add_argument("--no-capture", action="store_true",
                        help="skip the tshark capture (no reply packet gap)")
    parser.add_argument("--keep", default=None, help="keep audio, logs and the DB in this folder")
    parser.add_argument("--format", choices=("table", "json"), default="table")


def run(args: argparse.Namespace) -> int:
    from agent.sip.useragent import RTP_PORT_RANGE  # pjsua2 only when the bench runs

    tools = ("sipp", "espeak-ng", "sox") + (() if args.no_capture else ("tshark",))
    for tool in tools:
        if shutil.which(tool) is None:
            print(f"bench soak: {tool} not found (make setup installs it)", file=sys.stderr)
            return 2
    work = Path(args.keep or tempfile.mkdtemp(prefix="callagent-soak-"))
    if (work / "calls.db").exists():
        # Its counts would add this run's calls to the earlier run's (more records than calls).
        print(f"bench soak: {work} already holds a call log (calls.db) from an earlier run; "
              "--keep wants a new or empty folder", file=sys.stderr)
        return 2
    work.mkdir(parents=True, exist_ok=True)
    # Free blocks, not fixed ports: two soaks (or a soak and the tests) can share a machine.
    port, rtp = free_port(), free_block(RTP_PORT_RANGE)
    agent_ports = range(rtp, rtp + RTP_PORT_RANGE)
    media = caller_media(args.concurrency, agent_ports)  # each slot's -mp
    config = work / "config.toml"
    text, models = _config(args, port, rtp, work)
    config.write_text(text)
    plans = plan_calls(args.calls, args.seed, work, port)
    serve_log = work / "serve.log"
    proc = start_serve(config, serve_log)
    if proc is None:
        print(f"bench soak: agent did not start, see {serve_log}", file=sys.stderr)
        return 1
    sampler = RssSampler(serve_log)
    rng = random.Random(args.seed + 1)
    outcomes: list[Outcome] = []
    sent = 0
    gate = Gate()
    began = time.monotonic()
    open_before = None
    try:
        sampler.start()
        deadline = time.monotonic() + args.max_minutes * 60
        capture = None if args.no_capture else Capture(work / "soak.pcap", agent_ports)
        if capture:
            capture.__enter__()
        try:
            slots = list(range(args.concurrency))
            lock = threading.Lock()
            ended_at: list[float] = []

            def one(plan: Plan) -> Outcome:
                nonlocal sent
                with lock:
                    slot = slots.pop()
                    if plan.malformed and time.monotonic() <= deadline:
                        sent += send_malformed(port, rng, plan.n, plan.malformed)
                if plan.unauthorised and time.monotonic() <= deadline:
                    gate.add(*send_unauthorised(plan, work, port))
                try:
                    return place(plan, work, port, media[slot], deadline)
                finally:
                    with lock:
                        slots.append(slot)
                        ended_at.append(time.monotonic())

            with ThreadPoolExecutor(args.concurrency) as pool:
                outcomes = list(pool.map(one, plans))
            time.sleep(5)  # let the agent close the last calls and the writer flush them
            open_before = _open_calls(work / "calls.db")
        finally:
            if capture:
                capture.__exit__(None, None, None)
    finally:
        sampler.stop.set()
        terminate(proc, 60)
    result = _result(args, plans, outcomes, sent, work, serve_log, sampler, open_before)
    gate.fill(result, serve_log)
    result.models = models
    _warm_rss(result, sampler, sorted(ended_at))
    result.minutes = round((time.monotonic() - began) / 60, 2)
    if capture:
        gaps = []
        for call in each_call(split_calls(capture.packets(), agent_ports)):
            gaps.extend(gaps_ms(call.agent, call.reply_runs()))
        p99 = percentile(gaps, 99)
        result.reply_gap_p99_ms = None if p99 is None else round(p99, 1)
    _print(result, args.format)
    return 0


def _config(args: argparse.Namespace, port: int, rtp: int, work: Path) -> tuple[str, str]:
    """The bench config (callers allowed from 127.0.0.1 only) and a line naming its models."""
    allow = f'allow = ["{ALLOWED_FROM}/32"]'
    if not args.shipped:
        return (bench_config(port, rtp, work, args.profile_llm, args.llm_threads, args.asr_model,
                             llm_backend=args.llm_backend, sip_extra=allow),
                f"{args.asr_model} + {args.profile_llm}, af_heart with hibari's lead")
    shipped = shipped_models()
    return (bench_config(port, rtp, work, shipped.llm, shipped.threads, shipped.asr,
                         llm_backend=shipped.llm_backend, under_load=shipped.under_load,
                         tts=shipped.tts, max_tokens=shipped.max_tokens, sip_extra=allow),
            f"config.toml's {shipped.profile}: {shipped.describe()}")


class Gate:
    """The unauthorised INVITEs' outcomes, added up from the callers' threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sent = self.unanswered = 0
        self.answers: dict[str, int] = {}

    def add(self, sent: int, answers: dict[int, int], unanswered: int) -> None:
        with self.lock:
            self.sent += sent
            self.unanswered += unanswered
            for code, n in answers.items():
                self.answers[str(code)] = self.answers.get(str(code), 0) + n

    def fill(self, result: Result, serve_log: Path) -> None:
        result.unauthorised_sent = self.sent
        result.unauthorised_answers = dict(sorted(self.answers.items()))
        result.unauthorised_answered_403 = self.answers.get("403", 0)
        result.unauthorised_unanswered = self.unanswered
        source = re.escape(UNAUTHORISED_FROM)
        result.unauthorised_logged = len(re.findall(
            rf"event=call-rejected .*?code=403 .*?source={source}\b",
            serve_log.read_text(errors="replace")))


def _warm_rss(result: Result, sampler: RssSampler, ended_at: list[float]) -> None:
    """RSS after the first tenth of the calls, and the growth from there to the end.

    The first calls meet new input sizes (ASR windows, TTS lengths, KV fill) that the native
    arenas keep; growth after that is what a leak would show.
    """
    if not ended_at or not sampler.samples:
        return
    warm = max(1, len(ended_at) // 10)
    after = [kb for _, kb, at in sampler.samples if at >= ended_at[warm - 1]]
    if not after:
        return
    result.warm_calls = warm
    result.rss_warm_mb = round(after[0] / 1024, 1)
    result.rss_growth_after_warm_pct = round(100 * (after[-1] - after[0]) / after[0], 1)


def _open_calls(db: Path) -> int:
    return read_call_log(db, "SELECT COUNT(*) FROM calls WHERE ended_at IS NULL")[0][0]


def _result(args, plans: list[Plan], outcomes: list[Outcome], sent: int, work: Path,
            serve_log: Path, sampler: RssSampler, open_before: int | None) -> Result:
    db = work / "calls.db"
    placed = [o for o in outcomes if o.placed]
    behaviours: dict[str, str] = {}
    for b in BEHAVIOURS:
        mine = [o for o in placed if o.behaviour == b]
        behaviours[b] = f"{sum(o.answered for o in mine)}/{len(mine)}"
    text = serve_log.read_text(errors="replace")
    reasons = dict(read_call_log(db, "SELECT unanswered, COUNT(*) FROM turns GROUP BY unanswered"))
    ends = dict(read_call_log(db, "SELECT COALESCE(end_reason, ''), COUNT(*) FROM calls "
                           "GROUP BY COALESCE(end_reason, '')"))
    rss = [kb for _, kb, _ in sampler.samples]
    mb = (lambda kb: round(kb / 1024, 1))  # noqa: E731
    return Result(
        calls_planned=len(plans), calls_placed=len(placed),
        answered=sum(o.answered for o in placed),
        sipp_failed=sum(o.rc != 0 for o in placed), behaviours=behaviours,
        rejected={str(c): sum(o.status == c for o in placed)
                  for c in sorted({o.status or 0 for o in placed} - {200})},
        refused_then_redialled={str(c): sum(o.refused.count(c) for o in placed)
                                for c in (486, 503)},
        malformed_sent=sent, turns=sum(reasons.values()),
        unanswered_turns=sum(n for why, n in reasons.items() if why),
        unanswered_by_reason={why: n for why, n in reasons.items() if why},
        call_records=sum(ends.values()),
        worker_crashes=text.count("event=worker-died"),
        worker_starts=text.count("event=worker-started"),
        open_records_before_stop=open_before if open_before is not None else -1,
        open_records_after_stop=_open_calls(db),
        calls_without_end_reason=ends.get("", 0), end_reasons=ends,
        rss_start_mb=mb(rss[0]) if rss else None, rss_end_mb=mb(rss[-1]) if rss else None,
        rss_peak_mb=mb(max(rss)) if rss else None, work=str(work))


def _print(r: Result, fmt: str) -> None:
    if fmt == "json":
        print(json.dumps(asdict(r), indent=2))
        return
    other = ", ".join(f"{c}: {n}" for c, n in r.unauthorised_answers.items() if c != "403")
    rows = [
        ("calls placed / planned", f"{r.calls_placed} / {r.calls_planned}"),
        ("answered (200 OK)", r.answered),
        ("not answered: final response (0 = none)",
         ", ".join(f"{c}: {n}" for c, n in r.rejected.items()) or "-"),
        ("refused, then redialled (486 / 503)",
         " / ".join(str(n) for n in r.refused_then_redialled.values())),
        ("sipp calls failed (rc != 0)", r.sipp_failed),
        ("answered/placed per behaviour",
         ", ".join(f"{b} {v}" for b, v in r.behaviours.items())),
        ("malformed SIP requests sent", r.malformed_sent),
        (f"unauthorised INVITEs ({UNAUTHORISED_FROM}) sent / answered 403",
         f"{r.unauthorised_sent} / {r.unauthorised_answered_403}"),
        ("unauthorised INVITEs: other answers; unanswered; 403s logged",
         f"{other or '-'}; {r.unauthorised_unanswered}; {r.unauthorised_logged}"),
        ("call records", r.call_records),
        ("turns recorded", r.turns),
        ("unanswered turns", f"{r.unanswered_turns} {r.unanswered_by_reason or ''}"),
        ("worker crashes (worker-died)", r.worker_crashes),
        ("worker starts", r.worker_starts),
        ("open records 5 s after last call", r.open_records_before_stop),
        ("open records after agent stopped", r.open_records_after_stop),
        ("calls without an end reason", r.calls_without_end_reason),
        ("end reasons", ", ".join(f"{k or '(none)'} {v}" for k, v in r.end_reasons.items())),
        ("worker RSS start/end/peak MB", f"{r.rss_start_mb} / {r.rss_end_mb} / "
                                               f"{r.rss_peak_mb}"),
        (f"worker RSS after the first {r.warm_calls} calls MB, growth after",
         f"{r.rss_warm_mb} / {r.rss_growth_after_warm_pct} %"),
        ("reply packet gap p99 (ms)", r.reply_gap_p99_ms),
        ("minutes", r.minutes),
    ]
    print(markdown_header(f"bench soak ({r.minutes} min)") + "\n")
    print(f"Models: {r.models}\n")
    print(markdown_table(("measure", "value"), rows, right=(1,)))
    print(f"\naudio, logs, call log and capture: {r.work}")
