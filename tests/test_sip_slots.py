"""``sip.max_calls`` is the machine's: ``serve``'s callers and a campaign's calls share its slots.

``serve`` (``max_calls = 2``, tiny.en + SmolLM2) and ``callagent campaign`` (its own process
and SIP port, the same config, concurrency 2) against a sipp callee that answers and stays
silent on the line until the agent says goodbye (``max_silence_s``). In order:

1. a caller to serve holds one slot; the campaign dials its first row and waits for the
   second (``campaign-waiting``, logged once; no attempt);
2. the caller's line dies (sipp SIGKILLed: no BYE, no RTP): serve ends the call on
   ``rtp_timeout_s`` and the freed slot lets the campaign dial its second row;
3. with the campaign's two calls up, a caller to serve gets 486 (``active=2``, ``here=0``);
4. once they have ended, a caller to serve is answered.
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time

import pytest
from sipp.harness import ROOT, parse_fields, start_agent
from test_sip_campaign import start_callee

from models.audio import PHONE_RATE
from testkit.agentproc import free_port
from testkit.wire import scenario, sipp, sipp_argv
from tests.waiting import wait_until

pytestmark = [pytest.mark.sip, pytest.mark.model, pytest.mark.tool, pytest.mark.slow]

SMALL = ('llm = { model = "smollm2-135m", max_tokens = 20, threads = 1 }\n'
         'asr = { model = "tiny.en" }')
PROFILES = f"""
[campaigns]
concurrency = 2
ring_timeout_s = 10
[profiles.in]
greeting = "Hello."
limits = {{ max_silence_s = 120.0, rtp_timeout_s = 2.0 }}
{SMALL}
[profiles.out]
greeting = "Hello {{name}}, this is a test call."
limits = {{ max_silence_s = 8.0, max_call_s = 40.0 }}
{SMALL}
"""


def silence(path, seconds: float):
    path.write_bytes(b"\xff" * int(PHONE_RATE * seconds))  # μ-law silence
    return path


def events(log, name: str) -> list[dict[str, str]]:
    text = log.read_text(errors="replace") if log.exists() else ""
    return [parse_fields(line) for line in text.splitlines() if f"event={name} " in line]


@pytest.mark.needs("sipp")
def test_a_campaigns_calls_and_serves_callers_share_max_calls(tmp_path):
    agent = start_agent(tmp_path, PROFILES, '"101" = "in"', max_calls=2)
    config = tmp_path / "config.toml"
    callee, callee_port = start_callee("answer", str(silence(tmp_path / "callee.ulaw", 30)),
                                       tmp_path)
    csv = tmp_path / "list.csv"
    csv.write_text("number,name\n" + "".join(f"sip:person{i}@127.0.0.1:{callee_port},P{i}\n"
                                             for i in range(2)))
    line_xml = scenario("uac_stream", tmp_path / "a.xml",
                        audio=silence(tmp_path / "a.ulaw", 120), hold_ms=120000)
    caller_a = subprocess.Popen(sipp_argv(line_xml, "101", agent.port, free_port(), free_port(),
                                          timeout_s=150),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    camp_log = tmp_path / "campaign.log"
    camp = None
    try:
        assert wait_until(lambda: agent.events("call-answered"), timeout=30), agent.log_text()
        sip_port = free_port()
        with open(camp_log, "w") as out:
            camp = subprocess.Popen(
                [sys.executable, "-m", "agent.cli.main", "campaign", str(csv), "--config",
                 str(config), "--profile", "out", "--port", str(sip_port), "--rtp-port",
                 str(30000 + sip_port % 200 * 100)], cwd=ROOT, stdout=out, stderr=out)
        # 1. One slot left: the first row is dialled, the second waits.
        assert wait_until(lambda: events(camp_log, "campaign-waiting"), timeout=300,
                          every=0.2), camp_log.read_text()[-3000:]
        t_wait = time.monotonic()
        time.sleep(3.0)  # still waiting: no second dial while the caller holds its slot
        assert len(events(camp_log, "campaign-dial")) == 1, camp_log.read_text()[-3000:]
        # 2. The caller's line dies: serve's rtp timeout ends it, its slot goes to the campaign.
        caller_a.send_signal(signal.SIGKILL)
        caller_a.wait(10)
        t_kill = time.monotonic()
        assert wait_until(lambda: len(events(camp_log, "campaign-dial")) == 2, timeout=30,
                          every=0.1), camp_log.read_text()[-3000:]
        t_second = time.monotonic()
        second = events(camp_log, "campaign-dial")[1]
        assert len(events(camp_log, "campaign-waiting")) == 1  # one line for the whole wait
        assert float(second["waited_s"]) >= 3.0
        assert agent.events("rtp-timeout"), agent.log_text()[-2000:]
        # 3. The campaign's two calls hold both slots: serve refuses a caller with 486.
        busy = scenario("uac_reject", tmp_path / "busy.xml", code=486)
        t0 = time.monotonic()
        res = sipp(busy, "101", agent.port, free_port(), free_port(), timeout_s=15)
        refused_s = time.monotonic() - t0
        assert res.returncode == 0, res.stdout[-1500:]
        rejected = agent.events("call-rejected")[-1]
        assert (rejected["code"], rejected["active"], rejected["here"]) == ("486", "2", "0")
        # 4. The campaign's calls end (the agent's goodbye); the next caller is answered.
        assert camp.wait(120) == 0, camp_log.read_text()[-3000:]
        t_done = time.monotonic()
        again = scenario("uac_stream", tmp_path / "again.xml",
                         audio=silence(tmp_path / "again.ulaw", 3), hold_ms=2000)
        res = sipp(again, "101", agent.port, free_port(), free_port(), timeout_s=30)
        assert res.returncode == 0, res.stdout[-1500:] + agent.log_text()[-2000:]
        assert len(agent.events("call-answered")) == 2
    finally:
        for proc in (caller_a, camp):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
        callee.send_signal(signal.SIGINT)
        try:
            callee.wait(10)
        except subprocess.TimeoutExpired:
            callee.kill()
        agent.stop()
    with sqlite3.connect(agent.db) as con:
        outcomes = con.execute("SELECT outcome, attempts FROM campaign_rows ORDER BY line"
                               ).fetchall()
        ends = dict(con.execute("SELECT direction, count(*) FROM calls GROUP BY direction"))
    assert outcomes == [("answered", 1), ("answered", 1)]  # waiting was no attempt
    assert ends == {"inbound": 2, "outbound": 2}  # the refused caller has no call row
    print(f"caller killed -> campaign's second dial {t_second - t_kill:.2f} s "
          f"(waited {second['waited_s']} s in all, {t_kill - t_wait:.1f} s watched); "
          f"486 answered in {refused_s:.2f} s; campaign done {t_done - t_second:.1f} s after")


@pytest.mark.needs("sipp")
def test_dial_with_every_slot_held_fails_and_dials_no_one(tmp_path):
    from agent.sip.slots import SlotSet

    config = tmp_path / "config.toml"
    config.write_text(f"""
[sip]
port = {free_port()}
max_calls = 2
[db]
url = "sqlite:///{tmp_path / 'calls.db'}"
spool_dir = "{tmp_path / 'spool'}"
[profiles.out]
{SMALL}
""")
    serve = SlotSet(tmp_path / "spool" / "slots", 2)  # two calls of another process, up
    held = [serve.take("in1"), serve.take("in2")]
    sipp_callee, port = start_callee("answer", str(silence(tmp_path / "callee.ulaw", 3)),
                                     tmp_path)
    try:
        sip_port = free_port()
        res = subprocess.run([sys.executable, "-m", "agent.cli.main", "dial",
                              f"sip:person@127.0.0.1:{port}", "--config", str(config),
                              "--profile", "out", "--port", str(sip_port), "--rtp-port",
                              str(30000 + sip_port % 200 * 100)],
                             cwd=ROOT, capture_output=True, text=True, timeout=300)
    finally:
        sipp_callee.send_signal(signal.SIGINT)
        sipp_callee.wait(10)
    assert res.returncode == 3, res.stdout + res.stderr[-3000:]
    assert ("not dialled: no free call slot: sip.max_calls = 2 (slots in "
            f"{tmp_path / 'spool' / 'slots'}) are all in use") in res.stderr
    assert "event=dial-refused" in res.stderr and "reason=no-free-slot" in res.stderr
    msgs = tmp_path / "answer.msg"  # every message the callee got (-trace_msg)
    assert "INVITE" not in (msgs.read_text() if msgs.exists() else "")  # nothing was dialled
    assert all(s.held for s in held)
