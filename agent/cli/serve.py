"""``callagent serve``: answer SIP calls with the agent until SIGINT/SIGTERM.

Wiring only (config, call log, :class:`~agent.server.Server`, signals); the logic lives in
:mod:`agent.server` and :mod:`agent.call.session`.

Supervision: the SIP stack runs native code that can crash the process (SIP.md; issue 11). So
``serve`` runs the server as a worker child process under :class:`~agent.supervisor.Supervisor`,
which restarts it within seconds and closes the calls it left open as ``lost`` with the signal.
``--worker`` runs the server in this process (what the supervisor starts). On start the
call-log writer also marks calls any dead process left open as ``lost``. With ``[[webhooks]]``
the worker's call-log writer queues their events and the supervisor delivers them
(:mod:`agent.webhooks`); with ``[telemetry] otlp_endpoint`` the worker exports a trace per call
(:mod:`agent.telemetry`).

With ``[console] enabled`` the supervisor serves the web console (:mod:`agent.console`) and
hands the worker ``--live-socket``, where its calls' live events go.

``--worker-id`` (set by ``callagent cluster``) records the id on each call and log line and
limits that closing to this worker's calls; ``--metrics-port`` (or ``sip.metrics_port``) serves
Prometheus ``/metrics`` (:mod:`agent.cluster.metrics`). ``--allow``, ``--invite-rate`` and
``--no-auth`` are how the cluster makes its workers accept kamailio alone, which screens and
authenticates callers at the edge.
"""

from __future__ import annotations

import argparse
import dataclasses
import faulthandler
import logging
import signal
import threading

from agent import log
from agent.cli import options as cliopts
from agent.cli import runtime
from dialplan import Config, ConfigError


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("serve", help="answer SIP calls (default 127.0.0.1:5060)",
                              description=__doc__.splitlines()[0])
    cliopts.add_common(p)
    p.add_argument("--host", default=None, help="bind address (over [sip].host)")
    p.add_argument("--port", type=int, default=None, help="SIP port (over [sip].port)")
    p.add_argument("--worker", action="store_true",
                   help="run the server in this process, unsupervised (the supervisor's child)")
    p.add_argument("--rtp-port", type=int, default=None, help="first RTP port (over "
                   "[sip].rtp_port)")
    p.add_argument("--worker-id", default=None, metavar="ID",
                   help="this agent's id in a cluster: recorded on its calls and log lines")
    p.add_argument("--metrics-port", type=int, default=None, metavar="PORT",
                   help="serve Prometheus /metrics on this port (over [sip].metrics_port; 0 off)")
    p.add_argument("--allow", action="append", default=None, metavar="CIDR",
                   help="only callers from here (repeat; over [sip].allow): a cluster's workers "
                        "get kamailio's address")
    p.add_argument("--invite-rate", type=float, default=None, metavar="PER_S",
                   help="INVITEs per second per source (over [sip].invite_rate; 0 = no limit)")
    p.add_argument("--no-auth", action="store_true",
                   help="no digest authentication here (over [sip.auth]): a cluster's workers, "
                        "whose kamailio authenticates callers")
    p.add_argument("--live-socket", default=None, metavar="PATH",
                   help="send the calls' live events to the console there (set by serve and "
                        "cluster when [console] is on)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if not args.worker:
        return _supervise(args)
    from agent.server import Server  # imports pjsua2: only when serving
    from agent.turn.runner import StageCache
    from db.migrate import mask_url
    from db.writer import CallLogWriter
    from models.registry import ModelCache

    config = _config(args)
    sip = config.sip
    if args.worker_id:
        _tag_log_lines(args.worker_id)

    # A fatal signal (SIGSEGV in pjsip or a binding) prints every thread's Python stack to the
    # log before the process dies; `kill -USR1 PID` prints them on demand.
    faulthandler.enable(all_threads=True)
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())

    writer = CallLogWriter(config.db, worker=args.worker_id, on_event=log.event,
                           webhooks=config.webhooks)
    scheduler = runtime.scheduler(config)  # every model's jobs, and the metrics' queue
    metrics = metrics_http = feed = None
    call_log = writer
    if sip.metrics_port:
        from agent.cluster.metrics import WorkerMetrics

        metrics = WorkerMetrics(scheduler)
        call_log = metrics.tee(writer)
    if args.live_socket:
        from agent.console.feed import LiveFeed, LiveTee

        feed = LiveFeed(args.live_socket, args.worker_id)
        call_log = LiveTee(call_log, feed)
    traces = None
    if config.telemetry.otlp_endpoint:
        from agent.telemetry import CallTraces

        call_log = traces = CallTraces(config.telemetry, call_log)
    stages = StageCache(ModelCache(scheduler))
    server = Server(config, call_log, stage_cache=stages, worker=args.worker_id,
                    live=feed.publish if feed else None)
    try:
        if metrics is not None:
            metrics.track_calls(lambda: len(server.sessions))
            metrics_http = metrics.serve(sip.metrics_host, sip.metrics_port)
        server.start()
        log.event("ready", uri=server.sip.uri, db=mask_url(config.db.url))
        server.run(stop)
    finally:
        server.stop()
        stages.close()  # the MCP servers' sessions (their processes end)
        if traces is not None:
            traces.close()  # the last calls' spans exported
        writer.close()
        if feed is not None:
            feed.close()
        if metrics_http is not None:
            metrics_http.shutdown()
    return 0


def _config(args: argparse.Namespace) -> Config:
    """The config with the command line's SIP overrides, checked."""
    config = cliopts.load(args)
    sip = config.sip
    if args.host:
        sip = dataclasses.replace(sip, host=args.host)
    if args.port:
        sip = dataclasses.replace(sip, port=args.port)
    if args.rtp_port:
        sip = dataclasses.replace(sip, rtp_port=args.rtp_port)
    if args.metrics_port is not None:
        sip = dataclasses.replace(sip, metrics_port=args.metrics_port)
    try:
        if args.allow:
            sip = dataclasses.replace(sip, allow=tuple(args.allow))
        if args.invite_rate is not None:
            sip = dataclasses.replace(sip, invite_rate=args.invite_rate)
        if args.no_auth:  # no users = off; their passwords are then not read either
            sip = dataclasses.replace(sip, auth=dataclasses.replace(sip.auth, users={}))
    except ValueError as e:  # SIPOptions checks them as it does the file's
        raise ConfigError(f"sip.{e}") from None
    if not 0 <= sip.metrics_port <= 65535:
        raise ConfigError(f"sip.metrics_port: {sip.metrics_port} is not a port (0 = off)")
    return dataclasses.replace(config, sip=sip)


def _tag_log_lines(worker_id: str) -> None:
    """Put ``worker=ID`` on every log line: a cluster's workers share one log."""
    for handler in log.logger.handlers:
        handler.setFormatter(logging.Formatter(
            f"%(asctime)s %(levelname)s worker={worker_id} %(message)s"))


def _supervise(args: argparse.Namespace) -> int:
    from agent.console.server import start_console
    from agent.supervisor import Supervisor, worker_argv
    from agent.webhooks import start_delivery
    from dialplan.config import console_token, webhook_secrets

    config = _config(args)  # a bad option fails here, not in a worker restarted forever
    if config.telemetry.otlp_endpoint:
        from agent.telemetry import require

        require()  # and so does a missing package
    # Here, not in the worker: a receiver that is down or slow costs the calls nothing, and a
    # worker that dies takes no delivery with it. A missing secret fails the start.
    secrets = webhook_secrets(config.webhooks)
    token = console_token(config.console)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    # Here too, so the console outlives a worker that crashes, and sees the calls of the next.
    console = start_console(config.console, config.db.url, token)
    argv = worker_argv(args.argv) + (["--live-socket", console.live_socket] if console else [])
    delivery = start_delivery(config.webhooks, secrets, config.db.url)
    try:
        return Supervisor(argv, config.db.url, worker=args.worker_id).run(stop)
    finally:
        if delivery is not None:
            delivery.close()
        if console is not None:
            console.close()
