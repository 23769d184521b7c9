"""``bench wer`` results as rich tables and JSON: WER with 95 % bootstrap intervals, and cost.

WER is a corpus WER (all errors / all reference words) with a percentile-bootstrap interval
over utterances; differences (a condition against μ-law, beam 5 against beam 1, a context
against none) are paired on the same utterances. Cost is mean compute per utterance and the
real-time factor (compute / audio), both noisy on a shared machine; WER is not.
"""

from __future__ import annotations

import numpy as np
from rich.table import Table

from bench.wer.engine import Results, Run, Settings, Utterance, Variant
from bench.wer.line import CONDITIONS, REFERENCE, parse_conditions
from bench.wer.stats import bootstrap_ci, bootstrap_diff_ci, corpus_wer
from bench.wer.voices import Plan, Voice


def _pct(x: float) -> str:
    return "–" if np.isnan(x) else f"{100 * x + 0.0:.1f}"  # + 0.0: no "-0.0"


def wer_cell(errors, words, seed: int) -> str:
    """``17.6 [14.0–21.5]``: corpus WER % and its 95 % interval."""
    lo, hi = bootstrap_ci(errors, words, seed=seed)
    return f"{_pct(corpus_wer(errors, words))} [{_pct(lo)}–{_pct(hi)}]"


def diff_cell(a: Run, b: Run, seed: int, sign: int = 1) -> str:
    """``+3.1 [+1.0, +5.2]``: sign × (capped WER(a) − capped WER(b)), points, on ``a``'s utts."""
    b = b.restrict(a.utts)
    d = sign * (corpus_wer(a.capped, a.words) - corpus_wer(b.capped, a.words)) + 0.0
    lo, hi = sorted(sign * x + 0.0 for x in bootstrap_diff_ci(a.capped, b.capped, a.words,
                                                              seed=seed))
    return f"{100 * d:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]"


def scores(run: Run, seed: int) -> list[str]:
    """WER, capped WER (each with its interval) and the number of runaway transcripts."""
    return [wer_cell(run.errors, run.words, seed), wer_cell(run.capped, run.words, seed),
            str(run.loops)]


def cost(run: Run) -> tuple[str, str]:
    """Mean ms per utterance and the RTF (compute over audio)."""
    if not len(run.compute_s):
        return "–", "–"
    rtf = float(np.sum(run.compute_s) / max(np.sum(run.audio_s), 1e-9))
    return f"{1000 * float(np.mean(run.compute_s)):.0f}", f"{rtf:.2f}"


def _columns(t: Table, names: tuple[str, ...], left: int = 1) -> None:
    for i, c in enumerate(names):
        t.add_column(c, justify="left" if i < left else "right")


SCORE_COLUMNS = ("WER [95 % CI]", "capped", "loops")


def summary_table(r: Results) -> Table:
    s = r.settings
    first = s.models[0]
    t = Table(title="ASR WER per model on μ-law, all utterances (%, 95 % bootstrap CI; capped: "
                    "an utterance counts at most its words; loops: runaway transcripts)")
    _columns(t, ("model", "n", *SCORE_COLUMNS, f"Δ capped vs {first}",
                 "capped, every condition", "ms/utt", "RTF"))
    for m in s.models:
        ref = r.find(Variant(m))
        if ref is None:
            continue
        main = [x for x in r.runs if x.variant == Variant(m)]
        cap = np.concatenate([x.capped for x in main])
        w = np.concatenate([x.words for x in main])
        other = r.find(Variant(first))
        delta = diff_cell(ref, other, s.seed) if m != first and other else ""
        t.add_row(m, str(len(ref.utts)), *scores(ref, s.seed), delta,
                  f"{wer_cell(cap, w, s.seed)} (n {len(cap)})", *cost(ref))
    return t


def condition_table(r: Results) -> Table:
    s = r.settings
    t = Table(title="WER per line condition (%; Δ capped vs μ-law on the same utterances, "
                    "points, + = worse)")
    _columns(t, ("condition", "n"))
    for m in s.models:
        _columns(t, (f"{m} WER", "capped", "loops", "Δ capped", "ms/utt", "RTF"), left=0)
    for c in s.conditions:
        cells: list[str] = []
        n = ""
        for m in s.models:
            run, ref = r.find(Variant(m), c.name), r.find(Variant(m))
            if run is None:
                cells += ["–"] * 6
                continue
            n = str(len(run.utts))
            delta = diff_cell(run, ref, s.seed) if ref and c.name != REFERENCE else ""
            cells += [*scores(run, s.seed), delta, *cost(run)]
        t.add_row(c.name, n, *cells)
    return t


def condition_legend(r: Results) -> str:
    return "; ".join(f"{c.name}: {CONDITIONS[c.name].description}" for c in r.settings.conditions)


def group_table(r: Results) -> Table:
    s = r.settings
    t = Table(title="WER per voice group on μ-law (%, 95 % CI)")
    _columns(t, ("voice group", "n"))
    for m in s.models:
        _columns(t, (f"{m} WER", "capped", "loops", "ms/utt"), left=0)
    for g in sorted({u.voice.group for u in r.utterances}):
        keep = [u.index for u in r.utterances if u.voice.group == g]
        cells = []
        for m in s.models:
            ref = r.find(Variant(m))
            if ref is None:
                cells += ["–"] * 4
                continue
            sub = ref.restrict(keep)
            cells += [*scores(sub, s.seed), cost(sub)[0]]
        t.add_row(g, str(len(keep)), *cells)
    return t


def decoding_table(r: Results) -> Table | None:
    """Beam widths on the subset (μ-law), each against beam 1 on the same utterances."""
    s = r.settings
    rows = [(m, b) for m in s.models for b in (1, *s.beams) if r.find(Variant(m, beam=b))]
    if not any(b != 1 for _, b in rows):
        return None
    t = Table(title="Beam width, μ-law subset (%; Δ capped vs beam 1, points, + = worse)")
    _columns(t, ("model", "beam", "n", *SCORE_COLUMNS, "Δ capped", "ms/utt", "RTF"))
    for m, b in rows:
        one = r.find(Variant(m)).restrict(r.subset)
        run = r.find(Variant(m, beam=b)).restrict(r.subset)
        t.add_row(m, str(b), str(len(run.utts)), *scores(run, s.seed),
                  diff_cell(run, one, s.seed) if b != 1 else "", *cost(run))
    return t


def context_table(r: Results) -> Table | None:
    """``initial_prompt`` and ``hotwords`` against none, on the subset (μ-law)."""
    s = r.settings
    rows = [(m, c) for m in s.models for c in s.contexts if r.find(Variant(m, context=c))]
    if not rows:
        return None
    t = Table(title="Context, μ-law subset (%; gain = capped WER without − with, points, "
                    "+ = better)")
    _columns(t, ("model", "context", "n", *SCORE_COLUMNS, "gain", "ms/utt", "RTF"), left=2)
    for m in s.models:
        none = r.find(Variant(m)).restrict(r.subset)
        t.add_row(m, "none", str(len(none.utts)), *scores(none, s.seed), "", *cost(none))
        for c in s.contexts:
            run = r.find(Variant(m, context=c))
            if run is not None:
                t.add_row(m, c, str(len(run.utts)), *scores(run, s.seed),
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
        "subset": s.subset,
        "beams": list(s.beams),
        "contexts": {"domain": s.domain, "greeting": s.greeting, "hotwords": list(s.hotwords)},
        "context_runs": list(s.contexts),
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


def from_json(data: dict) -> Results:
    """Results read back from :func:`as_json`, to print the tables again without re-running.

    Raises:
        ValueError: the file is not a ``bench wer --json`` output.
    """
    try:
        runs = [
            Run(Variant(x["model"], x["beam"], x["context"]), x["condition"],
                [u["index"] for u in x["utterances"]],
                np.array([u["errors"] for u in x["utterances"]], dtype=np.int64),
                np.array([u["words"] for u in x["utterances"]], dtype=np.int64),
                np.array([u["compute_s"] for u in x["utterances"]], dtype=np.float64),
                np.array([u["audio_s"] for u in x["utterances"]], dtype=np.float64),
                [u["heard"] for u in x["utterances"]])
            for x in data["runs"]
        ]
        utts = [Utterance(u["index"], u["text"], Voice(u["voice"], u["group"], "espeak"),
                          np.zeros(0, np.float32), 0, u["subset"]) for u in data["utterances"]]
        ctx = data["contexts"]
        settings = Settings(
            models=tuple(data["models"]),
            conditions=tuple(parse_conditions(data["conditions"])),
            plan=Plan((), tuple(data["skipped_voices"])),
            subset=data.get("subset", sum(u.in_subset for u in utts)),
            beams=tuple(data.get("beams", sorted({r.variant.beam for r in runs} - {1}))),
            contexts=tuple(data.get("context_runs", sorted({r.variant.context for r in runs}
                                                           - {"none"}))),
            domain=ctx["domain"], greeting=ctx["greeting"], hotwords=tuple(ctx["hotwords"]),
            seed=data["seed"],
        )
    except (KeyError, TypeError) as e:
        raise ValueError(f"not a bench wer --json file (missing {e})") from e
    return Results(settings, utts, runs)
