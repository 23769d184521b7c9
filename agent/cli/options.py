"""Options every command shares: ``--config`` and ``--db`` (over ``CALLAGENT_DB_URL``).

:func:`load` also applies the environment's overrides of the file (``CALLAGENT_DB_URL``,
``CALLAGENT_PAIRS``) and what the config asks of the process (:func:`agent.cli.runtime.for_config`).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from agent.cli import runtime
from dialplan import Config, load_config

T = TypeVar("T")


def add_common(parser: argparse.ArgumentParser, db: bool = True) -> None:
    """Add ``--config`` (and ``--db``) to a sub-command."""
    parser.add_argument(
        "--config",
        default=os.environ.get("CALLAGENT_CONFIG", "config.toml"),
        help="config file (default: config.toml)",
    )
    if db:
        parser.add_argument(
            "--db",
            default=None,
            help="SQLAlchemy URL of the call log (over CALLAGENT_DB_URL and [db].url)",
        )


def call_log_errors(verb: str):
    """Decorate a command's ``run``: an unreachable call log ends it with exit 1 and one line."""

    def wrap(run):
        @functools.wraps(run)
        def guarded(args: argparse.Namespace) -> int:
            from sqlalchemy.exc import OperationalError

            try:
                return run(args)
            except OperationalError as e:
                print(f"callagent: cannot {verb} the call log: {e.orig or e}", file=sys.stderr)
                return 1

        return guarded

    return wrap


def read_call_log(args: argparse.Namespace, read: Callable[[Any], T]) -> T | None:
    """``read(engine)`` on the call log, if it is at the newest revision (None: it is not).

    For the commands that read tables a newer revision added (``messages``, ``webhooks``); an
    older log gets a line saying how to upgrade it.
    """
    from db.migrate import current_revision, head_revision, make_engine

    engine = make_engine(load(args).db.url)
    try:
        if current_revision(engine) == head_revision():
            return read(engine)
    finally:
        engine.dispose()
    print("callagent: the call log is not at the newest revision; run `callagent db upgrade`",
          file=sys.stderr)
    return None


def load(args: argparse.Namespace) -> Config:
    """Load the config, then apply the overrides of the command line and the environment.

    The database URL: --db > ``CALLAGENT_DB_URL`` > file. ``CALLAGENT_PAIRS=0`` turns pairing
    off over ``[scheduler].pairs``.
    """
    # The default file may be absent (built-in defaults); a file named explicitly must exist.
    implicit = args.config == "config.toml" and not os.path.exists(args.config)
    path = None if implicit else args.config
    config = load_config(path)
    url = getattr(args, "db", None) or os.environ.get("CALLAGENT_DB_URL")
    if url:
        config = dataclasses.replace(config, db=dataclasses.replace(config.db, url=url))
    pairs = os.environ.get("CALLAGENT_PAIRS")
    if pairs is not None:  # as before [scheduler] existed: "0" off, anything else on
        config = dataclasses.replace(
            config, scheduler=dataclasses.replace(config.scheduler, pairs=pairs != "0"))
    runtime.for_config(config)
    return config


def since(text: str):
    """``--since``'s argument (30m, 24h, 7d) as a window, or argparse's error."""
    from db.reports import parse_since

    try:
        return parse_since(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
