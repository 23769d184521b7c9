"""The SIP user agent acts on a call (issue 45): blind transfer with REFER, and sending DTMF.

Real peers on 127.0.0.1, no models. The agent is ``tests/sipp/transfer_agent.py``, a child
process around :class:`~agent.sip.useragent.SipAgent` (a pjsua2 crash kills only it) that
answers with silence and prints its SIP events as JSON lines. The caller is a sipp UAC that
follows the REFER (``testkit/sipp/uac_refer.xml``): 202, NOTIFY, INVITE to the Refer-To
target, NOTIFY of the outcome. The target is a sipp UAS (``uas_target.xml``) that logs the
Request-URI and answers 200 or refuses. Digits the agent sends are read off the wire (tshark,
RFC 2833 telephone-event payloads).
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from agent.sip.events import SipError, TransferStatus
from agent.sip.useragent import RTP_PORT_RANGE, SipAgent
from dialplan.sip import SIPOptions
from testkit.agentproc import free_port
from testkit.wire import Capture, scenario, sipp_argv

pytestmark = pytest.mark.sip

ROOT = Path(__file__).resolve().parents[1]
AGENT = ROOT / "tests" / "sipp" / "transfer_agent.py"
STILL_UP_S = 0.5
"""transfer_agent.STILL_UP_S: it hangs up this long after a final 2xx."""
BUSY_HOLD_MS = 1500
"""The caller stays on the call this long after a failed transfer, then sends BYE."""
TELEPHONE_EVENTS = "0123456789*#ABCD"
"""RFC 4733 event codes 0-15."""


@dataclass
class Agent:
    """The child agent: its ports, and the events it printed (JSON lines) as dicts."""

    proc: subprocess.Popen
    port: int
    rtp_port: int
    lines: list[str] = field(default_factory=list)
    ready: threading.Event = field(default_factory=threading.Event)
    reader: threading.Thread | None = None

    def read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            if line.strip() == "ready":
                self.ready.set()

    def finish(self, timeout: float = 20) -> list[dict]:
        """Wait for the agent to exit cleanly; its events in order."""
        assert self.proc.wait(timeout) == 0, "\n".join(self.lines[-30:])
        self.reader.join(5)
        assert "clean exit" in self.lines, "\n".join(self.lines[-30:])
        return [json.loads(x) for x in self.lines if x.startswith("{")]

    @property
    def rtp_ports(self) -> range:
        return range(self.rtp_port, self.rtp_port + RTP_PORT_RANGE)


def start_agent(action: str, arg: str, seconds: float = 20) -> Agent:
    port, rtp_port = free_port(), free_port()
    proc = subprocess.Popen([sys.executable, str(AGENT), str(port), str(rtp_port), str(seconds),
                             action, arg], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, cwd=ROOT)
    agent = Agent(proc, port, rtp_port)
    agent.reader = threading.Thread(target=agent.read, daemon=True)
    agent.reader.start()
    assert agent.ready.wait(15), "\n".join(agent.lines)
    return agent


def start_target(tmp: Path, code: int, reason: str) -> tuple[subprocess.Popen, int, Path]:
    """The target UAS on a free port; returns it, its port and its log (Request-URI line)."""
    port = free_port()
    xml = scenario("uas_target", tmp / "target.xml", user="front-desk", code=code, reason=reason)
    log = tmp / "target.log"
    proc = subprocess.Popen(
        ["sipp", "-sf", str(xml), "-i", "127.0.0.1", "-mi", "127.0.0.1", "-p", str(port),
         "-mp", str(free_port()), "-m", "1", "-nostdin", "-timeout", "20s", "-timeout_error",
         "-trace_logs", "-log_file", str(log), "-trace_msg", "-message_file",
         str(tmp / "target.msg")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return proc, port, log


def call_agent(tmp: Path, agent: Agent, refer_code: int = 202,
               refer_wait_ms: int = 5000) -> tuple[subprocess.CompletedProcess, Path]:
    """Run the REFER-following caller to the end; returns its result and its log."""
    audio = tmp / "quiet.ulaw"
    audio.write_bytes(b"\xff" * 8000 * 10)  # μ-law silence, still RTP packets
    xml = scenario("uac_refer", tmp / "caller.xml", audio=audio, refer_code=refer_code,
                   refer_wait_ms=refer_wait_ms, bye_wait_ms=3000, busy_hold_ms=BUSY_HOLD_MS)
    log = tmp / "caller.log"
    argv = sipp_argv(xml, "101", agent.port, free_port(), free_port(), timeout_s=20)
    argv += ["-trace_logs", "-log_file", str(log), "-trace_msg", "-message_file",
             str(tmp / "caller.msg")]
    return subprocess.run(argv, capture_output=True, text=True, timeout=40), log


def logged(log: Path, name: str) -> list[str]:
    """Values of the scenario's ``<log message="NAME: VALUE"/>`` lines."""
    text = log.read_text(errors="replace") if log.exists() else ""
    return [line.split(":", 1)[1].strip() for line in text.splitlines()
            if line.startswith(f"{name}:")]


def of(events: list[dict], name: str) -> list[dict]:
    return [e for e in events if e["event"] == name]


def transfer_to_target(tmp: Path, code: int, reason: str
                       ) -> tuple[str, list[dict], Path, Path]:
    """A sipp caller transferred by the agent to a target answering ``code``.

    Returns the Refer-To URI, the agent's events, and the caller's and the target's logs.
    """
    target, target_port, target_log = start_target(tmp, code, reason)
    uri = f"sip:front-desk@127.0.0.1:{target_port}"
    agent = start_agent("transfer", uri)
    try:
        res, caller_log = call_agent(tmp, agent)
        assert res.returncode == 0, res.stdout[-1500:] + res.stderr[-1500:]
    finally:
        events = agent.finish()
        assert target.wait(20) == 0  # the INVITE's Request-URI passed its check_it
    return uri, events, caller_log, target_log


@pytest.mark.tool
@pytest.mark.needs("sipp")
def test_blind_transfer_reaches_the_target(tmp_path):
    uri, events, caller_log, target_log = transfer_to_target(tmp_path, 200, "OK")
    assert logged(caller_log, "refer-to") == [uri]
    assert logged(target_log, "request-uri") == [uri]
    assert logged(caller_log, "target") == ["200 OK"]
    statuses = of(events, "TransferStatus")
    assert [(s["code"], s["final"]) for s in statuses] == [(100, False), (100, False),
                                                            (200, True)]
    assert [s["reason"] for s in statuses] == ["Accepted", "Trying", "OK"]
    # pjsua2 left the call up after the final 2xx: the agent itself hung up STILL_UP_S later
    # (the caller received its BYE; the scenario would have sent its own otherwise).
    (ended,) = of(events, "CallDisconnected")
    assert ended["by_local"] and ended["at"] - statuses[-1]["at"] >= STILL_UP_S - 0.05
    assert not of(events, "SipError")


@pytest.mark.tool
@pytest.mark.needs("sipp")
def test_refused_transfer_leaves_the_call_up(tmp_path):
    uri, events, caller_log, target_log = transfer_to_target(tmp_path, 486, "Busy Here")
    assert logged(target_log, "request-uri") == [uri]
    assert logged(caller_log, "target") == ["486 Busy Here"]
    statuses = of(events, "TransferStatus")
    assert [(s["code"], s["final"]) for s in statuses][-1] == (486, True)
    assert [s for s in statuses if s["final"]] == statuses[-1:]
    # Still on the call: it ended with the caller's BYE, BUSY_HOLD_MS after the NOTIFY.
    (ended,) = of(events, "CallDisconnected")
    assert not ended["by_local"] and ended["status_code"] == 200
    assert ended["at"] - statuses[-1]["at"] >= BUSY_HOLD_MS / 1000 - 0.1


@pytest.mark.tool
@pytest.mark.needs("sipp")
def test_refer_refused_by_the_caller_ends_the_transfer(tmp_path):
    # Nobody listens at the Refer-To: the caller refuses the REFER before any INVITE.
    agent = start_agent("transfer", f"sip:front-desk@127.0.0.1:{free_port()}")
    try:
        res, caller_log = call_agent(tmp_path, agent, refer_code=403)
        assert res.returncode == 0, res.stdout[-1500:] + res.stderr[-1500:]
    finally:
        events = agent.finish()
    assert len(logged(caller_log, "refer-to")) == 1
    statuses = of(events, "TransferStatus")
    assert [(s["code"], s["reason"], s["final"]) for s in statuses] == [(403, "Refused", True)]
    (ended,) = of(events, "CallDisconnected")
    assert not ended["by_local"]  # the caller hung up BUSY_HOLD_MS later


@pytest.mark.tool
@pytest.mark.needs("sipp")
def test_transfer_to_a_bad_uri_sends_no_refer(tmp_path):
    agent = start_agent("transfer", "not a uri")
    try:
        res, caller_log = call_agent(tmp_path, agent, refer_wait_ms=2500)  # then the caller's BYE
        assert res.returncode == 0, res.stdout[-1500:] + res.stderr[-1500:]
    finally:
        events = agent.finish()
    assert logged(caller_log, "refer-to") == []
    statuses = of(events, "TransferStatus")
    assert [(s["code"], s["final"]) for s in statuses] == [(500, True)]
    assert "not a URI" in statuses[0]["reason"]


def test_commands_for_an_unknown_call_are_reported():
    events: queue.Queue = queue.Queue()
    ua = SipAgent(SIPOptions(port=free_port(), rtp_port=free_port()), events)
    ua.start()
    try:
        ua.transfer(7, "sip:front-desk@127.0.0.1:5999")
        ua.send_dtmf(8, "1")
        got = [events.get(timeout=5), events.get(timeout=5)]
    finally:
        ua.stop()
    (status,) = [e for e in got if isinstance(e, TransferStatus)]
    assert (status.key, status.code, status.reason, status.final) == (7, 500, "no such call", True)
    (error,) = [e for e in got if isinstance(e, SipError)]
    assert error.key == 8 and "no call 8" in error.detail


@pytest.mark.tool
@pytest.mark.needs("sipp", "tshark")
def test_send_dtmf_digits_reach_the_caller(tmp_path):
    agent = start_agent("dtmf", "12#")
    with Capture(tmp_path / "dtmf.pcap", agent.rtp_ports) as cap:
        res, _ = call_agent(tmp_path, agent, refer_wait_ms=2500)  # no REFER comes: BYE
    events = agent.finish()
    assert res.returncode == 0, res.stdout[-1500:] + res.stderr[-1500:]
    assert not of(events, "SipError")
    # RFC 4733 payloads from the agent: event code, end bit; each digit in several packets.
    sent = [p for p in cap.packets() if p.src_port in agent.rtp_ports and p.payload_type == 101]
    assert sent, "no telephone-event packets from the agent"
    digits, ended = [], []
    for p in sent:
        digit = TELEPHONE_EVENTS[p.payload[0]]
        if not digits or digits[-1] != digit:
            digits.append(digit)
            ended.append(False)
        ended[-1] |= bool(p.payload[1] & 0x80)
    assert digits == ["1", "2", "#"] and all(ended)
