"""``callagent dial`` to a voicemail box, with answering-machine detection (``amd = true``).

A sipp callee (``tests/sipp/uas_voicemail.xml``) answers and plays a voicemail greeting made
here with espeak-ng, then a 1 kHz beep of 0.5 s, then silence, and waits for the agent's BYE.
The agent says nothing while it screens, leaves ``voicemail_message`` after the beep (measured
on the wire), hangs up, and the call log ends the call ``voicemail``.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import pytest
from sipp.harness import ROOT

from agent.sip.useragent import RTP_PORT_RANGE
from models.audio import PHONE_RATE, speech_runs
from testkit.agentproc import free_port
from testkit.wire import Capture, levels, scenario, split_calls

pytestmark = [pytest.mark.sip, pytest.mark.model, pytest.mark.tool]

GREETING = ("Hi, you've reached Sam. I can't take your call right now, please leave a message "
            "after the tone.")
MESSAGE = "Hello Sam, this is the library calling. Your reserved book is ready. Goodbye."
LEAD_S, BEEP_S, TAIL_S = 0.3, 0.5, 20.0

# The shipped amd_max_s (dialplan.profile.Profile.amd_max_s): the box's words, or its beep at
# the greeting's end, decide within it.
CONFIG = """
[db]
url = "sqlite:///{db}"
spool_dir = "{spool}"
[profiles.fast]
greeting = "Hello, this is the library."
amd = true
voicemail_message = "{message}"
llm = {{ model = "smollm2-135m", max_tokens = 30, threads = 1 }}
asr = {{ model = "tiny.en" }}
"""


def voicemail_greeting(tmp_path) -> tuple[str, float]:
    """The box's side of the call as raw 8 kHz μ-law (sipp rtp_stream), and where its beep ends.

    Speech, then the beep right after it, then ``TAIL_S`` of silence for the message.
    """
    speech, beep = tmp_path / "greeting.wav", tmp_path / "beep.wav"
    subprocess.run(["espeak-ng", "-v", "en-us", "-w", str(speech), GREETING], check=True)
    subprocess.run(["sox", "-n", "-r", str(PHONE_RATE), "-c", "1", "-b", "16", str(beep),
                    "synth", str(BEEP_S), "sine", "1000", "vol", "0.5"], check=True)
    out = tmp_path / "box.ulaw"
    subprocess.run(["sox", str(speech), "-r", str(PHONE_RATE), "-c", "1", "-b", "16",
                    str(tmp_path / "speech8k.wav")], check=True)
    subprocess.run(["sox", str(tmp_path / "speech8k.wav"), str(beep), "-e", "u-law", "-t", "raw",
                    str(out), "pad", str(LEAD_S), str(TAIL_S)], check=True)
    speech_s = float(subprocess.run(["soxi", "-D", str(tmp_path / "speech8k.wav")], check=True,
                                    capture_output=True, text=True).stdout)
    return str(out), LEAD_S + speech_s + BEEP_S


@pytest.mark.slow
@pytest.mark.needs("sipp", "tshark", "espeak-ng", "sox")
def test_dial_to_a_voicemail_box_leaves_the_message_after_the_beep(tmp_path):
    db = tmp_path / "calls.db"
    config = tmp_path / "config.toml"
    config.write_text(CONFIG.format(db=db, spool=tmp_path / "spool", message=MESSAGE))
    callee_port, sip_port, rtp_port = free_port(), free_port(), 30000 + free_port() % 300 * 100
    audio, beep_end_s = voicemail_greeting(tmp_path)
    xml = scenario(ROOT / "tests/sipp/uas_voicemail.xml", tmp_path / "callee.xml", user="sam",
                   audio=audio)
    # The box waits for the INVITE as long as dial may take to load its models on a busy
    # machine (over 90 s beside other jobs on 2 cores).
    callee = subprocess.Popen(
        ["sipp", "-sf", str(xml), "-i", "127.0.0.1", "-mi", "127.0.0.1", "-p", str(callee_port),
         "-mp", str(free_port()), "-m", "1", "-nostdin", "-timeout", "300s", "-timeout_error",
         "-trace_logs", "-log_file", str(tmp_path / "callee.log")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ports = range(rtp_port, rtp_port + RTP_PORT_RANGE)
    with Capture(tmp_path / "call.pcap", ports) as cap:
        res = subprocess.run(
            [sys.executable, "-m", "agent.cli.main", "dial", f"sip:sam@127.0.0.1:{callee_port}",
             "--config", str(config), "--profile", "fast", "--port", str(sip_port),
             "--rtp-port", str(rtp_port), "--timeout", "60"],
            cwd=ROOT, capture_output=True, text=True, timeout=360)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    assert callee.wait(30) == 0  # the box got the INVITE for sam, and the agent's BYE
    with sqlite3.connect(db) as con:
        direction, reason, turns = con.execute(
            "SELECT direction, end_reason, turns FROM calls").fetchone()
        events = dict(con.execute(
            "SELECT kind, detail FROM events WHERE kind IN ('amd', 'voicemail')").fetchall())
    assert (direction, reason, turns) == ("outbound", "voicemail", 0)
    assert events["amd"].startswith("machine"), events
    assert "after beep" in events["voicemail"], events
    (call,) = split_calls(cap.packets(), ports).values()
    t0 = call.caller[0].at  # the box's stream starts with the file
    box = [(a - t0, b - t0) for a, b in speech_runs(levels(call.caller))]
    spoken = [(a - t0, b - t0) for a, b in speech_runs(levels(call.agent))]
    # The beep is the box's last sound, where the file puts it (packet timing: within 0.2 s).
    assert box and abs(box[-1][1] - beep_end_s) < 0.2, (box, beep_end_s)
    # The agent's first words, the message, come after the tone and within 3 s of it; it was
    # silent while it screened (no greeting over the box's).
    assert spoken and beep_end_s < spoken[0][0] < beep_end_s + 3.0, (spoken, beep_end_s)
    print(f"amd: {events['amd']}; {events['voicemail']}; on the wire the beep ends at "
          f"{beep_end_s:.2f} s and the agent speaks at {spoken[0][0]:.2f} s")
