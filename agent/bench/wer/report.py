"""``bench wer`` results as rich tables and JSON: WER with 95 % bootstrap intervals, and cost.

WER is a corpus WER (all errors / all reference words) with a percentile-bootstrap interval
over utterances; differences (a condition against μ-law, beam 5 against beam 1, a context
against none) are paired on the same utterances. Cost is mean compute per utterance and the
real-time factor (compute / audio), both noisy on a shared machine; WER is not.
"""

from __future__ import annotations

import numpy as np
from rich.table import Table

from agent.bench.wer.engine import Results, Run, Variant
from agent.bench.wer.line import CONDITIONS, REFERENCE
from agent.bench.wer.stats import bootstrap_ci, bootstrap_diff_ci, corpus_wer


def _pct(x: float) -> str:
    return "–" if np.isnan(x) else f"{100 * x + 0.0:.1f}"  # + 0.0: no "-0.0"


def wer_cell(errors, words, seed: int) -> str:
    """``17.6 [14.0–21.5]``: corpus WER % and its 95 % interval."""
    lo, hi = bootstrap_ci(errors, words, seed=seed)
    return f"{_pct(corpus_wer(errors, words))} [{_pct(lo)}–{_pct(hi)}]"


def diff_cell(a: Run, b: Run, seed: int, sign: int = 1) -> str:
    """``+3.1 [+1.0, +5.2]``: sign × (WER(a) − WER(b)) in points, paired over ``a``'s utts."""
    b = b.restrict(a.utts)
    d = sign * (corpus_wer(a.errors, a.words) - corpus_wer(b.errors, a.words)) + 0.0
    lo, hi = sorted(sign * x + 0.0 for x in bootstrap_diff_ci(a.errors, b.errors, a.words,
                                                              seed=seed))
    return f"{100 * d:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]"


def cost(run: Run) -> tuple[str, str]:
    """Mean ms per utterance and the RTF (compute over audio)."""
    if not len(run.compute_s):
        return "–", "–"
    rtf = float(np.sum(run.compute_s) / max(np.sum(run.audio_s), 1e-9))
    return f"{1000 * float(np.mean(run.compute_s)):.0f}", f"{rtf:.2f}"


def summary_table(r: Results) -> Table:
    s = r.settings
    t = Table(title="ASR WER per model (%, 95 % bootstrap CI over utterances)")
    for c in ("model", "μ-law, all utterances", "n", "every condition pooled", "n",
              "ms/utt", "RTF"):
        t.add_column(c, justify="left" if c == "model" else "right")
    for m in s.models:
        ref = r.find(Variant(m))
        main = [x for x in r.runs if x.variant == Variant(m)]
        e = np.concatenate([x.errors for x in main])
        w = np.concatenate([x.words for x in main])
        cells = [wer_cell(ref.errors, ref.words, s.seed), str(len(ref.utts))] if ref else ["–", ""]
        t.add_row(m, *cells, wer_cell(e, w, s.seed), str(len(e)), *cost(ref or main[0]))
    return t


def condition_table(r: Results) -> Table:
    s = r.settings
    t = Table(title="WER per line condition (%; Δ vs μ-law on the same utterances, points)")
    t.add_column("condition")
    t.add_column("n", justify="right")
    for m in s.models:
        for c in ("WER [95 % CI]", "Δ vs μ-law", "ms/utt", "RTF"):
            t.add_column(f"{m} {c}" if c.startswith("WER") else c, justify="right")
    for c in s.conditions:
        cells: list[str] = []
        n = ""
        for m in s.models:
            run, ref = r.find(Variant(m), c.name), r.find(Variant(m))
            if run is None:
                cells += ["–"] * 4
                continue
            n = str(len(run.utts))
            delta = diff_cell(run, ref, s.seed) if ref and c.name != REFERENCE else ""
            cells += [wer_cell(run.errors, run.words, s.seed), delta, *cost(run)]
        t.add_row(f"{c.name}: {CONDITIONS[c.name].description}", n, *cells)
    return t


def group_table(r: Results) -> Table:
    s = r.settings
    t = Table(title="WER per voice group on μ-law (%, 95 % CI)")
    t.add_column("voice group")
    t.add_column("n", justify="right")
    for m in s.models:
        t.add_column(f"{m} WER", justify="right")
        t.add_column("ms/utt", justify="right")
    groups = sorted({u.voice.group for u in r.utterances})
    for g in groups:
        keep = [u.index for u in r.utterances if u.voice.group == g]
        cells = []
        for m in s.models:
            ref = r.find(Variant(m))
            if ref is None:
                cells += ["–", "–"]
                continue
            sub = ref.restrict(keep)
            cells += [wer_cell(sub.errors, sub.words, s.seed), cost(sub)[0]]
        t.add_row(g, str(len(keep)), *cells)
    return t


def decoding_table(r: Results) -> Table | None:
    """Beam widths on the subset (μ-law), each against beam 1 on the same utterances."""
    s = r.settings
    rows = [(m, b) for m in s.models for b in (1, *s.beams) if r.find(Variant(m, beam=b))]
    if not any(b != 1 for _, b in rows):
        return None
    t = Table(title="Beam width, μ-law subset (%; Δ vs beam 1, points, + = worse)")
    for c in ("model", "beam", "n", "WER [95 % CI]", "Δ vs beam 1", "ms/utt", "RTF"):
        t.add_column(c, justify="left" if c == "model" else "right")
    for m, b in rows:
        one = r.find(Variant(m)).restrict(r.subset)
        run = r.find(Variant(m, beam=b)).restrict(r.subset)
        t.add_row(m, str(b), str(len(run.utts)), wer_cell(run.errors, run.words, s.seed),
                  diff_cell(run, one, s.seed) if b != 1 else "", *cost(run))
    return t


def context_table(r: Results) -> Table | None:
    """``initial_prompt`` and ``hotwords`` against none, on the subset (μ-law)."""
    s = r.settings
    rows = [(m, c) for m in s.models for c in s.contexts if r.find(Variant(m, context=c))]
    if not rows:
        return None
    t = Table(title="Context, μ-law subset (%; gain = WER without − WER with, points)")
    for c in ("model", "context", "n", "WER [95 % CI]", "gain [95 % CI]", "ms/utt", "RTF"):
        t.add_column(c, justify="left" if c in ("model", "context") else "right")
    for m in s.models:
        none = r.find(Variant(m)).restrict(r.subset)
        t.add_row(m, "none", str(len(none.utts)), wer_cell(none.errors, none.words, s.seed), "",
                  *cost(none))
        for c in s.contexts:
            run = r.find(Variant(m, context=c))
            if run is None:
                continue
            t.add_row(m, c, str(len(run.utts)), wer_cell(run.errors, run.words, s.seed),
                      diff_cell(run, none, s.seed, sign=-1), *cost(run))
    return t


def worst(r: Results, model: str, n: int) -> Table:
    """The ``n`` utterances ``model`` got most wrong on μ-law: what was said, what was heard."""
    ref = r.find(Variant(model))
    t = Table(title=f"{model}: the {n} worst utterances on μ-law")
    for c in ("voice", "errors", "said", "heard"):
        t.add_column(c)
    order = np.argsort(-(ref.errors / np.maximum(ref.words, 1)), kind="stable")[:n]
    for i in order:
        u = r.utterances[ref.utts[i]]
        t.add_row(u.voice.name, f"{ref.errors[i]}/{ref.words[i]}", u.text, ref.hyps[i])
    return t


def as_json(r: Results) -> dict:
    """Every transcription with its scores, and the settings, for later analysis."""
    s = r.settings
    return {
        "models": list(s.models),
        "conditions": [c.name for c in s.conditions],
        "seed": s.seed,
        "contexts": {"domain": s.domain, "greeting": s.greeting, "hotwords": list(s.hotwords)},
        "skipped_voices": list(s.plan.skipped),
        "utterances": [{"index": u.index, "text": u.text, "voice": u.voice.name,
                        "group": u.voice.group, "subset": u.in_subset} for u in r.utterances],
        "runs": [
            {
                "model": x.variant.model, "beam": x.variant.beam, "context": x.variant.context,
                "condition": x.condition, "wer": corpus_wer(x.errors, x.words),
                "ci95": bootstrap_ci(x.errors, x.words, seed=s.seed),
                "utterances": [
                    {"index": u, "heard": h, "errors": int(e), "words": int(w),
                     "compute_s": round(float(c), 4), "audio_s": round(float(a), 3)}
                    for u, h, e, w, c, a in zip(x.utts, x.hyps, x.errors, x.words, x.compute_s,
                                                x.audio_s, strict=True)
                ],
            }
            for x in r.runs
        ],
    }
