"""A real sipp call to ``callagent serve`` whose profile asks for notes: stored and in call.ended.

The caller (espeak-ng through the line) gives a name, a reason and a number; after the BYE the
post-call job asks the profile's LLM (SmolLM2 here, llama-batch with its grammar) for the
summary and the three fields. The call row holds them, ``report --call`` prints them, and the
one ``call.ended`` event a real receiver on 127.0.0.1 gets (signed) carries them: it was held
until they were made. The small model's facts are not checked (``bench summary`` measures the
default model's); their shape is: a summary, and exactly the configured fields, each a string
or null.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from sipp.harness import start_agent
from webhook_receiver import Receiver

from testkit.agentproc import caller_media, free_port
from testkit.wire import scenario, sipp_argv, spoken_ulaw
from tests.waiting import wait_until

pytestmark = [pytest.mark.sip, pytest.mark.model, pytest.mark.tool, pytest.mark.server,
              pytest.mark.slow, pytest.mark.needs("sipp", "espeak-ng", "sox")]

SECRET = "notes-s3cret"
FIELDS = ("caller_name", "reason", "callback_number")
PROFILES = """
[profiles.notes]
greeting = "Hello, how can I help?"
asr = { model = "tiny.en" }
llm = { model = "smollm2-135m", max_tokens = 32, threads = 2 }
summary = true
extract = { caller_name = "the caller's name", reason = "why the caller called", \
callback_number = "the phone number the caller asked to be called back on" }
"""
SAID = ("Hello, my name is Maria Lopez. My card was charged twice. "
        "Please call me back on five five five, zero one four two.")
HOLD_S = 12.0


def test_a_finished_call_gets_its_notes_stored_and_sent_in_call_ended(tmp_path):
    audio = spoken_ulaw(SAID, tmp_path / "said.ulaw", lead_s=2.5, tail_s=HOLD_S)
    key = tmp_path / "hook.key"
    key.write_text(SECRET + "\n")
    receiver = Receiver(SECRET)
    hook = f'[[webhooks]]\nurl = "{receiver.url}"\nsecret = "file:{key}"\nbackoff_s = 1.0\n'
    agent = start_agent(tmp_path, PROFILES.replace("\\\n", "") + hook, '"101" = "notes"')
    try:
        with receiver:
            xml = scenario("uac_stream", tmp_path / "call.xml", audio=audio,
                           hold_ms=int(HOLD_S * 1000))
            sipp = subprocess.run(sipp_argv(xml, "101", agent.port, free_port(),
                                            caller_media(1, agent.rtp_ports)[0],
                                            timeout_s=HOLD_S + 40),
                                  capture_output=True, timeout=HOLD_S + 60)
            assert sipp.returncode == 0, sipp.stderr[-2000:]
            assert wait_until(lambda: agent.query("SELECT id FROM calls WHERE ended_at IS NOT "
                                                  "NULL"), timeout=20)
            ((cid,),) = agent.query("SELECT id FROM calls")

            def state() -> str | None:
                return agent.query("SELECT summary_state FROM calls")[0][0]

            assert wait_until(lambda: state() in ("done", "failed"), timeout=600), (
                state(), agent.log_text()[-3000:])

            def call_ended():
                return [r for r in receiver.accepted() if r.body["type"] == "call.ended"]

            assert wait_until(call_ended, timeout=30), agent.log_text()[-2000:]
    finally:
        assert agent.stop() == 0, agent.log_text()[-2000:]
    ((said,),) = agent.query("SELECT transcript FROM turns WHERE call_id = ? AND "
                             "turns.\"index\" = 0", cid)
    assert "maria" in said.lower()
    ((st, summary, extracted, detail, attempts, took),) = agent.query(
        "SELECT summary_state, summary, extracted, summary_detail, summary_attempts, summary_s "
        "FROM calls")
    assert st == "done", (detail, agent.log_text()[-3000:])
    assert summary.strip() and detail is None and attempts == 1 and took > 0
    fields = json.loads(extracted)
    assert tuple(fields) == FIELDS
    assert all(v is None or (isinstance(v, str) and v.strip()) for v in fields.values())
    # The one call.ended the receiver got, signed, carries what the call row holds.
    (ended,) = [r for r in receiver.accepted() if r.body["type"] == "call.ended"]
    assert ended.signed and ended.body["call_id"] == cid
    data = ended.body["data"]
    assert data["summary_state"] == "done" and data["summary"] == summary
    assert data["extracted"] == fields and data["end_reason"] == "caller-bye"
    started = [r for r in receiver.accepted() if r.body["type"] == "call.started"]
    assert started and started[0].at <= ended.at
    done = agent.events("summary-done")
    assert [e["call"] for e in done] == [cid]
    report = subprocess.run([sys.executable, "-m", "agent.cli.main", "report", "--call", cid,
                             "--db", f"sqlite:///{agent.db}"], capture_output=True, text=True,
                            timeout=60)
    assert report.returncode == 0, report.stderr
    out = " ".join(report.stdout.split())
    assert "Summary (" in out and " ".join(summary.split())[:40] in out
    assert "caller_name:" in out and "callback_number:" in out
    print(f"notes of a real call (smollm2): {took:.1f} s, {summary!r}, {fields}")
