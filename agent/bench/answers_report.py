"""The tables ``bench answers`` prints: accuracy, invented facts, WER, repeats and answer time.

Proportions carry Wilson 95 % intervals (small samples, rates near 0 or 1); WER a bootstrap
interval over utterances (:mod:`agent.bench.wer.stats`). The first model is the baseline of
the answer-time ratio, measured in the same run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from agent.bench.answers_questions import FACT, UNKNOWN
from agent.bench.header import markdown_header
from agent.bench.wer.stats import bootstrap_ci, corpus_wer
from dialplan.profile import Profile

Z95 = 1.96


def wilson(k: int, n: int) -> tuple[float, float]:
    """Wilson score interval of ``k`` successes in ``n`` (95 %)."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    d = 1 + Z95 ** 2 / n
    centre = (p + Z95 ** 2 / (2 * n)) / d
    half = Z95 * math.sqrt(p * (1 - p) / n + Z95 ** 2 / (4 * n * n)) / d
    return max(0.0, centre - half), min(1.0, centre + half)


def share(k: int, n: int) -> str:
    """``k/n (p % [lo–hi])``."""
    if n == 0:
        return "-"
    lo, hi = wilson(k, n)
    return f"{k}/{n} ({100 * k / n:.0f} % [{100 * lo:.0f}–{100 * hi:.0f}])"


def _p(values: Sequence[float], q: float) -> str:
    v = [x for x in values if x is not None]
    return f"{np.percentile(v, q):.2f} s" if v else "-"


def _wer(turns) -> str:
    if not turns:
        return "-"
    errors = np.array([t.wer * t.words for t in turns])
    words = np.array([t.words for t in turns])
    lo, hi = bootstrap_ci(errors, words)
    return f"{100 * corpus_wer(errors, words):.1f} % [{100 * lo:.1f}–{100 * hi:.1f}]"


def _row(label: str, turns, base_p50: float | None) -> str:
    facts = [t for t in turns if t.kind == FACT]
    unknown = [t for t in turns if t.kind == UNKNOWN]
    answer = [t.answer_s for t in turns if t.answer_s is not None and not t.repeat]
    p50 = float(np.percentile(answer, 50)) if answer else None
    ratio = f" (×{p50 / base_p50:.2f})" if p50 and base_p50 else ""
    return (f"| {label} | {share(sum(t.right for t in facts), len(facts))} | "
            f"{share(sum(t.right for t in unknown), len(unknown))} | "
            f"{sum(bool(t.invented) for t in turns)} | "
            f"{share(sum(t.repeat for t in turns), len(turns))} | {_wer(turns)} | "
            f"{_p(answer, 50)}{ratio} | {_p(answer, 90)} |")


def _spoken(turns):
    """The turns a voice said (not the typed group's)."""
    return [t for t in turns if not t.voice.startswith("text:")]


HEAD = ("| | facts right | unknown: says so | invented | say again | WER of the callers | "
        "answer p50 | answer p90 |\n|---|---|---|---|---|---|---|---|")


def report(runs, profile: Profile, groups: Sequence[str]) -> str:
    """The markdown under the date/CPU header."""
    # The spoken turns only: typed ones skip the ASR and would make every ratio look slow.
    base = [t.answer_s for t in _spoken(runs[0].turns) if t.answer_s is not None and not t.repeat]
    base_p50 = float(np.percentile(base, 50)) if base else None
    n_q = len({t.question for t in runs[0].turns})
    parts = [
        markdown_header("bench answers"),
        f"**{n_q} spoken questions** ({sum(1 for q in {(t.question, t.kind) for t in runs[0].turns} if q[1] == FACT)} "
        f"whose answer the persona or its knowledge file holds, the rest answered by neither), "
        f"each said once by a voice of every group ({', '.join(groups)}) through the 8 kHz "
        f"μ-law line, heard by the profile's ASR and answered as a call's first turn; profile "
        f"{profile.name} ({len(profile.facts)} facts, voice {profile.tts.backend} "
        f"{profile.tts.voice}).",
        "Facts right: the reply states the fact, and no number it was not given. Unknown: says "
        "it does not know or hands the caller on (transfer, message), inventing nothing. "
        "Invented: replies stating a number, price or time that neither the persona, its facts "
        "nor the question hold. Say again: the ASR was unsure and the agent asked. Answer: from "
        "the end of the caller's audio to the reply's first audio (ASR + LLM + first clause's "
        "TTS; endpointing left out); ratios against the first row, same run. Intervals: 95 %.",
        "**By model** (spoken questions: every voice group but typed)",
        "\n".join([HEAD, *(_row(f"{r.name}: {r.llm}, {r.asr}", _spoken(r.turns), base_p50)
                           for r in runs)]),
    ]
    for r in runs:
        parts += [f"**By caller voice: {r.name}**", "\n".join([HEAD, *(
            _row(g, [t for t in r.turns if t.group == g], base_p50) for g in groups)])]
    for r in runs:
        wrong = [t for t in r.turns if not t.right]
        if wrong:
            parts += [f"**Wrong: {r.name}** ({len(wrong)})", "\n".join(
                f"- {t.kind} · {t.voice} · heard \"{t.heard.strip()}\" → \"{' '.join(t.reply.split())}\""
                f"{' [' + t.action + ']' if t.action != 'none' else ''}"
                f"{' invented ' + ', '.join(t.invented) if t.invented else ''}" for t in wrong)]
    return "\n\n".join(parts)
