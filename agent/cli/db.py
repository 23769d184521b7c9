"""``callagent db``: migrate the call-log database and look after it.

Thin wiring over :mod:`db.migrate` and :mod:`db.writer`; holds no database logic of its own.

    callagent db upgrade [--db URL]   apply migrations up to head (creates the tables)
    callagent db current [--db URL]   show the database revision and the newest one
    callagent db replay  [--db URL]   write spooled records now (normally the writer does it)
"""

from __future__ import annotations

import argparse

from agent import log
from agent.cli import options as cliopts


def add_parser(subparsers) -> None:
    """Register ``db`` and its actions."""
    parser = subparsers.add_parser("db", help="migrate and inspect the call-log database")
    actions = parser.add_subparsers(dest="db_action", required=True)
    for name, help_text in (
        ("upgrade", "apply migrations up to head (creates the tables)"),
        ("current", "show the database's revision and the newest one"),
        ("replay", "write records waiting in the spool to the database now"),
    ):
        action = actions.add_parser(name, help=help_text)
        cliopts.add_common(action)
        action.set_defaults(func=run)
    parser.set_defaults(func=run)


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
    raise AssertionError(args.db_action)
