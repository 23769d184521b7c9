"""``callagent report``: latency and call-count reports from the call log.

Formats what :mod:`db.reports` computes (rich tables, JSON or CSV) and writes the HTML page of
:mod:`db.html`; holds no query logic of its own. JSON and CSV carry seconds, the call log's
unit, and unanswered rates as fractions, for programs; the tables, for people, show ms and %.

    callagent report [--since 24h] [--by backend|profile|model|worker|host] [--calls N]
                     [--slowest N]
                     [--call ID] [--format table|json|csv] [--html FILE] [--db URL]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
from datetime import timedelta

from agent.cli import options as cliopts


def add_parser(subparsers) -> None:
    """Register ``report``."""
    p = subparsers.add_parser("report", help="latency percentiles, slowest turns, call timelines")
    cliopts.add_common(p)
    p.add_argument("--since", type=cliopts.since, default=None, metavar="WINDOW",
                   help="only calls started in this window: 30m, 24h, 7d (default: all)")
    p.add_argument("--by", choices=("backend", "profile", "model", "worker", "host"),
                   default="backend", help="group stage percentiles by ASR backend, profile, "
                   "ASR model, or cluster worker (w1@host) or host")
    p.add_argument("--calls", type=int, default=10, metavar="N", help="list the N latest calls")
    p.add_argument("--slowest", type=int, default=5, metavar="N",
                   help="list the N slowest turns (voice-to-voice)")
    p.add_argument("--call", metavar="ID", help="show one call's timeline, turn by turn")
    p.add_argument("--format", choices=("table", "json", "csv"), default="table")
    p.add_argument("--html", metavar="FILE", help="also write a self-contained HTML page")
    p.set_defaults(func=run)


@cliopts.call_log_errors("read")
def run(args: argparse.Namespace) -> int:
    """Print the report; returns the exit code (1: no such database or call)."""
    from sqlalchemy.engine import make_url

    from db import actions, html, placement, reports
    from db.migrate import current_revision, make_engine

    url = cliopts.load(args).db.url
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:") \
            and not os.path.exists(parsed.database):
        print(f"callagent: no call log at {parsed.database}", file=sys.stderr)
        return 1
    engine = make_engine(url)
    try:
        if current_revision(engine) is None:
            print("callagent: the call log is empty; run `callagent db upgrade`", file=sys.stderr)
            return 1
        timeline = None
        if args.call:
            timeline = reports.call_timeline(engine, args.call)
            if timeline is None:
                print(f"callagent: no call {args.call!r}", file=sys.stderr)
                return 1
        if args.by in placement.PLACES:
            report = placement.build_place_report(engine, args.since, args.by, args.calls,
                                                  args.slowest)
            report.tool_outcomes = actions.tool_outcomes(engine, args.since, report.generated_at)
        else:
            report = reports.build_report(engine, args.since, args.by, args.calls, args.slowest)
        if args.html:
            turns = reports.load_turns(engine, args.since, report.generated_at)
            chart_call = timeline
            if chart_call is None and report.slowest:
                # Chart the call with the slowest turn: the one worth looking at.
                chart_call = reports.call_timeline(engine, report.slowest[0].call_id)
            elif chart_call is None and report.recent_calls:
                chart_call = reports.call_timeline(engine, report.recent_calls[0].id)
            html.write_html(args.html, report, turns, chart_call)
    finally:
        engine.dispose()
    if args.format == "json":
        payload = _jsonable(timeline if args.call else report)
        json.dump(payload, sys.stdout, indent=2)
        print()
    elif args.format == "csv":
        _csv(report, timeline if args.call else None)
    elif timeline is not None:
        _print_timeline(timeline)
    else:
        _print_report(report)
    if args.html:
        print(f"wrote {args.html}", file=sys.stderr)
    return 0


def _jsonable(obj: object) -> object:
    """Dataclasses, dicts and lists with datetimes as ISO strings, for ``--format json``."""
    import dataclasses
    from datetime import datetime

    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, datetime):
        return obj.isoformat()
    return obj


def _csv(report, timeline) -> None:
    from db.stages import METRICS, column

    w = csv.writer(sys.stdout, lineterminator="\n")
    if timeline is not None:
        # New columns go last: scripts that read these by position keep working.
        w.writerow(["call_id", "index", "speech_start_s", "speech_end_s",
                    *[column(m) for m in METRICS], "asr_rtf", "tts_rtf", "barge_in",
                    "transcript", "reply_text", "unanswered"])
        for t in timeline.turns:
            w.writerow([t.call_id, t.index, t.speech_start_s, t.speech_end_s,
                        *[t.stages[m] for m in METRICS], t.asr_rtf, t.tts_rtf,
                        int(t.barge_in), t.transcript, t.reply_text, t.unanswered])
        return
    w.writerow(["section", "group", "metric", "n", "p50", "p95", "p99", "max", "count", "rate"])
    for g in report.groups:
        for m, p in g.stages.items():
            w.writerow(["stage_s", g.key, m, p.n, *_r(p.p50, p.p95, p.p99, p.max), "", ""])
    for r in report.rtf:
        for m, p in (("asr_rtf", r.asr), ("tts_rtf", r.tts)):
            w.writerow(["rtf", f"{r.backend}/{r.model}", m, p.n,
                        *_r(p.p50, p.p95, p.p99, p.max), "", ""])
    # Unanswered turns: n is every turn of the group (the rate's denominator), count those with
    # no reply heard; metric "unanswered" is all reasons together, then one row per reason.
    t = report.totals
    for section, key, n, total, reasons in (
            *(("unanswered", g.key, g.turns, g.unanswered, g.unanswered_reasons)
              for g in report.groups),
            ("unanswered_total", "", t.turns, t.unanswered, t.unanswered_reasons)):
        for metric, count in (("unanswered", total), *reasons.items()):
            w.writerow([section, key, metric, n, "", "", "", "", count,
                        *_r(count / n if n else None)])


def _r(*values: float | None) -> list[float | str]:
    # Microsecond (and 1e-6 RTF) resolution is plenty; full float noise only hurts diffs.
    return ["" if v is None else round(v, 6) for v in values]


# -- rich tables -------------------------------------------------------------------------------


def _console():
    from rich.console import Console

    # Piped output (files, tests, less) gets a wide fixed width instead of rich's 80 columns.
    return Console(width=None if sys.stdout.isatty() else 160, highlight=False)


def _ms(seconds: float | None) -> str:
    """A duration from the call log (s) as people read it (ms)."""
    return "-" if seconds is None else f"{seconds * 1000:,.0f}"


def _pct(rate: float | None) -> str:
    return "-" if rate is None else f"{rate:.1%}"


def _unanswered_cells(group, rows: int) -> list[str]:
    """A group's unanswered count and rate, then its reasons, one per table row."""
    reasons = [f"{_escape(k)} {v}" for k, v in group.unanswered_reasons.items()]
    if len(reasons) > rows - 1:
        reasons[rows - 2:] = [f"+{len(reasons) - rows + 2} more"]
    cells = [f"{group.unanswered} ({_pct(group.unanswered_rate)})", *reasons]
    return cells + [""] * (rows - len(cells))


def _rtf(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def _when(dt) -> str:
    return "-" if dt is None else dt.strftime("%Y-%m-%d %H:%M:%S")


def _print_report(report) -> None:
    from rich.table import Table

    from db.stages import METRICS, STAGES

    con = _console()
    t = report.totals
    window = f"since {_when(report.since)} UTC" if report.since else "all time"
    reasons = ", ".join(f"{k} {v}" for k, v in t.end_reasons.items()) or "-"
    unanswered = f"{t.unanswered} unanswered"
    if t.unanswered:
        why = ", ".join(f"{k} {v}" for k, v in t.unanswered_reasons.items())
        unanswered += f" ({_pct(t.unanswered_rate)}: {_escape(why)})"
    con.print(f"[bold]Call log[/bold] ({window}): {t.calls} calls, {t.turns} turns, "
              f"{unanswered}, {t.barge_ins} barge-ins, {t.open_calls} open; ended: {reasons}")

    stages = Table(title=f"Latency by {report.by} (ms; voice-to-voice of answered turns only)",
                   title_justify="left")
    for col in (report.by, "calls", "turns", "unanswered", "stage", "n", "p50", "p95", "p99",
                "max"):
        stages.add_column(col, justify="left" if col in (report.by, "stage") else "right")
    for g in report.groups:
        # The group's first row has the count and rate, the rows below one reason each.
        why = _unanswered_cells(g, len(METRICS))
        for i, m in enumerate(METRICS):
            p = g.stages[m]
            first = i == 0
            stages.add_row(g.key if first else "", str(g.calls) if first else "",
                           str(g.turns) if first else "", why[i],
                           f"[bold]{m}[/bold]" if m == "voice_to_voice" else m, str(p.n),
                           _ms(p.p50), _ms(p.p95), _ms(p.p99), _ms(p.max),
                           end_section=m == "voice_to_voice")
    con.print(stages if report.groups else "no turns in this window")

    if report.rtf:
        rtf = Table(title="Real-time factor (processing s / audio s)", title_justify="left")
        for col in ("asr backend", "asr model", "n", "asr p50", "asr p95", "tts p50", "tts p95"):
            rtf.add_column(col, justify="left" if col in ("asr backend", "asr model")
                           else "right")
        for r in report.rtf:
            rtf.add_row(r.backend, r.model, str(r.asr.n), _rtf(r.asr.p50), _rtf(r.asr.p95),
                        _rtf(r.tts.p50), _rtf(r.tts.p95))
        con.print(rtf)

    if report.slowest:
        slow = Table(title="Slowest turns", title_justify="left")
        for col in ("call", "turn", "voice-to-voice ms", "slowest stage", "asr backend", "said"):
            slow.add_column(col, justify="right" if col in ("turn", "voice-to-voice ms")
                            else "left")
        for s in report.slowest:
            stage = max(STAGES, key=lambda m: s.stages[m] or 0.0)
            slow.add_row(s.call_id, str(s.index), _ms(s.voice_to_voice_s),
                         f"{stage} {_ms(s.stages[stage])}", s.asr_backend,
                         _clip(s.transcript))
        con.print(slow)

    if report.recent_calls:
        calls = Table(title="Latest calls", title_justify="left")
        for col in ("call", "started (UTC)", "profile", "asr", "turns", "unanswered",
                    "v2v p50 ms", "v2v max ms", "end"):
            calls.add_column(col, justify="right" if col.startswith(("turns", "un", "v2v"))
                             else "left")
        for c in report.recent_calls:
            calls.add_row(c.id, _when(c.started_at), c.profile, c.asr_backend, str(c.turns),
                          str(c.unanswered), _ms(c.voice_to_voice.p50),
                          _ms(c.voice_to_voice.max), c.end_reason or "(open)")
        con.print(calls)

    if report.tool_outcomes:
        tools = Table(title="Tool calls and keypad actions (transfers included)",
                      title_justify="left")
        for col in ("tool", "outcome", "calls", "p50 ms", "p95 ms"):
            tools.add_column(col, justify="left" if col in ("tool", "outcome") else "right")
        for o in report.tool_outcomes:
            tools.add_row(_escape(o.name), _escape(o.outcome or "-"), str(o.count),
                          _ms(o.latency.p50), _ms(o.latency.p95))
        con.print(tools)


def _print_timeline(tl) -> None:
    from rich.table import Table

    from db.stages import METRICS

    con = _console()
    c = tl.call
    con.print(f"[bold]Call {c.id}[/bold] ({_escape(c.direction)}) from {c.caller_uri or '?'}, "
              f"profile {c.profile or '-'}, asr {c.asr_backend or '-'} {c.asr_model}, "
              f"llm {c.llm_model or '-'}; "
              f"{_when(c.started_at)} -> {_when(c.ended_at)} UTC ({c.end_reason or 'open'})")
    if c.recording_path:
        length = "" if c.recording_s is None else f" ({c.recording_s:.1f} s)"
        con.print(f"Recording: {_escape(c.recording_path)}{length}  (caller left, agent right)")
    else:
        con.print("Recording: none")
    _print_summary(con, tl.summary)
    table = Table(title="Turns (ms)", title_justify="left")
    table.add_column("#", justify="right")
    table.add_column("speech s", justify="right")
    for m in METRICS:
        table.add_column(m.replace("_", " "), justify="right")
    table.add_column("asr rtf", justify="right")
    table.add_column("unanswered")
    table.add_column("caller -> agent")
    for t in tl.turns:
        span = "-" if t.speech_start_s is None else (
            f"{t.speech_start_s:.1f}-{t.speech_end_s:.1f}" if t.speech_end_s is not None
            else f"{t.speech_start_s:.1f}")
        said = f"{_clip(t.transcript, 30)} -> {_clip(t.reply_text, 30)}"
        table.add_row(str(t.index) + (" [barge-in]" if t.barge_in else ""), span,
                      *[_ms(t.stages[m]) for m in METRICS], _rtf(t.asr_rtf),
                      _escape(t.unanswered) or "-", said)
    con.print(table)
    con.print("[bold]In time order[/bold] (s since answered, about the recording's time)")
    for offset, at, line in _moments(tl):
        where = "      -" if offset is None else f"{offset:7.1f}"
        con.print(f"  {where}  {_when(at)}  {line}")


def _print_summary(con, summary) -> None:
    """The post-call summary and its fields, or where its job stands."""
    if summary is None:
        return
    tries = f"{summary.attempts} tr{'y' if summary.attempts == 1 else 'ies'}"
    if summary.state == "pending":
        con.print(f"Summary: pending (made in the background after the call; {tries})")
        return
    if summary.state == "failed":
        con.print(f"Summary: failed ({tries}): {_escape(summary.detail or '?')}")
        return
    took = [] if summary.seconds is None else [f"{summary.seconds:.1f} s"]
    con.print(f"[bold]Summary[/bold] ({', '.join([*took, tries])}): "
              f"{_escape(summary.summary or '')}")
    for name, value in (summary.fields or {}).items():
        con.print(f"  {_escape(name)}: {'-' if value is None else _escape(str(value))}")


def _moments(tl) -> list[tuple[float | None, object, str]]:
    """The call's turns, tool calls, messages and events on one line of time, as text."""
    t0 = tl.call.answered_at or tl.call.started_at
    found = []  # (sort key, offset s, wall clock, line)
    for t in tl.turns:
        offset = t.speech_start_s if t.speech_start_s is not None else t.speech_end_s
        at = t.recorded_at if offset is None else t0 + timedelta(seconds=offset)
        if offset is None and at is not None:
            offset = (at - t0).total_seconds()
        tags = ([f"not heard: {t.unanswered}"] if t.unanswered else []) + (
            ["barge-in"] if t.barge_in else [])
        found.append((offset, at, f'[bold]turn {t.index}[/bold]: "{_clip(t.transcript, 60)}"'
                      f' -> "{_clip(t.reply_text, 60)}"'
                      + (f" ({_escape(', '.join(tags))})" if tags else "")))
    for a in tl.tool_calls:
        turn = f", turn {a.turn_index}" if a.turn_index is not None else ""
        detail = f" - {_clip(a.detail, 60)}" if a.detail else ""
        # A started action without an outcome (the call is still up, or its process died
        # before the supervisor closed it): how far it got, not a latency.
        took = (f"no outcome yet, {_ms(a.latency_s)} ms in" if a.outcome == "pending"
                else f"{_escape(a.outcome or '?')} in {_ms(a.latency_s)} ms")
        found.append((a.offset_s, a.at,
                      f"[bold]tool {_escape(a.name)}[/bold] {_clip(a.arguments, 80)} "
                      f"({_escape(a.source)}{turn}): {took}{detail}"))
    for m in tl.messages:
        audio = _escape(m.audio_path) if m.audio_path else "no audio"
        if m.audio_path and m.duration_s is not None:
            audio += f", {m.duration_s:.1f} s"
        found.append((m.offset_s, m.at, f'[bold]message[/bold] "{_clip(m.text, 100)}" ({audio})'))
    for e in tl.events:
        found.append(((e.at - t0).total_seconds(), e.at,
                      f"{_escape(e.kind)}  {_escape(e.detail)}"))
    # Python's sort is stable: at one time, turns come before what they led to.
    found.sort(key=lambda m: float("inf") if m[0] is None else m[0])
    return found


def _escape(text: str) -> str:
    """Text from the call log as rich prints it, never as markup."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)


def _clip(text: str, n: int = 40) -> str:
    text = " ".join(text.split())
    return _escape(text if len(text) <= n else text[: n - 1] + "…")
