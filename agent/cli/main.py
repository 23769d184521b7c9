"""The ``callagent`` command line: a thin argparse front; each command lives in its own module.

A command module exposes ``add_parser(subparsers)`` (which sets ``func``) and holds no
pipeline logic of its own beyond wiring and formatting.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from agent import log
from agent.cli import runtime
from dialplan import ConfigError
from models.errors import ModelMissingError

COMMANDS = (
    "agent.cli.models",
    "agent.cli.simulate",
    "agent.cli.serve",
    "agent.cli.cluster",
    "agent.cli.call",
    "agent.cli.dial",
    "agent.cli.campaign",
    "agent.cli.report",
    "agent.cli.messages",
    "agent.cli.webhooks",
    "agent.cli.db",
    "agent.cli.bench",
)


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The whole command line; ``argv`` lets a command import only what it will run (bench)."""
    parser = argparse.ArgumentParser(prog="callagent", description=__doc__.splitlines()[0])
    parser.add_argument("--log-level", default=os.environ.get("CALLAGENT_LOG", "INFO"))
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        module = importlib.import_module(name)
        if getattr(module, "TAKES_ARGV", False):
            module.add_parser(sub, sys.argv[1:] if argv is None else argv)
        else:
            module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``callagent`` console script."""
    runtime.prepare()  # before build_parser imports the commands (and they their backends)
    args = build_parser(argv).parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # serve re-runs it as its worker
    log.setup(args.log_level)  # before a command makes the scheduler: it traces at DEBUG
    try:
        return int(args.func(args) or 0)
    except (ConfigError, ModelMissingError) as e:
        print(f"callagent: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
