"""A real ``callagent cluster`` for tests/test_cluster.py: start it, call it, read it.

:func:`start_cluster` writes a config (the light :data:`PROFILES`, admission control off, ports
from free blocks) and starts the cluster with :func:`testkit.agentproc.start_cluster`, the
bench's own start-up; :class:`ClusterProcess` reads its structured log lines, call log and
aggregated ``/metrics``; :func:`calls` places simultaneous sipp calls at kamailio's port with
the Record-Route-following scenario (:func:`routed`).
"""
from __future__ import annotations

import signal
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sipp.harness import parse_fields
from sqlalchemy import text

from agent.cluster import aggregate
from db.migrate import make_engine
from testkit import agentproc
from testkit.agentproc import free_block, free_port
from testkit.wire import ROUTED, scenario, sipp_argv

TOOLS = ("sipp", "tshark", "espeak-ng", "sox")
needs_kamailio = pytest.mark.needs("kamailio")  # missing: the test fails (tests/needs.py)
needs_tools = pytest.mark.needs(*TOOLS)


def real_cluster(fn):
    """Marks of a test that runs the real cluster (models, kamailio, sipp)."""
    for mark in (pytest.mark.sip, pytest.mark.server, pytest.mark.model, pytest.mark.tool,
                 needs_kamailio, needs_tools):
        fn = mark(fn)
    return fn


# Lighter than the SIP tests' profile: 2 workers share 2 cores (one thread per stage each, no
# end-of-turn model), and replies to the 4th caller of a worker can take 50 s there, so the
# silence limit must not hang up on a caller still waiting for the answer.
PROFILES = """
[profiles.fast]
greeting = "Hello."
asr = { model = "tiny.en", threads = 1, initial_prompt = "A caller phones the public library." }
llm = { model = "smollm2-135m", max_tokens = 24, threads = 1 }
tts = { threads = 1 }
audio = { end_of_turn = "off" }
limits = { max_silence_s = 120 }
"""


def samples(page: str) -> dict[tuple, float]:
    """``(sample name, worker[, other label values...]) -> value`` of a /metrics page."""
    out = {}
    for fam in text_string_to_metric_families(page):
        for s in fam.samples:
            rest = tuple(v for k, v in sorted(s.labels.items()) if k != "worker")
            out[(s.name, s.labels.get("worker"), *rest)] = s.value
    return out


@dataclass
class ClusterProcess:
    """A running ``callagent cluster`` and where its outputs are."""

    proc: subprocess.Popen
    port: int
    rtp_port: int
    metrics_port: int
    db_url: str
    log: Path

    @property
    def rtp_ports(self) -> range:
        return range(self.rtp_port, self.rtp_port + 200)

    def events(self, name: str, **match: str) -> list[dict[str, str]]:
        lines = self.log.read_text(errors="replace").splitlines()
        found = [parse_fields(ln) for ln in lines if f"event={name} " in ln + " "]
        return [f for f in found if all(f.get(k) == v for k, v in match.items())]

    def query(self, sql: str, **params) -> list[tuple]:
        engine = make_engine(self.db_url)
        try:
            with engine.connect() as conn:
                return [tuple(r) for r in conn.execute(text(sql), params)]
        finally:
            engine.dispose()

    def metrics(self) -> dict[tuple, float]:
        return samples(aggregate.fetch(f"http://127.0.0.1:{self.metrics_port}/metrics", 20))

    def stop(self, timeout: float = 90) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)


def start_cluster(tmp: Path, db_url: str, metrics: bool = True,
                  sip_extra: str = "") -> ClusterProcess:
    """Two workers behind kamailio on ``db_url``; returns once kamailio routes to both.

    ``sip_extra``: more ``[sip]`` keys, then its sub-tables (``allow``, ``[sip.auth]``...).
    """
    port = free_block(3)
    rtp = free_block(200)
    while rtp <= port + 2 and port < rtp + 200:
        # Each block is free when drawn, but the SIP ports may lie inside the RTP block (the
        # config refuses that overlap: seen once in the suite), so draw again.
        rtp = free_block(200)
    mport = 0
    while metrics and (not mport or rtp <= mport + 2 and mport < rtp + 200):
        # A free TCP block may lie inside the UDP block taken for RTP; the config rejects
        # that overlap (it did once in CI), so draw again.
        mport = free_block(3, socket.SOCK_STREAM)
    config = tmp / "config.toml"
    # Admission control off: only the 4-call cap refuses, so the spread is exactly 4 + 4.
    config.write_text(f"""
system_prompt = "You are the phone assistant of a public library. The library opens 10 am to \
4 pm on Saturday. Answer in one short spoken sentence."
[sip]
port = {port}
rtp_port = {rtp}
admit_max_wait_s = 0.0
metrics_port = {mport}
{sip_extra}
[db]
url = "{db_url}"
spool_dir = "{tmp / 'spool'}"
{PROFILES}
[dialplan]
"101" = "fast"
""")
    log = tmp / "cluster.log"
    proc = agentproc.start_cluster(config, log, workers=2)
    if proc is None:
        raise RuntimeError(f"cluster did not start:\n{log.read_text()[-4000:]}")
    return ClusterProcess(proc, port, rtp, mport, db_url, log)


def calls(cluster: ClusterProcess, xml: Path, n: int, timeout_s: float) -> subprocess.Popen:
    """Start sipp placing ``n`` simultaneous calls to the cluster's public port."""
    return subprocess.Popen(
        sipp_argv(xml, "101", cluster.port, free_port(),
                  free_block(4 * n, avoid=cluster.rtp_ports), calls=n,
                  concurrent=n, timeout_s=timeout_s),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def routed(tmp: Path, name: str, audio: Path, hold_ms: int) -> Path:
    """The Record-Route-following caller streaming ``audio``, hanging up after ``hold_ms``."""
    return scenario(ROUTED, tmp / f"{name}.xml", audio=audio, hold_ms=hold_ms)


def by_worker(cluster: ClusterProcess, where: str = "1 = 1", **params) -> dict[str, int]:
    """Calls per worker in the call log, of those matching ``where``."""
    return dict(cluster.query(f"SELECT worker, count(*) FROM calls WHERE {where} "
                              "GROUP BY worker", **params))
