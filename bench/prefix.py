"""``callagent bench prefix``: what holding more facts in the cached prefix costs a turn.

Issue 58 asks where a knowledge file stops fitting the prompt that is primed once per profile.
This measures the latency side of it: the shipped personas' facts (``dialplan/personas/*.md``,
repeated and numbered past their end) cut to each size, the prefix primed as a call's start
primes it, then each question asked as a first turn against that cached prefix. Per size: the
prime's time, the turn's first token and its decode speed, as ratios to the same questions
with no facts (the baseline, measured in the same run). What it does not measure: whether the
model still finds the right fact among many (``bench answers`` does, per persona).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from pathlib import Path

from rich.console import Console

from bench.header import markdown_header, progress_printer
from dialplan import Config
from models.llm.base import LLM, Message
from models.registry import ModelCache
from models.scheduler import Scheduler

USES_CONFIG = True
PERSONAS = Path(__file__).resolve().parents[1] / "dialplan" / "personas"
SIZES = (0, 250, 500, 1000, 1500, 2000)
"""Facts tokens per row; 0 is the baseline."""
QUESTIONS = ("What time do you open on Saturday?", "Do you have parking?",
             "How much does it cost?", "Can I speak to someone?")
PERSONA = "You are the receptionist on the phone. Answer in one short sentence from the facts."


def facts_block(lines: list[str], tokens: int, count) -> str:
    """The facts' lines, repeated (numbered) past their end, up to ``tokens`` by ``count``."""
    block: list[str] = []
    i = 0
    while tokens and count("\n".join(block)) < tokens:
        rounds = i // len(lines)
        block.append(lines[i % len(lines)] + (f" ({rounds})" if rounds else ""))
        i += 1
    return "\n".join(block)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register the ``bench prefix`` options on ``p``."""
    p.add_argument("--profile", default="default", help="whose LLM options are used")
    p.add_argument("--model", default=None, help="another bundled model or .gguf path")
    p.add_argument("--sizes", type=int, nargs="+", default=list(SIZES),
                   help="facts tokens per row (0, the baseline, is always run first)")
    p.add_argument("--n-ctx", type=int, default=4096,
                   help="context per sequence: room for the largest size, the turn and reply")


def measure(llm: LLM, system: str) -> tuple[float, float, float]:
    """The prime's seconds, then the questions' first-token p50 (s) and decode p50 (tok/s)."""
    t = time.monotonic()
    llm.prime(system)
    primed = time.monotonic() - t
    firsts, rates = [], []
    for q in QUESTIONS:
        stream = llm.stream([Message("system", system), Message("user", q)])
        "".join(stream)
        m = stream.metrics
        firsts.append(m.first_token_at - m.started_at)
        if m.tokens > 1:
            rates.append((m.tokens - 1) / (m.ended_at - m.first_token_at))
    return primed, statistics.median(firsts), statistics.median(rates)


def run(args: argparse.Namespace, config: Config) -> int:
    options = dataclasses.replace(config.profiles[args.profile].llm, n_ctx=args.n_ctx,
                                  max_tokens=32, temperature=0.0)
    if args.model:
        options = dataclasses.replace(options, model=args.model)
    progress = progress_printer(Console(stderr=True))
    progress(f"loading {options.backend} {options.model}")
    llm = ModelCache(Scheduler()).llm(options)
    lines = [x for p in sorted(PERSONAS.glob("*.md"))
             for x in p.read_text(encoding="utf-8").splitlines() if x.strip()]
    rows, base = [], None
    for size in [0] + [s for s in args.sizes if s]:
        facts = facts_block(lines, size, llm.count_tokens)
        system = PERSONA + (f"\n\nFacts:\n{facts}" if facts else "")
        primed, first, rate = measure(llm, system)
        base = base or (first, rate)
        rows.append((llm.count_tokens(facts), primed, first, rate))
        progress(f"{rows[-1][0]} facts tokens: prime {primed:.1f} s, first token {first:.2f} s")
    print(markdown_header(f"bench prefix ({llm.model_name}, n_ctx {args.n_ctx})"))
    print("\n| facts tokens | prime s | first token p50 s | decode tok/s | first token / none "
          "| decode / none |\n|---:|---:|---:|---:|---:|---:|")
    for tokens, primed, first, rate in rows:
        print(f"| {tokens} | {primed:.1f} | {first:.2f} | {rate:.1f} | {first / base[0]:.2f}× "
              f"| {rate / base[1]:.2f}× |")
    print(f"\nQuestions: {len(QUESTIONS)} first turns a size, greedy, 32 tokens at most; the "
          "baseline is the same questions with no facts in the prefix.")
    return 0
