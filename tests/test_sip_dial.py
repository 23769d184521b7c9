"""``callagent dial``: the agent places a call and runs it as it runs an answered one.

A sipp callee (``uas_answer.xml``) answers, speaks a question and hangs up; the agent says
its ``--say-first`` opening, answers the question, and logs the call as ``outbound``.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import pytest
from sipp.harness import ROOT

from agent.sip.useragent import RTP_PORT_RANGE
from models.audio import speech_runs
from testkit.agentproc import free_port
from testkit.samples import QUESTION
from testkit.wire import Capture, levels, scenario, split_calls, spoken_ulaw

pytestmark = [pytest.mark.sip, pytest.mark.model, pytest.mark.tool]

CONFIG = """
[db]
url = "sqlite:///{db}"
spool_dir = "{spool}"
[profiles.fast]
greeting = "Hello."
llm = {{ model = "smollm2-135m", max_tokens = 30, threads = 1 }}
asr = {{ model = "tiny.en" }}
"""


@pytest.mark.needs("sipp", "tshark", "espeak-ng", "sox")
def test_dial_calls_out_says_its_opening_and_answers_the_callee(tmp_path):
    db = tmp_path / "calls.db"
    config = tmp_path / "config.toml"
    config.write_text(CONFIG.format(db=db, spool=tmp_path / "spool"))
    callee_port, sip_port, rtp_port = free_port(), free_port(), 30000 + free_port() % 300 * 100
    audio = spoken_ulaw(QUESTION, tmp_path / "q.ulaw", lead_s=6.0, tail_s=12.0)
    xml = scenario("uas_answer", tmp_path / "callee.xml", user="alice", audio=audio,
                   hold_ms=20000)
    callee = subprocess.Popen(
        ["sipp", "-sf", str(xml), "-i", "127.0.0.1", "-mi", "127.0.0.1", "-p", str(callee_port),
         "-mp", str(free_port()), "-m", "1", "-nostdin", "-timeout", "180s", "-timeout_error",
         "-trace_logs", "-log_file", str(tmp_path / "callee.log")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    opening = "Hello, this is the library calling about your reserved book."
    with Capture(tmp_path / "call.pcap", range(rtp_port, rtp_port + RTP_PORT_RANGE)) as cap:
        res = subprocess.run(
            [sys.executable, "-m", "agent.cli.main", "dial", f"sip:alice@127.0.0.1:{callee_port}",
             "--config", str(config), "--profile", "fast", "--say-first", opening,
             "--port", str(sip_port), "--rtp-port", str(rtp_port), "--timeout", "120"],
            cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    assert callee.wait(30) == 0  # it got the INVITE for alice, and its BYE was answered
    with sqlite3.connect(db) as con:
        direction, reason, turns, caller = con.execute(
            "SELECT direction, end_reason, turns, caller_uri FROM calls").fetchone()
        reply = con.execute("SELECT reply_text FROM turns ORDER BY \"index\"").fetchall()
    assert (direction, reason) == ("outbound", "caller-bye")
    assert caller == f"sip:alice@127.0.0.1:{callee_port}"
    assert turns >= 1 and reply and reply[0][0]
    (call,) = split_calls(cap.packets(), range(rtp_port, rtp_port + RTP_PORT_RANGE)).values()
    t0 = min(call.agent[0].at, call.caller[0].at)  # the call's media began
    spoken = [(a - t0, b - t0) for a, b in speech_runs(levels(call.agent))]
    # The opening, before the callee spoke (6 s in), then the answer after.
    assert spoken and spoken[0][0] < 6.0 and any(a > 6.0 for a, _ in spoken), spoken
    assert "call " in res.stdout and "outbound" not in res.stderr
