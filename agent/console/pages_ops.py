"""The console's operator pages: callers' messages, webhook deliveries, the latency charts.

Messages play in the page and are marked handled with one button (``static/console.js`` posts
to ``/api/messages/ID/handled``). The charts are the HTML report's own (:mod:`db.html`), over
the window the page asks for. Rendering only; the rows come from :mod:`agent.console.queries`.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from agent.console.pages import e, layout, table, when
from db import html as report_html
from db.reports import build_report, load_turns


def messages_page(rows: list[dict[str, Any]], show: str) -> str:
    """Callers' messages: play each, mark it handled (``show``: ``open`` or ``all``)."""
    links = " ".join(f'<a href="?show={k}"{" class=on" if k == show else ""}>{label}</a>'
                     for k, label in (("open", "not handled"), ("all", "all")))
    cells = []
    for m in rows:
        audio = (f'<audio controls preload="none" src="/api/messages/{m["id"]}/audio"></audio>'
                 if m["audio"] else "-")
        state = (f'handled {e(when(m["handled_at"]))}' if m["handled_at"] else
                 f'<button class="handle" data-id="{m["id"]}">mark handled</button>')
        cells.append([e(when(m["at"])), e(m["caller"]),
                      f'<a href="/calls/{e(m["call_id"])}">{e(m["call_id"])}</a>',
                      e(m["text"]), audio, f'<span id="msg-{m["id"]}">{state}</span>'])
    body = f"<p>{links}</p>" + (table(["left at (UTC)", "caller", "call", "message", "audio",
                                       ""], cells, text_cols=(3,))
                                if cells else '<p class="empty">No messages.</p>')
    return layout("Messages", body, "/messages")


def webhooks_page(data: dict[str, Any], status: str) -> str:
    """Each receiver's deliveries per status, and the newest deliveries."""
    counts = [[e(url)] + [e(n[s]) for s in ("pending", "delivered", "failed")]
              for url, n in data["counts"].items()]
    links = " ".join(f'<a href="?status={s}"{" class=on" if s == status else ""}>{s or "all"}</a>'
                     for s in ("", "pending", "delivered", "failed"))
    rows = [[e(when(d["created_at"])), e(d["type"]),
             f'<a href="/calls/{e(d["call_id"])}">{e(d["call_id"])}</a>', e(d["url"]),
             e(d["status"]), e(d["attempts"]), e(d["last_status"] or ""), e(d["last_error"]),
             e(when(d["delivered_at"] if d["status"] == "delivered" else d["next_attempt_at"]))]
            for d in data["deliveries"]]
    body = (table(["receiver", "pending", "delivered", "failed"], counts) if counts
            else '<p class="empty">No webhook events queued (no [[webhooks]] configured, or '
                 'no calls yet).</p>')
    body += f"<h2>Deliveries</h2><p>{links}</p>" + table(
        ["queued (UTC)", "event", "call", "receiver", "status", "tries", "HTTP", "error",
         "delivered / next try"], rows, text_cols=(7,))
    return layout("Webhook deliveries", body, "/webhooks")


def charts_page(engine, since: timedelta | None, window: str) -> str:
    """The HTML report's latency charts over the calls started in the window."""
    report = build_report(engine, since)
    turns = load_turns(engine, since)
    t = report.totals
    form = (f'<form class="filters" method="get"><label>calls since <input name="since" '
            f'value="{e(window)}" size="5"></label><button>Show</button></form>'
            f"<p>{t.calls} calls, {t.turns} turns ({t.unanswered} unanswered), "
            f"{t.barge_ins} barge-ins.</p>")
    body = (form + "<h2>Voice-to-voice</h2>" + report_html.v2v_histograms(turns)
            + report_html.unanswered_table(report) + "<h2>Where the time goes</h2>"
            + report_html.stage_bars(turns) + "<h2>Real-time factor</h2>"
            + report_html.rtf_over_time(turns))
    return layout("Latency", body, "/charts")
