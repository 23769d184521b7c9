"""``callagent db``: migrate the call-log database and look after it.

Thin wiring over :mod:`db.migrate`, :mod:`db.writer` and :mod:`db.purge`; holds no database
logic of its own.

    callagent db upgrade [--db URL]   apply migrations up to head (creates the tables)
    callagent db current [--db URL]   show the database revision and the newest one
    callagent db replay  [--db URL]   write spooled records now (normally the writer does it)
    callagent db purge --older-than DAYS [--db URL] [--dry-run]
                                      delete recordings and message audio, blank transcripts
"""

from __future__ import annotations

import argparse

from agent import log
from agent.cli import options as cliopts


def add_parser(subparsers) -> None:
    """Register ``db`` and its actions."""
    parser = subparsers.add_parser(
        "db", help="migrate, inspect and purge the call-log database")
    actions = parser.add_subparsers(dest="db_action", required=True)
    for name, help_text in (
        ("upgrade", "apply migrations up to head (creates the tables)"),
        ("current", "show the database's revision and the newest one"),
        ("replay", "write records waiting in the spool to the database now"),
    ):
        action = actions.add_parser(name, help=help_text)
        cliopts.add_common(action)
        action.set_defaults(func=run)
    purge = actions.add_parser(
        "purge", help="delete old calls' recordings and message audio and blank what was said "
        "(timings stay)")
    cliopts.add_common(purge)
    purge.add_argument("--older-than", type=_days, required=True, metavar="DAYS",
                       help="calls started more than DAYS days ago (a fraction is allowed)")
    purge.add_argument("--dry-run", action="store_true",
                       help="only count what would go: nothing is deleted or changed")
    purge.set_defaults(func=run)
    parser.set_defaults(func=run)


def _days(text: str) -> float:
    try:
        days = float(text)
    except ValueError:
        days = -1.0
    if not 0 <= days < 1e6:  # also refuses nan and inf (no timedelta holds them)
        raise argparse.ArgumentTypeError(f"bad --older-than {text!r}: a number of days, >= 0")
    return days


@cliopts.call_log_errors("reach")
def run(args: argparse.Namespace) -> int:
    """Run one ``db`` action; returns the exit code."""
    from db import migrate

    config = cliopts.load(args)
    url = config.db.url
    safe_url = migrate.mask_url(url)
    if args.db_action == "upgrade":
        rev = migrate.upgrade(url)
        print(f"call log at revision {rev} ({safe_url})")
        return 0
    if args.db_action == "current":
        engine = migrate.make_engine(url)
        try:
            rev = migrate.current_revision(engine)
        finally:
            engine.dispose()
        head = migrate.head_revision()
        print(f"database: {rev or 'empty (never migrated)'}  newest: {head}  ({safe_url})")
        return 0 if rev == head else 1
    if args.db_action == "replay":
        from db.writer import CallLogWriter

        writer = CallLogWriter(config.db, on_event=log.event)
        writer.flush()
        ok = writer.close(timeout=30)
        pending = writer.spool.pending()
        print(f"replayed {writer.stats.replayed} records; "
              f"{'records still wait in the spool' if pending else 'spool empty'}")
        return 0 if ok and not pending else 1
    if args.db_action == "purge":
        return _purge(url, args.older_than, args.dry_run)
    raise AssertionError(args.db_action)


def _purge(url: str, days: float, dry_run: bool) -> int:
    import sys
    from datetime import timedelta

    from db import migrate
    from db.purge import purge

    engine = migrate.make_engine(url)
    try:
        rev = migrate.current_revision(engine)
        if rev != migrate.head_revision():
            # An older log has no recording columns to purge: say so, not "no such column".
            state = "empty" if rev is None else f"at revision {rev}"
            print(f"callagent: the call log is {state}; run `callagent db upgrade`",
                  file=sys.stderr)
            return 1
        r = purge(engine, timedelta(days=days), dry_run=dry_run)
    finally:
        engine.dispose()
    verb, files, blank = (("would purge", "to delete", "to blank") if dry_run
                          else ("purged", "deleted", "blanked"))
    print(f"{verb} {r.calls} calls started before {r.cutoff:%Y-%m-%d %H:%M} UTC: "
          f"{r.files} files {files} ({r.bytes:,} bytes), {r.missing} already gone; "
          f"{r.turns} turns and {r.messages} messages {blank}"
          + (f"; {r.deliveries} webhook deliveries {files}" if r.deliveries else ""))
    for failed in r.failed:
        print(f"callagent: could not delete {failed} (kept in the log)", file=sys.stderr)
    return 1 if r.failed else 0
