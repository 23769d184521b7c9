"""The HTML latency report: one self-contained page with inline SVG charts drawn in Python.

Owns presentation only; the numbers come from :mod:`db.reports` in seconds and are shown
in ms here. No scripts, fonts, styles or
images are fetched: the page must open from a file on an offline machine (and a call transcript
can never inject markup: every text goes through :func:`html.escape`). Charts: voice-to-voice
histogram per ASR backend (answered turns; the unanswered ones are counted beside it and in a
table with their reasons), stacked stage breakdown per turn, RTF over time, one call's timeline;
tables of the tool calls per outcome and of the charted call's tool calls and messages.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from db.reports import CallTimeline, Report, TurnRow
from db.stages import METRICS, STAGES
from db.stats import percentile

COLORS = dict(zip(STAGES, ("#8da0cb", "#fc8d62", "#66c2a5", "#e78ac3", "#a6d854", "#ffd92f"),
                  strict=True))
SERIES = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf")
W = 1100  # chart width in px; the page is laid out for 1200 px
PAD_L, PAD_R, PAD_T, PAD_B = 64, 16, 28, 36
MAX_TURN_BARS = 80  # more bars than this are unreadable; the newest turns are shown


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _ms(seconds: float | None) -> float:
    """Seconds (a record's unit) as ms (what the page shows); a missing value as 0."""
    return (seconds or 0.0) * 1000.0


def _num(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".")


def _nice_max(v: float) -> float:
    """Round an axis maximum up to 1, 2 or 5 x 10^k, so tick labels are round numbers."""
    if v <= 0:
        return 1.0
    mag = 10 ** math.floor(math.log10(v))
    return next(m * mag for m in (1, 2, 5, 10) if m * mag >= v)


def _svg(title: str, height: int, body: list[str]) -> str:
    return (f'<figure><figcaption>{_e(title)}</figcaption><svg xmlns="http://www.w3.org/2000/svg" '
            f'width="{W}" height="{height}" viewBox="0 0 {W} {height}" role="img" '
            f'aria-label="{_e(title)}">{"".join(body)}</svg></figure>')


def _no_data(title: str) -> str:
    msg = f'<text x="{PAD_L}" y="35" class="muted">no data in this window</text>'
    return _svg(title, 60, [msg])


def _y_axis(y0: float, y1: float, top: float, vmax: float, unit: str) -> list[str]:
    """Horizontal grid lines and labels from 0 to ``vmax`` between pixel rows y0 (0) and y1."""
    out = []
    for i in range(5):
        v = vmax * i / 4
        y = y0 - (y0 - y1) * i / 4
        out.append(f'<line x1="{PAD_L}" x2="{W - PAD_R}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
                   f'<text x="{PAD_L - 6}" y="{y + 4:.1f}" text-anchor="end">{_num(v)}</text>')
    out.append(f'<text x="8" y="{top - 10}" class="muted">{_e(unit)}</text>')
    return out


def _rect(x: float, y: float, w: float, h: float, fill: str, tip: str) -> str:
    return (f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(w, 0.5):.1f}" height="{max(h, 0):.1f}" '
            f'fill="{fill}"><title>{_e(tip)}</title></rect>')


def _legend(items: Sequence[tuple[str, str]], y: float) -> list[str]:
    out, x = [], PAD_L
    for label, color in items:
        out.append(f'<rect x="{x}" y="{y - 9}" width="10" height="10" fill="{color}"/>'
                   f'<text x="{x + 14}" y="{y}">{_e(label)}</text>')
        x += 24 + 7 * len(label)
    return out


def _pct(rate: float | None) -> str:
    return "-" if rate is None else f"{rate:.1%}"


def v2v_histograms(turns: Sequence[TurnRow]) -> str:
    """Voice-to-voice histogram per ASR backend of its answered turns, p50/p95 marked.

    Each backend's label says how many of its turns went unanswered (left out of the histogram).
    """
    title = "Voice-to-voice distribution per ASR backend (ms, answered turns)"
    by: dict[str, list[float]] = {}
    tally: dict[str, list[int]] = {}  # backend -> [turns, unanswered]
    for t in turns:
        backend = t.asr_backend or "(none)"
        n = tally.setdefault(backend, [0, 0])
        n[0] += 1
        n[1] += not t.answered
        if t.answered and t.voice_to_voice_s is not None:
            by.setdefault(backend, []).append(_ms(t.voice_to_voice_s))
    if not by:
        return _no_data(title)
    bins, row_h = 30, 110
    xmax = _nice_max(max(max(v) for v in by.values()))
    plot_w = W - PAD_L - PAD_R
    body: list[str] = []
    for row, (backend, values) in enumerate(sorted(by.items())):
        top = PAD_T + row * (row_h + 24)
        base = top + row_h
        counts = [0] * bins
        for v in values:
            counts[min(bins - 1, int(v / xmax * bins))] += 1
        cmax = max(counts)
        color = SERIES[row % len(SERIES)]
        total, unanswered = tally[backend]
        body.append(f'<text x="{PAD_L}" y="{top - 6}" class="label">{_e(backend)} '
                    f'(n={len(values)}; unanswered {unanswered} of {total} turns, '
                    f'{_pct(unanswered / total)})</text>')
        body.append(f'<line x1="{PAD_L}" x2="{W - PAD_R}" y1="{base}" y2="{base}" class="axis"/>')
        for i, c in enumerate(counts):
            if c:
                h = c / cmax * (row_h - 8)
                lo, hi = xmax * i / bins, xmax * (i + 1) / bins
                body.append(_rect(PAD_L + plot_w * i / bins + 1, base - h, plot_w / bins - 2, h,
                                  color, f"{backend}: {c} turns in {lo:.0f}-{hi:.0f} ms"))
        for p, dash in ((50, ""), (95, ' stroke-dasharray="4 3"')):
            v = percentile(values, p)
            x = PAD_L + plot_w * v / xmax
            body.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{base}" class="mark"'
                        f'{dash}/><text x="{x + 3:.1f}" y="{top + 10}" class="muted">'
                        f'p{p} {v:.0f}</text>')
    height = PAD_T + len(by) * (row_h + 24) + 10
    for i in range(6):
        x = PAD_L + plot_w * i / 5
        body.append(f'<text x="{x:.1f}" y="{height - 4}" text-anchor="middle">'
                    f'{_num(xmax * i / 5)}</text>')
    return _svg(title, height + 6, body)


def stage_bars(turns: Sequence[TurnRow]) -> str:
    """Stacked bars: each turn's voice-to-voice split into its stages (newest turns)."""
    title = "Stage breakdown per turn (ms, stacked; newest turns)"
    rows = [t for t in turns if any(t.stages[s] is not None for s in STAGES)]
    rows = rows[-MAX_TURN_BARS:]  # load_turns orders by call start, then turn
    if not rows:
        return _no_data(title)
    h, top = 320, PAD_T + 10
    base = top + h
    vmax = _nice_max(max(sum(_ms(t.stages[s]) for s in STAGES) for t in rows))
    slot = (W - PAD_L - PAD_R) / len(rows)
    body = _y_axis(base, top, top, vmax, "ms")
    for i, t in enumerate(rows):
        y = base
        for s in STAGES:
            v = _ms(t.stages[s])
            if not v:
                continue
            bh = v / vmax * h
            y -= bh
            heard = f" (not heard: {t.unanswered})" if t.unanswered else ""
            body.append(_rect(PAD_L + i * slot + slot * 0.1, y, slot * 0.8, bh, COLORS[s],
                              f"{t.call_id} turn {t.index}: {s} {v:.0f} ms{heard}"))
    body.append(f'<line x1="{PAD_L}" x2="{W - PAD_R}" y1="{base}" y2="{base}" class="axis"/>')
    body += _legend([(s, COLORS[s]) for s in STAGES], base + 26)
    return _svg(title, base + 36, body)


def rtf_over_time(turns: Sequence[TurnRow]) -> str:
    """ASR (solid) and TTS (dashed) real-time factor of each turn over wall-clock time."""
    title = "Real-time factor over time (processing s / audio s; below 1 = faster than real time)"
    pts: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for t in turns:
        if t.recorded_at is None:
            continue
        for kind, v in (("asr", t.asr_rtf), ("tts", t.tts_rtf)):
            if v is not None:
                pts.setdefault((t.asr_backend or "(none)", kind), []).append(
                    (t.recorded_at.timestamp(), v))
    if not pts:
        return _no_data(title)
    h, top = 260, PAD_T + 10
    base = top + h
    xs = [x for series in pts.values() for x, _ in series]
    x0, x1 = min(xs), max(xs)
    span = (x1 - x0) or 1.0
    vmax = _nice_max(max(max(v for _, v in s) for s in pts.values()) * 1.05)
    plot_w = W - PAD_L - PAD_R
    body = _y_axis(base, top, top, vmax, "RTF")
    backends = sorted({b for b, _ in pts})
    for (backend, kind), series in sorted(pts.items()):
        color = SERIES[backends.index(backend) % len(SERIES)]
        series.sort()
        coords = [(PAD_L + plot_w * (x - x0) / span, base - v / vmax * h) for x, v in series]
        d = "M" + " L".join(f"{x:.1f},{y:.1f}" for x, y in coords)
        dash = ' stroke-dasharray="5 4"' if kind == "tts" else ""
        body.append(f'<path d="{d}" fill="none" stroke="{color}" stroke-width="1.5"{dash}/>')
        for (x, y), (_, v) in zip(coords, series, strict=True):
            body.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="{color}">'
                        f'<title>{_e(backend)} {kind} rtf {v:.3f}</title></circle>')
    for x, anchor in ((x0, "start"), (x1, "end")):
        label = datetime.fromtimestamp(x, UTC).strftime("%Y-%m-%d %H:%M UTC")
        px = PAD_L + plot_w * (x - x0) / span
        body.append(f'<text x="{px:.1f}" y="{base + 16}" text-anchor="{anchor}">{label}</text>')
    legend = [(f"{b} asr", SERIES[i % len(SERIES)]) for i, b in enumerate(backends)]
    body += _legend(legend + [("tts: dashed", "#999")], base + 34)
    return _svg(title, base + 44, body)


def call_timeline_chart(tl: CallTimeline | None) -> str:
    """One call on its own clock: caller speech, each turn's stages, the reply audio."""
    title = "Call timeline" + (f": {tl.call.id}" if tl else "")
    turns = [t for t in (tl.turns if tl else []) if t.speech_end_s is not None]
    if not turns:
        return _no_data(title)
    ends = []
    for t in turns:
        # An unanswered turn ends with its last measured stage: no reply, whatever got stamped.
        reply = (t.voice_to_voice_s or 0.0) + (t.audio_out_s or 0.0) if t.answered else 0.0
        ends.append(t.speech_end_s + max(reply, sum(t.stages[s] or 0.0 for s in STAGES)))
    tmax = _nice_max(max(ends) * 1.02)
    plot_w = W - PAD_L - PAD_R
    lanes = ("caller", "agent", "reply")
    lane_y = {name: PAD_T + 10 + i * 34 for i, name in enumerate(lanes)}
    body = [f'<text x="{PAD_L - 8}" y="{y + 17}" text-anchor="end">{n}</text>'
            for n, y in lane_y.items()]

    def px(sec: float) -> float:
        return PAD_L + plot_w * sec / tmax

    for t in turns:
        start = t.speech_start_s if t.speech_start_s is not None else t.speech_end_s
        body.append(_rect(px(start), lane_y["caller"], px(t.speech_end_s) - px(start), 24,
                          "#7f7f7f", f"turn {t.index}: caller speech {t.transcript}"))
        at = t.speech_end_s
        for s in STAGES:
            v = t.stages[s]
            if v is None:
                continue
            body.append(_rect(px(at), lane_y["agent"], px(at + v) - px(at), 24,
                              COLORS[s], f"turn {t.index}: {s} {_ms(v):.0f} ms"))
            at += v
        if not t.answered:
            body.append(f'<text x="{px(at) + 2:.1f}" y="{lane_y["reply"] + 16}" '
                        f'class="muted">turn {t.index}: no reply ({_e(t.unanswered)})</text>')
        elif t.voice_to_voice_s is not None and t.audio_out_s:
            body.append(_rect(px(at), lane_y["reply"], px(at + t.audio_out_s) - px(at), 24,
                              "#1f77b4", f"turn {t.index}: reply {t.reply_text}"))
    base = lane_y["reply"] + 34
    for i in range(11):
        x = PAD_L + plot_w * i / 10
        body.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{PAD_T}" y2="{base}" class="grid"/>'
                    f'<text x="{x:.1f}" y="{base + 14}" text-anchor="middle">'
                    f'{_num(tmax * i / 10)} s</text>')
    body += _legend([(s, COLORS[s]) for s in STAGES], base + 36)
    return _svg(title, base + 46, body)


def _table(head: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    th = "".join(f"<th>{_e(h)}</th>" for h in head)
    trs = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{trs}</tbody></table>"


def _fmt_ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{_ms(seconds):,.0f}"


def _reasons(reasons: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in reasons.items()) or "-"


def actions_section(report: Report, tl: CallTimeline | None) -> str:
    """Tool calls per name and outcome in the window; the shown call's tool calls and messages."""
    counts = [(o.name, o.outcome or "-", o.count, _fmt_ms(o.latency.p50), _fmt_ms(o.latency.p95))
              for o in report.tool_outcomes]
    parts = [_table(("tool", "outcome", "calls", "p50 ms", "p95 ms"), counts) if counts
             else "<p>No tool calls in this window.</p>"]
    if tl is not None:
        c = tl.call
        rec = "not recorded" if not c.recording_path else (
            f"recording {c.recording_path}" + ("" if c.recording_s is None
                                               else f" ({c.recording_s:.1f} s)"))
        parts.append(f"<p>Call {_e(c.id)} ({_e(c.direction)}): {_e(rec)}.</p>")
        tools = [(a.name, "-" if a.turn_index is None else a.turn_index, _fmt_ms(a.latency_s),
                  a.outcome or "-", a.source) for a in tl.tool_calls]
        if tools:
            parts.append(_table(("tool", "turn", "latency ms", "outcome", "source"), tools))
        msgs = [(f"{m.at:%H:%M:%S}", m.text, m.audio_path or "-") for m in tl.messages]
        if msgs:
            parts.append(_table(("message at (UTC)", "text", "audio"), msgs))
    return "".join(parts)


def unanswered_table(report: Report) -> str:
    """Unanswered turns per report group and in all, with their reasons."""
    t = report.totals
    rows = [(g.key, g.turns, g.unanswered, _pct(g.unanswered_rate),
             _reasons(g.unanswered_reasons)) for g in report.groups]
    rows.append(("(all)", t.turns, t.unanswered, _pct(t.unanswered_rate),
                 _reasons(t.unanswered_reasons)))
    return ("<p>Unanswered turns: the caller heard no reply (not in voice-to-voice).</p>"
            + _table((report.by, "turns", "unanswered", "rate", "reasons"), rows))


CSS = """body{font:14px system-ui,sans-serif;margin:24px;color:#222;max-width:1160px}
h1{font-size:20px}h2{font-size:16px;margin-top:28px}figure{margin:16px 0}
figcaption{font-weight:600;margin-bottom:4px}svg{background:#fff;border:1px solid #ddd}
svg text{font:11px system-ui,sans-serif;fill:#333}svg .muted{fill:#777}
svg .label{font-weight:600}.grid{stroke:#eee}.axis{stroke:#999}.mark{stroke:#222}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ddd;padding:3px 8px;
text-align:right}td:first-child,th:first-child{text-align:left}th{background:#f4f4f4}"""


def render_html(report: Report, turns: Sequence[TurnRow], timeline: CallTimeline | None) -> str:
    """Build the page.

    Args:
        report: From :func:`db.reports.build_report`.
        turns: The window's turns, from :func:`db.reports.load_turns`.
        timeline: The call to chart turn by turn, or None.

    Returns:
        A complete HTML document with no external references.
    """
    t = report.totals
    window = f"calls since {report.since:%Y-%m-%d %H:%M} UTC" if report.since else "all calls"
    stage_rows = [(g.key if i == 0 else "", m, p.n, _fmt_ms(p.p50), _fmt_ms(p.p95),
                   _fmt_ms(p.p99))
                  for g in report.groups for i, (m, p) in enumerate(g.stages.items())
                  if m in METRICS]
    slow = [(s.call_id, s.index, _fmt_ms(s.voice_to_voice_s), s.asr_backend, s.transcript[:80])
            for s in report.slowest]
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width'>",
        f"<title>callagent latency report</title><style>{CSS}</style></head><body>",
        f"<h1>callagent latency report</h1><p>{_e(window)}; generated "
        f"{report.generated_at:%Y-%m-%d %H:%M} UTC. {t.calls} calls, {t.turns} turns "
        f"({t.unanswered} unanswered, {_pct(t.unanswered_rate)}), "
        f"{t.barge_ins} barge-ins, {t.open_calls} open.</p>",
        "<h2>Voice-to-voice</h2>", v2v_histograms(turns), unanswered_table(report),
        "<h2>Where the time goes</h2>", stage_bars(turns),
        _table((report.by, "stage", "n", "p50 ms", "p95 ms", "p99 ms"), stage_rows),
        "<h2>Real-time factor</h2>", rtf_over_time(turns),
        "<h2>One call</h2>", call_timeline_chart(timeline),
        "<h2>Tool calls and messages</h2>", actions_section(report, timeline),
        "<h2>Slowest turns</h2>",
        _table(("call", "turn", "voice-to-voice ms", "asr backend", "caller said"), slow),
        "</body></html>",
    ]
    return "\n".join(parts)


def write_html(path: str | Path, report: Report, turns: Sequence[TurnRow],
               timeline: CallTimeline | None) -> Path:
    """Render the page and write it to ``path`` (UTF-8).

    Args:
        path: Output file.
        report: From :func:`db.reports.build_report`.
        turns: The window's turns.
        timeline: The call to chart, or None.

    Returns:
        The path written.
    """
    out = Path(path)
    out.write_text(render_html(report, turns, timeline), encoding="utf-8")
    return out
