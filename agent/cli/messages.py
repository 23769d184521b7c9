"""``callagent messages``: the messages callers left (``take_message``, keypad ``message``).

    callagent messages [--since 7d] [--format table|json] [--db URL]

Thin wiring over :func:`db.actions.recent_messages`; newest first, with the caller, the call
id (for ``callagent report --call ID``), the words and the audio file.
"""

from __future__ import annotations

import argparse
import json
import sys

from agent.cli import options as cliopts


def add_parser(subparsers) -> None:
    """Register ``messages``."""
    p = subparsers.add_parser("messages", help="list the messages callers left")
    cliopts.add_common(p)
    p.add_argument("--since", type=cliopts.since, default=None, metavar="WINDOW",
                   help="only messages left in this window: 30m, 24h, 7d (default: all)")
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.set_defaults(func=run)


@cliopts.call_log_errors("read")
def run(args: argparse.Namespace) -> int:
    """Print the messages; returns the exit code."""
    from db.actions import recent_messages

    rows = cliopts.read_call_log(args, lambda engine: recent_messages(engine, args.since))
    if rows is None:
        return 1
    if args.format == "json":
        json.dump([{"call_id": cid, "at": m.at.isoformat(), "caller": m.caller_uri,
                    "text": m.text, "audio_path": m.audio_path, "duration_s": m.duration_s}
                   for cid, m in rows], sys.stdout, indent=2)
        print()
        return 0
    if not rows:
        print("no messages")
        return 0
    for cid, m in rows:
        length = f"{m.duration_s:.1f} s" if m.duration_s is not None else "-"
        print(f"{m.at:%Y-%m-%d %H:%M:%S} UTC  {m.caller_uri or 'unknown caller'}  call {cid}")
        print(f"    {m.text or '(no words)'}")
        print(f"    audio: {m.audio_path or '(none)'} ({length})")
    return 0
