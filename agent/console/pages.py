"""The console's pages, rendered on the server: the calls up now, the history, one call.

Plain HTML with the report's stylesheet and charts (:mod:`db.html`: one call's timeline is its
:func:`~db.html.call_timeline_chart`), and one small script (``static/console.js``) that keeps
the live list current from ``/api/events`` and marks messages handled. Every text from the call
log goes through :func:`html.escape`: a caller's words never become markup. Messages, webhooks
and the latency charts are :mod:`agent.console.pages_ops`.
"""

from __future__ import annotations

import html
import json
from typing import Any
from urllib.parse import urlencode

from db import html as report_html
from db.reports import call_timeline
from db.stages import LABELS, METRICS

NAV = (("/", "Live"), ("/calls", "History"), ("/messages", "Messages"),
       ("/webhooks", "Webhooks"), ("/charts", "Latency"))
CSS = report_html.CSS + """
nav a{margin-right:14px}nav a.on{font-weight:700}.call{border:1px solid #ddd;padding:8px 12px;
margin:10px 0;border-radius:4px}.call .head{font-weight:600}.conv{margin:6px 0 0;padding-left:0;
list-style:none}.conv li{margin:3px 0}.conv .who{display:inline-block;width:4.5em;color:#777}
.conv .agent{color:#1f4e79}.conv .partial{opacity:.7}.state{background:#eef;padding:0 6px;
border-radius:3px}.empty,.muted{color:#777}form.filters input,form.filters select{margin-right:8px}
td.text,th.text{text-align:left;max-width:520px}"""


def e(text: object) -> str:
    return html.escape("" if text is None else str(text), quote=True)


def ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:,.0f}"


def when(iso: str | None) -> str:
    """An ISO stamp as the pages show it: date and time to the second (UTC, no zone)."""
    return "-" if not iso else iso[:19].replace("T", " ")


def table(head: list[str], rows: list[list[str]], text_cols: tuple[int, ...] = ()) -> str:
    """A table of cells already escaped (or markup built here)."""
    th = "".join(f'<th class="{"text" if i in text_cols else ""}">{e(h)}</th>'
                 for i, h in enumerate(head))
    trs = "".join("<tr>" + "".join(f'<td class="{"text" if i in text_cols else ""}">{c}</td>'
                                   for i, c in enumerate(r)) + "</tr>" for r in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{trs}</tbody></table>"


def layout(title: str, body: str, active: str, boot: dict[str, Any] | None = None) -> str:
    """The page around ``body``; ``boot`` is data for the script (the live snapshot)."""
    nav = "".join(f'<a href="{href}" class="{"on" if href == active else ""}">{name}</a>'
                  for href, name in NAV)
    data = ""
    if boot is not None:  # JSON inside a script element: no "</" may end it early
        data = ('<script id="boot" type="application/json">'
                + json.dumps(boot).replace("</", "<\\/") + "</script>")
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            "<meta name='viewport' content='width=device-width'>"
            f"<title>{e(title)}: callagent</title><style>{CSS}</style></head><body>"
            f"<nav>{nav}<a href='/logout' class='muted'>sign out</a></nav><h1>{e(title)}</h1>"
            f"{body}{data}<script src='/static/console.js'></script></body></html>")


def live_page(snapshot: dict[str, Any]) -> str:
    """The calls that are up; the script renders them from the snapshot and keeps them current."""
    body = ('<p class="muted">Calls up now, with their conversation as it happens. '
            '<span id="stream">connecting...</span></p><div id="live"></div>')
    return layout("Calls up now", body, "/", boot=snapshot)


def history_page(rows: list[dict[str, Any]], total: int, params: dict[str, str],
                 choices: dict[str, list[str]], error: str = "") -> str:
    """The call history with its filters (time, profile, end reason, words)."""
    def select(name: str, options: list[str], label: str) -> str:
        opts = "".join(f'<option value="{e(o)}"{" selected" if params.get(name) == o else ""}>'
                       f'{e(o)}</option>' for o in options)
        return f'<label>{label} <select name="{name}"><option value="">any</option>{opts}' \
               '</select></label>'

    def box(name: str, label: str, width: int, hint: str = "") -> str:
        return (f'<label>{label} <input name="{name}" value="{e(params.get(name, ""))}" '
                f'size="{width}" placeholder="{e(hint)}"></label>')

    form = ('<form class="filters" method="get">' + box("since", "since", 5, "24h")
            + box("start", "from", 16, "2026-12-01T08:00") + box("end", "to", 16)
            + select("profile", choices["profiles"], "profile")
            + select("end_reason", choices["end_reasons"], "end reason")
            + box("q", "words", 18, "said by either side") + '<button>Filter</button></form>')
    if error:
        return layout("Call history", form + f'<p class="error">{e(error)}</p>', "/calls")
    cells = [[f'<a href="/calls/{e(r["id"])}">{e(r["id"])}</a>', e(when(r["started_at"])),
              e(r["caller"]), e(r["extension"]), e(r["profile"]), e(r["end_reason"] or "up"),
              e(r["turns"]),
              e("-" if r["duration_s"] is None else f'{r["duration_s"]:.1f}'),
              "&#9835;" if r["recorded"] else "", e((r.get("summary") or "")[:120])]
             for r in rows]
    offset, limit = int(params.get("offset") or 0), int(params.get("limit") or 50)
    pages = []
    for label, at in (("newer", offset - limit), ("older", offset + limit)):
        if 0 <= at < total and at != offset:
            pages.append(f'<a href="?{urlencode({**params, "offset": at})}">{label}</a>')
    found = f"<p>{total} calls match; {offset + 1 if rows else 0}-{offset + len(rows)} shown. " \
            f"{' '.join(pages)}</p>"
    return layout("Call history", form + found + table(
        ["call", "started (UTC)", "caller", "ext", "profile", "end", "turns", "s", "rec",
         "summary"], cells, text_cols=(2, 9)), "/calls")


def call_page(engine, row: dict[str, Any], live: dict[str, Any] | None) -> str:
    """One call: recording, its turns' stages as a timeline, words, tool calls, events."""
    cid = row["id"]
    facts = (f'<p>{e(row["direction"])} call from <b>{e(row["caller"])}</b> to '
             f'{e(row["extension"])} (profile {e(row["profile"])}), started '
             f'{e(when(row["started_at"]))} UTC, '
             + (f'ended {e(when(row["ended_at"]))} ({e(row["end_reason"])}), '
                f'{e(row["duration_s"])} s' if row["ended_at"] else "<b>up now</b>")
             + f', {e(row["turns"])} turns.</p>')
    if row.get("summary"):
        facts += f'<p><b>Summary:</b> {e(row["summary"])}</p>'
    parts = [facts]
    if live is not None:
        parts.append(f'<h2>Live</h2><div id="live" data-only="{e(cid)}"></div>')
    if row["recorded"]:
        length = "" if row["recording_s"] is None else f' ({row["recording_s"]:.1f} s)'
        parts.append(f'<h2>Recording{e(length)}</h2><audio id="recording" controls '
                     f'preload="metadata" src="/api/calls/{e(cid)}/recording"></audio>'
                     '<p class="muted">Caller left, agent right.</p>')
    parts.append("<h2>Timeline</h2>" + report_html.call_timeline_chart(
        call_timeline(engine, cid)))
    turns = [[e(t["index"]), e(t["transcript"]), e(t["reply"]), e(t["unanswered"] or "")]
             + [e(ms(t["stages"][m])) for m in METRICS] for t in row["turn_rows"]]
    parts.append("<h2>Turns</h2>" + (table(
        ["turn", "caller said", "agent replied", "unheard"]
        + [f"{LABELS[m]} ms" for m in METRICS], turns, text_cols=(1, 2))
        if turns else '<p class="empty">No turns recorded.</p>'))
    tools = [[e(when(a["at"])), e(a["turn_index"]), e(a["name"]), e(a["arguments"]),
              e(a["outcome"]), e(ms(a["latency_s"])), e(a["detail"])]
             for a in row["tool_calls"]]
    if tools:
        parts.append("<h2>Tool calls</h2>" + table(
            ["at (UTC)", "turn", "tool", "arguments", "outcome", "ms", "detail"], tools,
            text_cols=(3, 6)))
    msgs = [[e(when(m["at"])), e(m["text"]), e(m["duration_s"])] for m in row["messages"]]
    if msgs:
        parts.append("<h2>Messages</h2>" + table(["at (UTC)", "message", "s"], msgs, (1,)))
    events = [[e(when(v["at"])), e(v["kind"]), e(v["detail"])] for v in row["events"]]
    parts.append("<h2>Events</h2>" + table(["at (UTC)", "event", "detail"], events, (2,)))
    boot = {"seq": 0, "calls": [live]} if live is not None else None
    return layout(f"Call {cid}", "".join(parts), "/calls", boot=boot)
