"""A transfer's call-log row with real sipp peers (issue 61): written at the REFER, closed always.

``callagent serve`` (tiny.en + SmolLM2, SQLite call log) answers sipp callers on 127.0.0.1 who
press 0, which the keypad maps to a transfer to the front desk. Every ending of the transfer is
read from the ``tool_calls`` table:

* the caller takes the REFER and drops the dialog (202, NOTIFY 100 Trying, then nothing, as some
  phones do: ``tests/sipp/uac_refer_drop.xml``): the call ends ``rtp-timeout`` and the row says
  ``caller-gone``, and ``callagent report --call`` shows it;
* the caller follows the REFER (``testkit/sipp/uac_refer.xml``) to a sipp target that
  answers 200 (``ok``) or 486 (``sip-486``, said to the caller);
* no final NOTIFY in 30 s: ``timeout``, said to the caller, and no idle prompt meanwhile;
* the agent's worker is killed mid-transfer: the supervisor closes the row ``lost``;
* the database is down for the whole call (another agent): the rows wait in the spool and
  reach the database, closed, once it is back.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from sipp.harness import ROOT, start_agent

from testkit.agentproc import free_port
from testkit.wire import scenario, sipp_argv
from tests.waiting import wait_until

pytestmark = [pytest.mark.sip, pytest.mark.model, pytest.mark.tool,
              pytest.mark.needs("sipp")]

DROP = ROOT / "tests" / "sipp" / "uac_refer_drop.xml"
TARGET_PORT = free_port()
FRONT_DESK = f"sip:200@127.0.0.1:{TARGET_PORT}"
RTP_TIMEOUT_S = 4
"""Extension 105's ``rtp_timeout_s``: how long after the caller's last packet the agent hangs up."""
PROFILE = """
greeting = "Hello."
asr = {{ model = "tiny.en" }}
llm = {{ model = "smollm2-135m", max_tokens = 20, threads = 1 }}
tools = ["transfer"]
directory = {{ front-desk = {{ uri = "{uri}", description = "general questions" }} }}
keypad = {{ "0" = "transfer:front-desk" }}
limits = {{ {limits} }}
"""
PROFILES = ("[profiles.xfer]" + PROFILE.format(uri=FRONT_DESK,
                                                limits=f"rtp_timeout_s = {RTP_TIMEOUT_S}")
            + "[profiles.xfer-slow]" + PROFILE.format(
                uri=FRONT_DESK, limits="rtp_timeout_s = 60, idle_prompt_s = 5"))
DIALPLAN = '"105" = "xfer"\n"106" = "xfer-slow"'


@pytest.fixture(scope="module")
def agent(tmp_path_factory):
    proc = start_agent(tmp_path_factory.mktemp("agent"), PROFILES, DIALPLAN, max_calls=2)
    yield proc
    assert proc.stop() == 0, proc.log_text()[-3000:]


def call(tmp: Path, agent, xml: Path, extension: str, timeout_s: float = 60):
    """Run a sipp caller to its end; its result and its log."""
    log = tmp / f"{xml.stem}.log"
    argv = sipp_argv(xml, extension, agent.port, free_port(), free_port(), timeout_s=timeout_s)
    argv += ["-trace_logs", "-log_file", str(log)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s + 20), log


def logged(log: Path, name: str) -> list[str]:
    text = log.read_text(errors="replace") if log.exists() else ""
    return [ln.split(":", 1)[1].strip() for ln in text.splitlines() if ln.startswith(f"{name}:")]


def target(tmp: Path, code: int, reason: str) -> subprocess.Popen:
    xml = scenario("uas_target", tmp / "target.xml", user="200", code=code, reason=reason)
    return subprocess.Popen(
        ["sipp", "-sf", str(xml), "-i", "127.0.0.1", "-mi", "127.0.0.1", "-p", str(TARGET_PORT),
         "-mp", str(free_port()), "-m", "1", "-nostdin", "-timeout", "60s", "-timeout_error"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def pressing_zero(tmp: Path, busy_hold_ms: int = 3000) -> Path:
    """uac_refer.xml with the caller pressing 0 instead of speaking (as test_sip_actions)."""
    xml = scenario("uac_refer", tmp / "caller.xml", audio="unused", refer_code=202,
                   refer_wait_ms=20000, bye_wait_ms=5000, busy_hold_ms=busy_hold_ms)
    text = xml.read_text().replace('<exec rtp_stream="unused,1,0"/>',
                                   '<exec play_pcap_audio="/usr/share/sip-tester/'
                                   'dtmf_2833_0.pcap"/>')
    xml.write_text(text.replace("[rtpstream_audio_port]", "[media_port]"))
    return xml


def last_call(agent, extension: str) -> str:
    return agent.query("SELECT id FROM calls WHERE called_extension = ? ORDER BY started_at DESC "
                       "LIMIT 1", extension)[0][0]


def ended(agent, call_id: str, timeout: float = 20) -> str:
    def reason() -> str:
        rows = agent.query("SELECT end_reason FROM calls WHERE id = ?", call_id)
        return rows[0][0] if rows else ""
    assert wait_until(reason, timeout=timeout), agent.log_text()[-2000:]
    return reason()


def transfer_rows(agent, call_id: str) -> list[tuple]:
    return agent.query("SELECT source, outcome, detail, latency_s, seq FROM tool_calls WHERE "
                       "call_id = ? AND name = 'transfer'", call_id)


def said(agent, call_id: str) -> list[str]:
    return [e["text"] for e in agent.events("say") if e.get("call") == call_id]


def test_a_caller_who_drops_after_the_refer_is_logged_caller_gone(agent, tmp_path):
    xml = scenario(DROP, tmp_path / "drop.xml", bye_wait_ms=20000)
    res, log = call(tmp_path, agent, xml, "105")
    assert res.returncode == 0, res.stdout[-1500:] + agent.log_text()[-2000:]
    (refer_to,) = logged(log, "refer-to")
    assert FRONT_DESK in refer_to
    assert logged(log, "ended") == ["agent-bye"]  # the agent hung up on the dead line
    call_id = last_call(agent, "105")
    assert ended(agent, call_id) == "rtp-timeout"
    ((source, outcome, detail, latency, seq),) = transfer_rows(agent, call_id)
    assert (source, outcome, seq) == ("keypad", "caller-gone", 1)
    assert detail.startswith("the call ended (rtp-timeout) ") and detail.endswith(
        "after the REFER, before its outcome; last: 100 Trying")
    # From the REFER to the agent's BYE: the line's RTP timeout less the announcement (the
    # key was the caller's last packet), give or take the poll of the timeout.
    assert 0.5 < latency < RTP_TIMEOUT_S + 1.0, latency
    print(f"caller-gone row: {latency:.2f} s after the REFER (rtp_timeout_s {RTP_TIMEOUT_S})")
    report = subprocess.run([sys.executable, "-m", "agent.cli.main", "report", "--db",
                             f"sqlite:///{agent.db}", "--call", call_id], capture_output=True,
                            text=True, cwd=ROOT, timeout=60)
    (line,) = [x for x in report.stdout.splitlines() if "tool transfer" in x]
    assert '{"target": "front-desk"} (keypad): caller-gone in' in line, report.stdout
    assert "the call ended (rtp-timeout)" in line


@pytest.mark.parametrize(("code", "reason", "outcome"), [(200, "OK", "ok"),
                                                          (486, "Busy Here", "sip-486")])
def test_a_transfer_the_target_answers_or_refuses(agent, tmp_path, code, reason, outcome):
    uas = target(tmp_path, code, reason)
    res, log = call(tmp_path, agent, pressing_zero(tmp_path), "106")
    assert res.returncode == 0, res.stdout[-1500:] + agent.log_text()[-2000:]
    assert uas.wait(30) == 0
    assert logged(log, "target") == [f"{code} {reason}"]
    call_id = last_call(agent, "106")
    assert ended(agent, call_id) == ("transferred" if code == 200 else "caller-bye")
    ((source, got, detail, latency, seq),) = transfer_rows(agent, call_id)
    assert (source, got, detail, seq) == ("keypad", outcome, f"{code} {reason}", 1)
    assert 0 < latency < 5
    refused = ["Sorry, the front desk is not available right now. Can I help you instead?"]
    assert said(agent, call_id) == ["Transferring you to the front desk now.", *(
        refused if code != 200 else [])]


def test_no_final_notify_is_a_timeout_and_no_idle_prompt_meanwhile(agent, tmp_path):
    # The caller takes the REFER and says nothing more for 36 s; the agent gives up at 30 s.
    xml = scenario(DROP, tmp_path / "drop.xml", bye_wait_ms=36000)
    res, log = call(tmp_path, agent, xml, "106", timeout_s=80)
    assert res.returncode == 0, res.stdout[-1500:] + agent.log_text()[-2000:]
    assert logged(log, "ended") == ["caller-bye"]
    call_id = last_call(agent, "106")
    assert ended(agent, call_id) == "caller-bye"
    ((source, outcome, detail, latency, seq),) = transfer_rows(agent, call_id)
    assert (source, outcome, detail) == ("keypad", "timeout",
                                         "no final NOTIFY in 30 s; last: 100 Trying")
    assert 30.0 <= latency < 31.5
    assert said(agent, call_id) == [
        "Transferring you to the front desk now.",
        "Sorry, the front desk is not available right now. Can I help you instead?"]
    # idle_prompt_s is 5 on this extension: waiting on a transfer is not the caller's silence.
    assert not [e for e in agent.events("idle-prompt") if e.get("call") == call_id]


def test_a_worker_killed_mid_transfer_leaves_the_row_lost(agent, tmp_path):
    readies = len(agent.events("ready"))
    pid = int(agent.events("worker-started")[-1]["pid"])
    xml = scenario(DROP, tmp_path / "drop.xml", bye_wait_ms=20000)
    # The caller's end is not this test's: the agent it called dies under it.
    caller = threading.Thread(target=call, args=(tmp_path, agent, xml, "106"), daemon=True)
    caller.start()
    assert wait_until(lambda: agent.query(
        "SELECT detail FROM tool_calls WHERE outcome = 'pending' AND detail = '100 Trying'"),
        timeout=30), agent.log_text()[-2000:]
    call_id = last_call(agent, "106")
    os.kill(pid, signal.SIGKILL)
    assert ended(agent, call_id, timeout=30) == "lost"
    ((source, outcome, detail, _, seq),) = transfer_rows(agent, call_id)
    assert (source, outcome, detail, seq) == ("keypad", "lost", "100 Trying", 1)
    assert wait_until(lambda: len(agent.events("ready")) > readies, timeout=180)
    caller.join(40)


@pytest.fixture(scope="module")
def agent_without_db(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("nodb")
    (tmp / "calls.db").mkdir()  # the database cannot be opened: every record is spooled
    proc = start_agent(tmp, "[profiles.xfer]" + PROFILE.format(
        uri=FRONT_DESK, limits=f"rtp_timeout_s = {RTP_TIMEOUT_S}"), '"105" = "xfer"')
    yield proc
    assert proc.stop() == 0, proc.log_text()[-3000:]


def test_with_the_database_down_the_row_waits_in_the_spool(agent_without_db, tmp_path):
    agent = agent_without_db
    res, _ = call(tmp_path, agent, scenario(DROP, tmp_path / "drop.xml", bye_wait_ms=20000),
                  "105")
    assert res.returncode == 0, res.stdout[-1500:] + agent.log_text()[-2000:]
    spool = agent.db.parent / "spool"

    def spooled() -> list[dict]:
        return [json.loads(x)["data"] for p in sorted(spool.glob("*.jsonl"))
                for x in p.read_text().splitlines() if '"ToolCallRecord"' in x]
    assert wait_until(lambda: any(d["outcome"] != "pending" for d in spooled()), timeout=20)
    # The REFER, its 202 (pjsua2 reports it as 100 "Accepted"), the NOTIFY, the end.
    assert [(d["seq"], d["outcome"], d["detail"]) for d in spooled()][:3] == [
        (1, "pending", "REFER sent"), (1, "pending", "100 Accepted"),
        (1, "pending", "100 Trying")]
    assert [(d["seq"], d["outcome"]) for d in spooled()][3:] == [(1, "caller-gone")]
    agent.db.rmdir()  # the database is back: the writer migrates it, then replays the spool

    def replayed() -> bool:
        try:
            return bool(agent.query("SELECT count(*) FROM calls WHERE ended_at IS NOT NULL")[0][0])
        except sqlite3.OperationalError:  # not migrated yet
            return False
    assert wait_until(replayed, timeout=30), agent.log_text()[-2000:]
    (call_id,) = [c for (c,) in agent.query("SELECT id FROM calls")]
    assert ended(agent, call_id) == "rtp-timeout"
    ((source, outcome, detail, _, seq),) = transfer_rows(agent, call_id)
    assert (source, outcome, seq) == ("keypad", "caller-gone", 1)
    assert detail.endswith("last: 100 Trying")
