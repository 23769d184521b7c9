"""Run ``callagent serve`` as a subprocess for SIP tests, and read what it recorded.

The agent gets its own SIP port, RTP port range, temp SQLite call log and config.toml, so SIP
tests never touch a developer's agent on 5060. Wire helpers (sipp, tshark, pcap parsing) live in
:mod:`testkit.wire`, shared with the benchmark.
"""

from __future__ import annotations

import re
import signal
import sqlite3
import subprocess
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from agent.sip.useragent import RTP_PORT_RANGE
from testkit.agentproc import free_port, start_serve

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class AgentProcess:
    """A running ``callagent serve`` and where its outputs are."""

    proc: subprocess.Popen
    port: int
    rtp_port: int
    db: Path
    log: Path

    @property
    def rtp_ports(self) -> range:
        return range(self.rtp_port, self.rtp_port + RTP_PORT_RANGE)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def events(self, name: str) -> list[dict[str, str]]:
        """Structured log lines ``event=NAME`` as dicts of their key=value fields."""
        out = []
        for line in self.log_text().splitlines():
            if f"event={name} " in line or line.endswith(f"event={name}"):
                out.append(parse_fields(line))
        return out

    def query(self, sql: str, *params) -> list[tuple]:
        with sqlite3.connect(self.db) as con:
            return con.execute(sql, params).fetchall()

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM (once) and wait; returns the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)


_FIELD = re.compile(r'(\w[\w-]*)=("(?:[^"\\]|\\.)*"|\S*)')


def parse_fields(line: str) -> dict[str, str]:
    """``k=v k2="a b"`` -> dict (quotes removed); ``_t`` is the line's stamp (epoch seconds)."""
    fields = {k: (v[1:-1].replace('\\"', '"') if v.startswith('"') else v)
              for k, v in _FIELD.findall(line)}
    stamp = line[:23]  # logging's asctime, local time: 2026-11-22 11:40:40,289
    try:
        fields["_t"] = str(datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp())
    except ValueError:
        pass
    return fields


def start_agent(tmp: Path, profiles: str, dialplan: str, max_calls: int = 4,
                rtp_port: int | None = None, startup_s: float = 180,
                sip_extra: str = "") -> AgentProcess:
    """Write a config and start the agent; returns once it logged ``event=ready``."""
    port = free_port()
    rtp_port = rtp_port or 20000 + (port % 400) * 100
    db = tmp / "calls.db"
    config = tmp / "config.toml"
    config.write_text(f"""
system_prompt = "You are the phone assistant of a public library. The library opens 10 am to \
4 pm on Saturday. Answer in one short spoken sentence."
[sip]
port = {port}
rtp_port = {rtp_port}
max_calls = {max_calls}
{sip_extra}
[db]
url = "sqlite:///{db}"
spool_dir = "{tmp / 'spool'}"
media_dir = "{tmp / 'media'}"
{profiles}
[dialplan]
{dialplan}
""")
    log = tmp / "serve.log"
    proc = start_serve(config, log, startup_s)
    if proc is None:
        raise RuntimeError(f"agent did not start:\n{log.read_text()[-3000:]}")
    return AgentProcess(proc, port, rtp_port, db, log)
