"""``callagent webhooks``: the webhooks' deliveries and how each went.

    callagent webhooks [--status pending|delivered|failed] [--call ID] [--limit 50]
                       [--format table|json] [--db URL]

Thin wiring over :func:`db.outbox.status_counts` and :func:`db.outbox.deliveries`: a line per
receiver with its counts, then the newest deliveries with their tries and the receiver's last
answer. URLs are shown without credentials or query (:func:`agent.webhooks.safe_url`).
"""

from __future__ import annotations

import argparse
import json
import sys

from agent.cli import options as cliopts


def add_parser(subparsers) -> None:
    """Register ``webhooks``."""
    p = subparsers.add_parser("webhooks", help="list webhook deliveries and their status")
    cliopts.add_common(p)
    p.add_argument("--status", choices=("pending", "delivered", "failed"), default=None)
    p.add_argument("--call", default=None, metavar="ID", help="only this call's events")
    p.add_argument("--limit", type=int, default=50, help="newest deliveries listed (50)")
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.set_defaults(func=run)


@cliopts.call_log_errors("read")
def run(args: argparse.Namespace) -> int:
    """Print the deliveries; returns the exit code."""
    from agent.webhooks import safe_url
    from db.outbox import deliveries, status_counts

    got = cliopts.read_call_log(args, lambda engine: (
        status_counts(engine), deliveries(engine, args.status, args.call, args.limit)))
    if got is None:
        return 1
    counts, rows = got
    if args.format == "json":
        json.dump({"receivers": {safe_url(u): c for u, c in counts.items()},
                   "deliveries": [{
                       "event_id": d.event_id, "type": d.type, "call_id": d.call_id,
                       "url": safe_url(d.url), "status": d.status, "attempts": d.attempts,
                       "last_status": d.last_status, "last_error": d.last_error,
                       "queued_at": d.created_at.isoformat(),
                       "next_attempt_at": d.next_attempt_at.isoformat(),
                       "delivered_at": d.delivered_at and d.delivered_at.isoformat()}
                       for d in rows]}, sys.stdout, indent=2)
        print()
        return 0
    if not counts:
        print("no webhook deliveries")
        return 0
    for url, c in counts.items():
        print(f"{safe_url(url)}: {c['delivered']} delivered, {c['pending']} pending, "
              f"{c['failed']} failed")
    print()
    print(f"{'queued (UTC)':19}  {'event':12}  {'status':9}  {'tries':>5}  {'last':>4}  "
          f"{'call':20}  receiver")
    for d in rows:
        last = str(d.last_status) if d.last_status is not None else "-"
        note = f"  ({d.last_error})" if d.last_error and d.status != "delivered" else ""
        print(f"{d.created_at:%Y-%m-%d %H:%M:%S}  {d.type:12}  {d.status:9}  {d.attempts:5}  "
              f"{last:>4}  {d.call_id[:20]:20}  {safe_url(d.url)}{note}")
    return 0
