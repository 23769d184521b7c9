"""``callagent cluster``: kamailio on the public SIP port, N supervised agent workers behind it.

    callagent cluster --workers 2 [--config config.toml] [--port 5060] [--worker-port 5061]
                      [--metrics-port 9100] [--state-dir DIR] [--db URL]
    callagent cluster --write-kamailio DIR --listen udp:10.0.0.10:5060
                      --agent sip:10.0.0.11:5060 --agent sip:10.0.0.12:5060

Wiring only (config, ports, signals); :mod:`agent.cluster.cluster` runs it. The second form
runs nothing: it writes ``kamailio.cfg`` and ``dispatcher.list`` for a kamailio on its own host
in front of agents on others (``agent/cluster/deploy/``, README "Cluster").

kamailio screens callers with the config's ``sip.allow`` and ``sip.invite_rate`` and
authenticates them with its ``[sip.auth]`` (the passwords are read here, from the environment or
files, and written into kamailio.cfg, mode 0600); the workers check no credentials themselves.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from agent.cli import options as cliopts
from dialplan.config import console_token, sip_passwords, webhook_secrets


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("cluster", help="kamailio in front of N agent workers (N x 4 calls)",
                              description=__doc__.splitlines()[0])
    cliopts.add_common(p)
    p.add_argument("--workers", type=int, default=2, help="agent worker processes (default 2)")
    p.add_argument("--host", default=None, help="bind address of all (over [sip].host)")
    p.add_argument("--port", type=int, default=None,
                   help="kamailio's public SIP port (over [sip].port)")
    p.add_argument("--worker-port", type=int, default=None,
                   help="first worker SIP port (default: the public port + 1)")
    p.add_argument("--rtp-port", type=int, default=None,
                   help="first RTP port; worker i gets 100 from here + 100 (i-1)")
    p.add_argument("--metrics-port", type=int, default=None,
                   help="aggregated /metrics port, workers after it (over [sip].metrics_port)")
    p.add_argument("--state-dir", type=Path, default=None,
                   help="kamailio's config, pid file and ctl socket (default: a temp dir)")
    p.add_argument("--write-kamailio", type=Path, default=None, metavar="DIR",
                   help="only write kamailio.cfg + dispatcher.list for --agent hosts into DIR")
    p.add_argument("--listen", default=None,
                   help="with --write-kamailio: kamailio's socket, e.g. udp:10.0.0.10:5060")
    p.add_argument("--agent", action="append", default=[], metavar="SIP_URI",
                   help="with --write-kamailio: an agent's SIP address (repeat per agent)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.write_kamailio is not None:
        return _write_kamailio(args)
    from sqlalchemy.exc import OperationalError

    from agent import log
    from agent.cluster.cluster import Cluster, absolute_config, plan
    from agent.cluster.edge import screen_of
    from agent.cluster.kamailio import executable
    from agent.console.server import start_console
    from agent.webhooks import start_delivery
    from db.migrate import mask_url, upgrade

    config = cliopts.load(args)
    sip = config.sip
    host = args.host or sip.host
    public = args.port or sip.port
    metrics = sip.metrics_port if args.metrics_port is None else args.metrics_port
    workers = plan(args.workers, host, public, args.rtp_port or sip.rtp_port, metrics,
                   args.worker_port, metrics_host=sip.metrics_host)
    try:
        executable()
    except FileNotFoundError as e:
        print(f"callagent: {e}", file=sys.stderr)
        return 2
    # Migrate once here, not N times at once: N workers racing to create the schema of an
    # empty database would trip over each other's DDL. A database that is down is no reason
    # not to answer calls: the workers spool and migrate once it is back.
    try:
        upgrade(config.db.url)
    except OperationalError as e:
        log.event("calllog-unreachable", error=str(e.orig or e)[:300], level=30)

    # Read before anything starts: a missing password fails here, not in kamailio.
    screen = screen_of(sip, sip_passwords(sip.auth))
    secrets = webhook_secrets(config.webhooks)
    token = console_token(config.console)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    # One console for every worker: each sends its calls' live events to its socket.
    console = start_console(config.console, config.db.url, token)
    cluster = Cluster(workers, (host, public), absolute_config(args.config), config.db.url,
                      db_override=args.db, metrics_port=metrics, state_dir=args.state_dir,
                      log_level=args.log_level, metrics_host=sip.metrics_host,
                      screen=screen, live_socket=console.live_socket if console else None)
    log.event("cluster-config", db=mask_url(config.db.url), workers=len(workers),
              sip=",".join(f"{w.id}={w.sip_port}" for w in workers),
              rtp=",".join(f"{w.id}={w.rtp_port}" for w in workers),
              metrics=metrics or "off")
    # The workers' writers queue the webhooks' events; one delivery for all of them, here.
    delivery = start_delivery(config.webhooks, secrets, config.db.url)
    try:
        return cluster.run(stop)
    except RuntimeError as e:
        print(f"callagent: {e}", file=sys.stderr)
        return 1
    finally:
        if delivery is not None:
            delivery.close()
        if console is not None:
            console.close()


def _write_kamailio(args: argparse.Namespace) -> int:
    from agent.cluster.edge import address_list, screen_of
    from agent.cluster.kamailio import Destination, dispatcher_list, render_config, write_private
    from dialplan import ConfigError

    if not args.listen or not args.agent:
        raise ConfigError("--write-kamailio needs --listen and at least one --agent")
    for uri in args.agent:
        if not uri.startswith("sip:"):
            raise ConfigError(f"--agent: {uri!r} is not a SIP URI (sip:HOST:PORT)")
    out = args.write_kamailio
    out.mkdir(parents=True, exist_ok=True)
    dests = [Destination(f"w{i}", uri) for i, uri in enumerate(args.agent, start=1)]
    (out / "dispatcher.list").write_text(dispatcher_list(dests))
    sip = cliopts.load(args).sip
    screen = screen_of(sip, sip_passwords(sip.auth))  # on this (the front) host
    (out / "address.list").write_text(address_list(screen.allow))
    # For Debian's kamailio.service: it daemonizes (log to syslog, the journal) and gives
    # kamailio /run/kamailio for its ctl socket. The config may hold [sip.auth]'s passwords:
    # 0600, owned by the kamailio user the unit runs it as (when written as root).
    write_private(out / "kamailio.cfg", render_config(
        args.listen, Path("/run/kamailio"), out / "dispatcher.list", log_stderr=False,
        screen=screen, address_file=(out / "address.list").resolve()))
    print(f"wrote {out / 'kamailio.cfg'}, {out / 'dispatcher.list'} and "
          f"{out / 'address.list'} ({len(dests)} agents behind {args.listen}; callers from "
          f"{', '.join(screen.allow) or 'anywhere'}"
          f"{', authenticated' if screen.authenticates else ''})")
    return 0
