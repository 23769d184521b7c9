"""The ``callagent`` command line: a thin argparse front; each command lives in its own module.

A command module exposes ``add_parser(subparsers)`` (which sets ``func``) and holds no
pipeline logic of its own beyond wiring and formatting.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys

from db import log
from dialplan import ConfigError
from models.errors import ModelMissingError
from models.priority import Priority
from models.scheduler import SCHEDULER, JobTrace

COMMANDS = (
    "agent.cli.models",
    "agent.cli.simulate",
    "agent.cli.serve",
    "agent.cli.cluster",
    "agent.cli.call",
    "agent.cli.report",
    "agent.cli.db",
    "agent.cli.bench",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="callagent", description=__doc__.splitlines()[0])
    parser.add_argument("--log-level", default=os.environ.get("CALLAGENT_LOG", "INFO"))
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        importlib.import_module(name).add_parser(sub)
    return parser


def _trace_job(job: JobTrace) -> None:
    # The thread names the call (turn-<call id>-<turn>, prefill-<call id>); llm-batch's steps
    # serve every call at once.
    log.event("job", level=logging.DEBUG, stage=job.stage,
              priority=Priority(job.level).name.lower(), waited_ms=log.ms(job.waited_s),
              ran_ms=log.ms(job.ran_s), thread=job.thread, note=job.note)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``callagent`` console script."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # serve re-runs it as its worker
    log.setup(args.log_level)
    if log.logger.isEnabledFor(logging.DEBUG):  # every scheduler job, one line each
        SCHEDULER.observe(_trace_job)
    try:
        return int(args.func(args) or 0)
    except (ConfigError, ModelMissingError) as e:
        print(f"callagent: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
