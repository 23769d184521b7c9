"""``callagent cluster``: N supervised agent workers behind kamailio, one call log, one /metrics.

One pjsua2 process takes at most 4 calls (SIP.md), so more calls need more processes. The
cluster plans the ports (:func:`plan`), then runs, all as children of this one process:

* N workers, each a ``callagent serve --worker`` on its own SIP port (the public port + i),
  RTP range and ``/metrics`` port, under its own :class:`~agent.supervisor.Supervisor` (a
  thread here): a worker that dies is restarted and only its open calls are closed as
  ``lost``, with its id;
* kamailio (:mod:`agent.cluster.kamailio`) on the public SIP port, round-robin over the
  workers that answer its OPTIONS pings, failing over on 486/503/408; restarted if it dies.
  It screens callers (``sip.allow``, ``sip.invite_rate``, and ``[sip.auth]``'s digest
  credentials with one-time nonces: :mod:`agent.cluster.edge`), and the workers accept INVITEs
  from kamailio alone, without checking credentials again (:attr:`WorkerSpec.edge`);
* the aggregated ``/metrics`` (:mod:`agent.cluster.aggregate`) on ``sip.metrics_port`` of
  ``sip.metrics_host``.

Every worker writes the same call log (``[db].url``: SQLite in WAL mode on one machine,
PostgreSQL across machines), each call with its worker id and host. SIGTERM/SIGINT stop the
workers first (their calls get a BYE, routed through kamailio), then kamailio. Imports no pjsua2
and no models: like the supervisor, the cluster survives whatever a worker does.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from agent import log
from agent.cluster import aggregate
from agent.cluster.edge import EdgeScreen
from agent.cluster.kamailio import Destination, Kamailio
from agent.cluster.probe import wait_answering
from agent.supervisor import Supervisor
from dialplan import ConfigError

RTP_PORTS_PER_WORKER = 100
"""pjsua2's RTP port range per process (``agent.sip.useragent.RTP_PORT_RANGE``, not imported:
that module loads pjsua2)."""
KAMAILIO_START_S = 20.0
KAMAILIO_RESTART_S = 2.0


@dataclass(frozen=True)
class WorkerSpec:
    """One worker's identity and ports."""

    id: str
    host: str
    sip_port: int
    rtp_port: int
    metrics_port: int
    """0 = no /metrics."""
    metrics_host: str = "127.0.0.1"
    """Where the worker's /metrics listens (``sip.metrics_host``, from the config it loads)."""
    edge: str = ""
    """kamailio's address, the only source whose INVITEs the worker takes (``serve --allow``,
    its own rate limit and digest authentication off, ``--invite-rate 0 --no-auth``: every call
    comes from there, screened and authenticated by kamailio already); empty = the config's
    ``sip.allow``, ``sip.invite_rate`` and ``[sip.auth]``."""

    @property
    def uri(self) -> str:
        return f"sip:{self.host}:{self.sip_port}"

    @property
    def metrics_url(self) -> str:
        # A worker listening on every address is scraped on this machine's loopback.
        host = "127.0.0.1" if self.metrics_host in ("0.0.0.0", "::", "") else self.metrics_host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.metrics_port}/metrics"

    def argv(self, config: str | None, db_url: str | None, log_level: str,
             live_socket: str | None = None) -> list[str]:
        """The worker's command line: ``callagent serve --worker`` with this worker's ports.

        ``live_socket``: where the console takes its calls' live events (None: no console).
        """
        cmd = [sys.executable, "-m", "agent.cli.main", "--log-level", log_level, "serve"]
        if config:
            cmd += ["--config", config]
        if db_url:
            cmd += ["--db", db_url]
        if self.edge:
            cmd += ["--allow", self.edge, "--invite-rate", "0", "--no-auth"]
        if live_socket:
            cmd += ["--live-socket", live_socket]
        return cmd + ["--host", self.host, "--port", str(self.sip_port), "--rtp-port",
                      str(self.rtp_port), "--worker-id", self.id, "--metrics-port",
                      str(self.metrics_port), "--worker"]


def plan(workers: int, host: str, public_port: int, rtp_port: int, metrics_port: int = 0,
         worker_port: int | None = None, metrics_host: str = "127.0.0.1") -> list[WorkerSpec]:
    """Ports for ``workers`` workers, each checked once.

    SIP from ``worker_port`` (default: the public port + 1), RTP ranges of
    :data:`RTP_PORTS_PER_WORKER` from ``rtp_port``, /metrics on ``metrics_host`` from
    ``metrics_port + 1`` (none if ``metrics_port`` is 0).

    Raises:
        ConfigError: a count or port out of range, or two uses of one port; the message names
            the option.
    """
    if workers < 1:
        raise ConfigError(f"cluster --workers: at least 1, got {workers}")
    first = public_port + 1 if worker_port is None else worker_port
    specs = [WorkerSpec(id=f"w{i}", host=host, sip_port=first + i - 1,
                        rtp_port=rtp_port + (i - 1) * RTP_PORTS_PER_WORKER,
                        metrics_port=metrics_port + i if metrics_port else 0,
                        metrics_host=metrics_host, edge=edge_address(host))
             for i in range(1, workers + 1)]
    rtp_end = rtp_port + workers * RTP_PORTS_PER_WORKER
    if rtp_port < 1 or rtp_end > 65536:
        raise ConfigError(f"sip.rtp_port: {rtp_port}: {workers} workers need ports "
                          f"{rtp_port}-{rtp_end - 1}, beyond 1-65535")
    used: dict[int, str] = {}

    def claim(port: int, what: str) -> None:
        if not 1 <= port <= 65535:
            raise ConfigError(f"{what}: {port} is not a port (1-65535)")
        if port in used:
            raise ConfigError(f"{what}: port {port} is already the {used[port]}")
        if rtp_port <= port < rtp_end:
            raise ConfigError(f"{what}: port {port} is among the workers' RTP ports "
                              f"{rtp_port}-{rtp_end - 1} (sip.rtp_port)")
        used[port] = what

    claim(public_port, "sip.port (kamailio's)")
    if metrics_port:
        claim(metrics_port, "sip.metrics_port (the cluster's)")
    for w in specs:
        claim(w.sip_port, f"SIP port of worker {w.id} (--worker-port)")
        if metrics_port:
            claim(w.metrics_port, f"/metrics port of worker {w.id} (sip.metrics_port + i)")
    return specs


def edge_address(host: str) -> str:
    """Where kamailio's INVITEs reach workers on ``host`` from.

    ``host`` itself, or loopback when it listens on every address (kamailio then sends from
    there to a local worker).
    """
    return {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)


class Cluster:
    """The running cluster: workers under supervisors, kamailio, the aggregated /metrics.

    Args:
        workers: from :func:`plan`.
        public: kamailio's SIP socket, ``(host, port)``.
        config_path: the config file the workers load (None = built-in defaults).
        db_url: the call log; every worker writes it, and the supervisors close lost calls there.
        db_override: ``--db`` to hand on to the workers (None: they read the config / env).
        metrics_port: the aggregated /metrics port (0 = off).
        metrics_host: the address it listens on (``sip.metrics_host``).
        state_dir: kamailio's config, pid file and ctl socket; None = a temp dir removed at exit.
        log_level: the workers' log level.
        screen: who may call, checked by kamailio (the config's ``sip.allow``, ``invite_rate``,
            ``[sip.auth]`` with its passwords: :func:`~agent.cluster.edge.screen_of`); None:
            anyone, at any rate.
        live_socket: the console's socket every worker sends its live events to (None: none).
    """

    def __init__(self, workers: list[WorkerSpec], public: tuple[str, int],
                 config_path: str | None, db_url: str, db_override: str | None = None,
                 metrics_port: int = 0, state_dir: Path | None = None,
                 log_level: str = "INFO", metrics_host: str = "127.0.0.1",
                 screen: EdgeScreen | None = None, live_socket: str | None = None):
        self.workers = workers
        self.public = public
        self.db_url = db_url
        self.metrics_port = metrics_port
        self.metrics_host = metrics_host
        self._own_state = state_dir is None
        self.state_dir = Path(state_dir or tempfile.mkdtemp(prefix="callagent-cluster-"))
        self.supervisors = {
            w.id: Supervisor(w.argv(config_path, db_override, log_level, live_socket), db_url,
                             worker=w.id)
            for w in workers}
        self.kamailio = Kamailio(f"udp:{public[0]}:{public[1]}",
                                 [Destination(w.id, w.uri) for w in workers], self.state_dir,
                                 on_event=self._kamailio_event, screen=screen)
        self.up: set[str] = set()
        """Workers kamailio currently routes calls to (they answered its last ping)."""
        self.ready = threading.Event()
        """Set once kamailio answers and every worker has been up at once."""
        self._workers_stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._metrics_server = None

    @property
    def uri(self) -> str:
        return f"sip:{self.public[0]}:{self.public[1]}"

    def run(self, stop: threading.Event) -> int:
        """Run until ``stop`` is set; returns the exit status (0 after a clean stop)."""
        try:
            self._start()
            while not stop.wait(0.5):
                if not self.kamailio.alive():
                    self._restart_kamailio(stop)
            return 0
        finally:
            self._stop()

    def _start(self) -> None:
        log.event("cluster-starting", uri=self.uri, workers=len(self.workers),
                  state_dir=str(self.state_dir))
        for w in self.workers:
            sup = self.supervisors[w.id]
            t = threading.Thread(target=sup.run, args=(self._workers_stop,),
                                 name=f"supervise-{w.id}", daemon=True)
            t.start()
            self._threads.append(t)
        self.kamailio.start()
        if not wait_answering(*self.public, timeout=KAMAILIO_START_S):
            raise RuntimeError(f"kamailio did not answer on {self.uri} within "
                               f"{KAMAILIO_START_S:.0f} s (see its log lines above)")
        if self.metrics_port:
            endpoints = [aggregate.WorkerEndpoint(
                w.id, w.metrics_url, restarts=lambda s=self.supervisors[w.id]: s.restarts)
                for w in self.workers]
            collector = aggregate.ClusterCollector(endpoints, self.kamailio.alive)
            self._metrics_server = aggregate.serve(collector, self.metrics_host,
                                                    self.metrics_port)
        log.event("kamailio-answering", uri=self.uri)

    def _kamailio_event(self, name: str, fields: dict[str, str]) -> None:
        worker = fields.get("worker")
        if worker is None:
            return
        if name == "worker-up":
            self.up.add(worker)
            if not self.ready.is_set() and self.up == set(self.supervisors):
                self.ready.set()
                log.event("cluster-ready", uri=self.uri, workers=",".join(sorted(self.up)))
        elif name == "worker-down":
            self.up.discard(worker)

    def _restart_kamailio(self, stop: threading.Event) -> None:
        rc = self.kamailio.proc.returncode if self.kamailio.proc else None
        log.event("kamailio-died", rc=rc, restart_in_s=KAMAILIO_RESTART_S, level=40)
        if stop.wait(KAMAILIO_RESTART_S):
            return
        self.up.clear()  # a new kamailio starts with every worker down until it pings them
        self.kamailio.start()

    def _stop(self) -> None:
        log.event("cluster-stopping", workers=len(self.workers))
        # Workers first: the BYEs of their calls are routed through kamailio.
        self._workers_stop.set()
        for t in self._threads:
            t.join(40)
        self.kamailio.stop()
        if self._metrics_server is not None:
            self._metrics_server.shutdown()
        if self._own_state:
            shutil.rmtree(self.state_dir, ignore_errors=True)
        log.event("cluster-stopped", restarts=sum(s.restarts for s in self.supervisors.values()))


def absolute_config(path: str | None) -> str | None:
    """The config path the workers get: absolute, or None when the default file is absent."""
    if path is None or (path == "config.toml" and not os.path.exists(path)):
        return None
    return str(Path(path).resolve())
