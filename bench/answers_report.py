"""The markdown ``bench answers`` prints: per persona, split and rung, how often replies were right.

Proportions carry Wilson 95 % intervals (small samples, rates near 0 or 1); WER a bootstrap
interval over utterances (:mod:`bench.wer.stats`). The tuned split's wrong turns are
listed (what was heard, what was replied) for engineers to read; the held-out split's only
counted, unless ``show_heldout``: read while tuning, its failures would be tuned on too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from bench.conversations import ACTION, FACT, FRESH, HELDOUT, HIDDEN, UNKNOWN
from bench.header import markdown_header, markdown_table
from bench.wer.stats import bootstrap_ci, corpus_wer

Z95 = 1.96
SPLIT_NAMES = {"tuned": "tuned", HELDOUT: "held-out", FRESH: "held-out 2"}


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


def _right(turns) -> str:
    return share(sum(t.right for t in turns), len(turns))


def _timed(turns) -> list[float]:
    """Answer times of the spoken turns, or of the typed ones when nothing was spoken.

    Typed turns skip the ASR and would look fast; a turn that asked to repeat is no answer.
    """
    spoken = [t for t in turns if not t.voice.startswith("text:")] or turns
    return [t.answer_s for t in spoken if t.answer_s is not None and not t.repeat]


def _p(values: Sequence[float], q: float) -> str:
    return f"{np.percentile(values, q):.2f} s" if values else "-"


def _wer(turns) -> str:
    turns = [t for t in turns if not t.voice.startswith("text:")]
    if not turns:
        return "-"
    errors = np.array([t.wer * t.words for t in turns])
    words = np.array([t.words for t in turns])
    lo, hi = bootstrap_ci(errors, words)
    return f"{100 * corpus_wer(errors, words):.1f} % [{100 * lo:.1f}–{100 * hi:.1f}]"


def _cells(turns) -> list[str]:
    """A row's figures: the shares right by kind of turn, the faults, the answer time."""
    answer = _timed(turns)
    return [
        _right([t for t in turns if t.kind == FACT]),
        _right([t for t in turns if t.kind == UNKNOWN]),
        _right([t for t in turns if t.kind == ACTION]),
        _right([t for t in turns if t.follow_up]),
        _right([t for t in turns if t.index == 0]),
        str(sum(bool(t.invented) for t in turns)), str(sum(bool(t.claim) for t in turns)),
        str(sum(bool(t.spliced) for t in turns)), str(sum(bool(t.leaked) for t in turns)),
        _p(answer, 50), _p(answer, 90),
    ]


HEAD = ["persona", "split", "models", "facts right", "unknowns: says so", "actions right",
        "follow-ups right", "first turns right", "invented numbers", "invented actions",
        "spliced", "leaked", "answer p50", "answer p90"]


def summary_table(runs) -> str:
    """One row per persona, split and rung, then a total row per split and rung."""
    rows = [[r.persona, SPLIT_NAMES[r.split], f"{r.rung}: {r.llm}", *_cells(r.turns)]
            for r in runs]
    for split in dict.fromkeys(r.split for r in runs):
        for rung in dict.fromkeys(r.rung for r in runs):
            mine = [r for r in runs if r.split == split and r.rung == rung]
            if mine:
                rows.append([f"**all {len({r.persona for r in mine})}**", SPLIT_NAMES[split],
                             rung, *_cells([t for r in mine for t in r.turns])])
    return markdown_table(HEAD, rows, right=range(3, len(HEAD)))


def voice_table(runs, groups: Sequence[str]) -> str:
    """Per split, rung and voice group, all personas: shares right, repeats and WER."""
    rows = []
    for split in dict.fromkeys(r.split for r in runs):
        for rung in dict.fromkeys(r.rung for r in runs):
            turns = [t for r in runs if r.split == split and r.rung == rung for t in r.turns]
            for g in groups:
                mine = [t for t in turns if t.group == g]
                if mine:
                    rows.append([SPLIT_NAMES[split], rung, g,
                                 _right([t for t in mine if t.kind == FACT]),
                                 _right([t for t in mine if t.kind == UNKNOWN]),
                                 _right([t for t in mine if t.kind == ACTION]),
                                 share(sum(t.repeat for t in mine), len(mine)), _wer(mine)])
    return markdown_table(["split", "models", "callers", "facts right", "unknowns: says so",
                           "actions right", "say again", "WER of the callers"],
                          rows, right=range(3, 8))


def _line(t) -> str:
    """A turn as one markdown line: where it was, what was heard and replied, what was wrong."""
    faults = [f"invented {', '.join(t.invented)}" if t.invented else "",
              f"claims \"{t.claim}\"" if t.claim else "",
              "spliced" if t.spliced else "", f"leaked \"{t.leaked}\"" if t.leaked else "",
              f"not said: \"{t.objected}\"" if t.objected else ""]
    return (f"- {t.call} turn {t.index + 1} · {t.kind} (expected {t.expected}) · {t.voice} · "
            f"heard \"{t.heard.strip()}\" → \"{' '.join(t.reply.split())}\""
            f"{' [' + t.action + ']' if t.action != 'none' else ''}"
            + "".join(f"; {f}" for f in faults if f))


def details(runs, show_heldout: bool = False) -> list[str]:
    """The wrong turns and those with a fault, listed per run.

    Held-out ones are only counted, unless ``show_heldout``.
    """
    parts = []
    for r in runs:
        wrong = [t for t in r.turns if not t.right]
        faulty = [t for t in r.turns if t.right and (t.spliced or t.leaked)]
        title = f"{r.persona}, {SPLIT_NAMES[r.split]}, {r.rung}"
        if r.split in HIDDEN and not show_heldout:
            parts.append(f"**{title}**: {len(wrong)} of {len(r.turns)} turns wrong, "
                         f"{len(faulty)} right with a fault (texts hidden: --show-heldout)")
            continue
        if wrong:
            parts += [f"**Wrong: {title}** ({len(wrong)})", "\n".join(map(_line, wrong))]
        if faulty:
            parts += [f"**Right, with a spliced phrase or leaked prompt: {title}** "
                      f"({len(faulty)})", "\n".join(map(_line, faulty))]
    return parts


def report(runs, personas, groups: Sequence[str], show_heldout: bool = False) -> str:
    """The markdown under the date/CPU header."""
    told = []
    for p in personas:
        own = p.profiles[0]
        sizes = ", ".join(
            f"{SPLIT_NAMES[s]} {len(c.calls)} calls / {sum(len(k.turns) for k in c.calls)} turns"
            for s, c in p.splits.items())
        told.append(f"{p.name} (profile {own.name}, {len(own.facts)} facts; {sizes})")
    parts = [
        markdown_header("bench answers"),
        f"**Calls of {len(personas)} persona{'s' if len(personas) != 1 else ''}**: "
        f"{'; '.join(told)}. Each call made once by a voice of every group "
        f"({', '.join(groups)}), the same voice for all its turns, through "
        f"the 8 kHz μ-law line and heard by the profile's ASR (typed: the words as written); "
        f"its turns answered in order on one history, as a call's.",
        "Facts right: the reply holds the fact, invents no number and takes no action but a "
        "transfer. Unknowns: says it does not know or hands the caller on, inventing no number. "
        "Actions right: the call does what was asked (the transfer's target included). Any of "
        "them is wrong when the reply claims an action the call did not take. Follow-ups: the "
        "turns that need the call's earlier ones; first turns: each call's first. Invented "
        "numbers: replies stating a number neither the persona, its greeting, its facts nor the "
        "caller gave; invented actions: replies claiming an action not taken; spliced: a "
        "dont_know, apology or repeat phrase after other words of the same reply; leaked: "
        "5 or more words in a row of the prompt's instructions that no fact, greeting, fixed "
        "phrase or directory entry holds. Answer: end of the caller's audio to the reply's "
        "first audio (ASR + LLM + first clause's TTS; endpointing left out), spoken turns only "
        "unless only typed ones ran. Intervals: 95 %.",
        summary_table(runs),
        "**By caller voice** (all personas)",
        voice_table(runs, groups),
        *details(runs, show_heldout),
    ]
    return "\n\n".join(parts)
