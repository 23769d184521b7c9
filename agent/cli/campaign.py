"""``callagent campaign``: call every number of a CSV with one profile; show campaigns' progress.

    callagent campaign FILE.csv --profile NAME [--name N] [--concurrency N]
                      [--calls-per-minute X] [--window 09:00-18:00] [--timezone ZONE]
                      [--retries N] [--retry-delay S] [--ring-timeout S] [--domain HOST]
    callagent campaign status [NAME] [--format table|json]

The CSV has a ``number`` column (a SIP URI, or a phone number sent to ``--domain``), an
optional ``tz`` column, and any others as variables of the profile's greeting and voicemail
message (``{name}``). Flags override ``[campaigns]`` in config.toml. The campaign's state is in
the call log: running the same command again (after a crash, a kill, Ctrl-C) continues it and
calls no number twice (:mod:`agent.campaign.outcome`). Like ``dial`` it opens a SIP port of its
own (``[sip].port + 3``); its calls take the machine's ``sip.max_calls`` slots beside ``serve``'s
callers, and it waits while none is free. Exits 0 once every row is done, 1 if stopped before.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import sys
from pathlib import Path

from agent import log
from agent.cli import options as cliopts
from dialplan import ConfigError

FLAGS = {"concurrency": int, "calls_per_minute": float, "window": str, "timezone": str,
         "retries": int, "retry_delay_s": float, "ring_timeout_s": float, "domain": str}


def add_parser(subparsers) -> None:
    """Register ``campaign``."""
    p = subparsers.add_parser("campaign", help="call the numbers of a CSV (a call campaign)",
                              description=__doc__.splitlines()[0])
    cliopts.add_common(p)
    p.add_argument("file", metavar="FILE.csv|status", help="the campaign's CSV, or 'status'")
    p.add_argument("campaign", nargs="?", default=None, metavar="NAME",
                   help="with status: only this campaign")
    p.add_argument("--profile", default="default", help="the agent's profile (default: default)")
    p.add_argument("--name", default=None, help="the campaign's name (default: the CSV's stem)")
    for key, tp in FLAGS.items():
        flag = "--" + key.removesuffix("_s").replace("_", "-")
        p.add_argument(flag, dest=key, type=tp, default=None, metavar=tp.__name__.upper(),
                       help=f"overrides [campaigns].{key}")
    p.add_argument("--port", type=int, default=None,
                   help="local SIP port (default: [sip].port + 3, beside serve and dial)")
    p.add_argument("--rtp-port", type=int, default=None,
                   help="first local RTP port (default: [sip].rtp_port + 300)")
    p.add_argument("--format", choices=("table", "json"), default="table", help="status only")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """``campaign status`` or a campaign run; returns the exit code."""
    if args.file == "status":
        return status(args)
    return start(args)


def options_of(args: argparse.Namespace, config):
    """``[campaigns]`` with the command line's flags over it, checked again."""
    given = {k: getattr(args, k) for k in FLAGS if getattr(args, k, None) is not None}
    try:
        return dataclasses.replace(config.campaigns, **given)
    except ValueError as e:  # the options' own message: "window = '9-5': expected HH:MM-HH:MM"
        raise ConfigError(f"campaign flags: {e}") from None


def start(args: argparse.Namespace) -> int:
    """Create or continue the campaign, dial until done (or a signal); returns the exit code."""
    from agent.campaign.runner import CampaignRunner, row_profile, wall
    from agent.cli.dial import outbound
    from db import campaigns as store
    from db.migrate import make_engine, upgrade
    from dialplan.campaign import CampaignError, placeholders, read_rows

    config = cliopts.load(args)
    if args.profile not in config.profiles:
        raise ConfigError(f"--profile: unknown profile '{args.profile}' "
                          f"(defined: {', '.join(config.profiles)})")
    options = options_of(args, config)
    profile = config.profiles[args.profile]
    path = Path(args.file)
    name = args.name or path.stem
    try:
        rows = read_rows(path, options)
        if placeholders(profile.system_prompt):  # its prefix is primed once per profile
            raise CampaignError(f"profiles.{profile.name}.system_prompt uses "
                                f"{{{placeholders(profile.system_prompt)[0]}}}: a campaign's "
                                "variables go in the greeting or voicemail_message")
        for row in rows:  # every row's variables checked before the first call
            row_profile(profile, row)
    except CampaignError as e:
        raise ConfigError(str(e)) from None
    engine = make_engine(config.db.url)
    upgrade(engine)
    try:
        created = store.open_campaign(engine, name, str(path), hashlib.sha256(
            path.read_bytes()).hexdigest(), profile.name, rows, wall())
    except store.CampaignMismatch as e:
        raise ConfigError(str(e)) from None
    log.event("campaign-opened", campaign=name, rows=len(rows), created=created)
    server, writer, stop = outbound(config, args.port, args.rtp_port, slot=3)
    try:
        server.profiles.prepare(profile)
        server.sip.start()
        summary = CampaignRunner(server, engine, name, profile, options, stop).run()
    finally:
        server.stop()
        writer.close()
        engine.dispose()
    done = ", ".join(f"{k} {v}" for k, v in sorted(summary.outcomes.items())) or "none"
    print(f"campaign {name}: {summary.calls} calls this run ({done})"
          + ("" if summary.finished else "; stopped before the end: run it again to continue"))
    return 0 if summary.finished else 1


@cliopts.call_log_errors("read")
def status(args: argparse.Namespace) -> int:
    """Print each campaign's progress (or one's); returns the exit code."""
    from db.campaigns import campaign_status

    got = cliopts.read_call_log(args, lambda engine: campaign_status(engine, args.campaign))
    if got is None:
        return 1
    if not got:
        print(f"no campaign {args.campaign!r}" if args.campaign else "no campaigns")
        return 1 if args.campaign else 0
    if args.format == "json":
        json.dump([{"name": s.name, "profile": s.profile, "rows": s.rows,
                    "outcomes": dict(s.outcomes), "pending": s.pending, "dialing": s.dialing,
                    "attempts": s.attempts, "created_at": s.created_at.isoformat(),
                    "finished_at": s.finished_at and s.finished_at.isoformat(),
                    "next": [{"line": line, "uri": uri, "at": at and at.isoformat()}
                             for line, uri, at in s.next_attempts]} for s in got],
                  sys.stdout, indent=2)
        print()
        return 0
    from rich.console import Console
    from rich.table import Table

    from agent.campaign.outcome import OUTCOMES

    table = Table(title="campaigns")
    for col in ("campaign", "profile", "rows", *OUTCOMES, "pending", "dialing", "attempts",
                "next attempts (UTC)", "finished (UTC)"):
        table.add_column(col, justify="right" if col not in ("campaign", "profile") else "left")
    for s in got:
        nxt = ", ".join(f"line {line} {at:%m-%d %H:%M:%S}" if at else f"line {line} now"
                        for line, _, at in s.next_attempts[:3]) or "-"
        table.add_row(s.name, s.profile, str(s.rows), *(str(s.outcomes.get(o, 0))
                      for o in OUTCOMES), str(s.pending), str(s.dialing), str(s.attempts),
                      nxt, f"{s.finished_at:%Y-%m-%d %H:%M}" if s.finished_at else "-")
    Console(width=200).print(table)
    return 0
