"""``callagent dial``: place a call that the agent runs, as it runs an answered one.

    callagent dial URI --profile NAME [--say-first TEXT] [--port PORT] [--rtp-port PORT]

Loads one profile's models, opens a SIP port of its own (so a ``serve`` on the configured
port can go on answering), calls ``URI`` and runs the same session a caller gets: turns,
tools, keypad, recording, the call log (direction ``outbound``). ``--say-first`` is what the
agent says once the callee answers (default: the profile's greeting). The call takes one of
the machine's ``sip.max_calls`` slots, shared with ``serve``'s callers and campaigns
(:mod:`agent.sip.slots`). Exits 0 once the call has ended after being answered, 1 if it was
never answered, 3 if every slot was in use (nothing dialled).
"""

from __future__ import annotations

import argparse
import dataclasses
import signal
import sys
import threading
import time

from agent import log
from agent.cli import options as cliopts
from agent.cli import runtime
from dialplan import Config, ConfigError

NO_FREE_SLOT = 3
"""Exit code: every call slot of the machine was held, so nothing was dialled."""


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("dial", help="place a call that the agent runs (outbound)",
                              description=__doc__.splitlines()[0])
    cliopts.add_common(p)
    p.add_argument("uri", help="who to call: sip:user@host[:port]")
    p.add_argument("--profile", default="default", help="the agent's profile (default: default)")
    p.add_argument("--say-first", default="", metavar="TEXT",
                   help="said when the call is answered (default: the profile's greeting)")
    p.add_argument("--port", type=int, default=None,
                   help="local SIP port (default: [sip].port + 2, beside a running serve)")
    p.add_argument("--rtp-port", type=int, default=None,
                   help="first local RTP port (default: [sip].rtp_port + 200)")
    p.add_argument("--timeout", type=float, default=3600.0, metavar="S",
                   help="hang up after this long whatever happens (default: an hour)")
    p.set_defaults(func=run)


def outbound(config: Config, port: int | None, rtp_port: int | None, slot: int):
    """A server that places calls on a SIP port of its own, beside a ``serve`` on the config's.

    Its port is ``port`` or ``[sip].port + slot``, its RTP ports from ``rtp_port`` or
    ``[sip].rtp_port + 100 * slot``; it registers nowhere and routes no extension. SIGINT and
    SIGTERM set the returned event.

    Returns:
        (server, its call-log writer, the stop event); the caller stops and closes both.
    """
    from agent.server import Server  # imports pjsua2: only when dialling
    from agent.turn.runner import StageCache
    from db.writer import CallLogWriter
    from models.registry import ModelCache

    sip = dataclasses.replace(config.sip, port=port or config.sip.port + slot,
                              rtp_port=rtp_port or config.sip.rtp_port + 100 * slot,
                              registrar=dataclasses.replace(config.sip.registrar, uri=""))
    config = dataclasses.replace(config, sip=sip, dialplan={})
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    # Its events wait in the outbox for the delivery of a `serve` or `cluster` on this call log.
    writer = CallLogWriter(config.db, on_event=log.event, webhooks=config.webhooks)
    # Its calls take the machine's slots (the config's, as serve's worker does).
    server = Server(config, writer, stage_cache=StageCache(ModelCache(runtime.scheduler(config))))
    return server, writer, stop


def run(args: argparse.Namespace) -> int:
    config = cliopts.load(args)
    if args.profile not in config.profiles:
        raise ConfigError(f"--profile: unknown profile '{args.profile}' "
                          f"(defined: {', '.join(config.profiles)})")
    if not args.uri.startswith(("sip:", "sips:")):
        raise ConfigError(f"uri: {args.uri!r} is not a SIP URI (sip:user@host[:port])")
    from agent.sip.slots import NoFreeSlot

    profile = config.profiles[args.profile]
    server, writer, stop = outbound(config, args.port, args.rtp_port, slot=2)
    answered = False
    try:
        server.profiles.prepare(profile)
        server.sip.start()
        try:
            session = server.dial(args.uri, profile, args.say_first)
        except NoFreeSlot as e:
            log.event("dial-refused", uri=args.uri, reason="no-free-slot",
                      max_calls=server.slots.size, level=30)
            print(f"not dialled: {e}; try again when a call has ended", file=sys.stderr)
            return NO_FREE_SLOT
        deadline = time.monotonic() + args.timeout
        while not session.join(0) and not stop.is_set():
            server.step(0.1)
            if time.monotonic() > deadline:
                session.shutdown()
                deadline = float("inf")
        answered = session.codec != ""
        print(f"call {session.call_id}: {session.end_reason or 'ended'}, "
              f"{session.turns} turns" + ("" if answered else " (never answered)"))
    finally:
        server.stop()
        writer.close()
    return 0 if answered else 1
