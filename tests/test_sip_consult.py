"""Attended transfer with real sipp peers on 127.0.0.1 (issue 61).

``callagent serve`` (tiny.en + SmolLM2-135M, SQLite call log) answers a sipp caller
(``tests/sipp/uac_consult.xml``) that says a sentence, then presses 0 as SIP INFO (the keypad's
attended transfer to the front desk). The front desk is a sipp UAS
(``tests/sipp/uas_consult.xml``) that answers the agent's call to it and presses a key (RFC 2833
telephone-events as payload type 120, the agent's offer's, or SIP INFO). What is checked:

* accepted by key 1 (RFC 2833 telephone-events) with a caller that follows the REFER: the
  caller's Refer-To carries ``Replaces=`` the consult call's Call-ID, the caller's INVITE with
  that Replaces reaches the target, the transfer's row is ``ok``, the caller's call ends
  ``transferred``; the consult leg is a call row of its own (outbound, linked both ways);
* accepted by key 1 with a caller that answers the REFER 501 and then streams an 800 Hz tone:
  the agent bridges the two calls and the target hears the caller (the tone in the RTP to
  the target, read with tshark); the row is ``bridged``;
* declined by key 2 (SIP INFO), or a target that answers 486: the caller hears what happened
  and the offer of a message (the say events, and tiny.en on the caller's received RTP), the
  call goes on until the caller hangs up; the rows are ``declined`` and ``sip-486``.
Both DTMF methods reach the agent's pjsua2 (``onDtmfDigit``): RFC 2833 and SIP INFO.
"""

from __future__ import annotations

import struct
import subprocess
import urllib.parse
from pathlib import Path

import numpy as np
import pytest
from sipp.harness import start_agent

from models.audio import ASR_RATE, PHONE_RATE, resample, speech_runs, ulaw_decode, ulaw_encode
from testkit.agentproc import free_port
from testkit.wire import DTMF_PCAPS, Capture, scenario, sipp_argv, spoken_ulaw
from tests.waiting import wait_until

pytestmark = [pytest.mark.sip, pytest.mark.model, pytest.mark.tool, pytest.mark.slow,
              pytest.mark.needs("sipp", "tshark", "espeak-ng", "sox")]

SIPP = Path(__file__).resolve().parent / "sipp"
TARGET_PORT = free_port()
FRONT_DESK = f"sip:200@127.0.0.1:{TARGET_PORT}"
KEY_AFTER_MS = 7000
"""The caller presses 0 this long after the answer (its sentence has been answered by then)."""
TONE_HZ = 800.0
"""The caller's tone, once it has refused the REFER: what a bridged target must hear."""
PROFILE = f"""
[profiles.warm]
greeting = "Hello."
asr = {{ model = "tiny.en" }}
llm = {{ model = "smollm2-135m", max_tokens = 30, threads = 1 }}
tools = ["transfer", "take_message"]
keypad = {{ "0" = "transfer:front-desk" }}
consult_ring_s = 8
consult_answer_s = 15
# The caller of a failed transfer waits up to 30 s for a REFER, then stays on: silent all that
# time, and the call must go on until it hangs up (max_silence_s would end it first).
limits = {{ max_silence_s = 120 }}
[profiles.warm.directory.front-desk]
uri = "{FRONT_DESK}"
attended = true
description = "general questions"
"""


@pytest.fixture(scope="module")
def agent(tmp_path_factory):
    proc = start_agent(tmp_path_factory.mktemp("agent"), PROFILE, '"107" = "warm"', max_calls=2,
                       startup_s=600)
    yield proc
    assert proc.stop() == 0, proc.log_text()[-3000:]


@pytest.fixture(scope="module")
def caller_audio(tmp_path_factory) -> tuple[Path, Path]:
    """The caller's sentence, then silence, and the tone it streams once it refused a REFER."""
    tmp = tmp_path_factory.mktemp("caller")
    # Silence after the words: still RTP packets (a line that goes quiet is rtp_timeout_s's).
    speech = spoken_ulaw("Hello, I would like to renew my library card.", tmp / "speech.ulaw",
                         lead_s=1.0, tail_s=100.0)
    t = np.arange(10 * PHONE_RATE) / PHONE_RATE
    tone = (0.3 * 32767 * np.sin(2 * np.pi * TONE_HZ * t)).astype(np.int16)
    (tmp / "tone.ulaw").write_bytes(ulaw_encode(tone).tobytes())
    return speech, tmp / "tone.ulaw"


def retyped(src: Path, dst: Path, payload_type: int) -> Path:
    """sip-tester's telephone-event capture (payload type 101) with another payload type.

    The agent offers telephone-event as 120 (pjsua's), and a phone sends what the offer says.
    Each UDP checksum is zeroed (none, for IPv4): the payload changed under it.
    """
    data = bytearray(src.read_bytes())
    assert struct.unpack("<I", data[20:24])[0] == 1  # Ethernet frames
    off = 24
    while off + 16 <= len(data):
        incl = struct.unpack("<I", data[off + 8:off + 12])[0]
        ip = off + 16 + 14
        udp = ip + (data[ip] & 0x0F) * 4
        data[udp + 6:udp + 8] = b"\0\0"
        data[udp + 9] = (data[udp + 9] & 0x80) | payload_type
        off += 16 + incl
    dst.write_bytes(bytes(data))
    return dst


def key_xml(how: str, tmp: Path) -> str:
    """The target's key: ``2833:D`` (telephone-events, sip-tester's capture) or ``info:D``."""
    if not how:
        return ""
    method, digit = how.split(":")
    if method == "2833":
        pcap = retyped(DTMF_PCAPS / f"dtmf_2833_{digit}.pcap", tmp / f"key{digit}.pcap", 120)
        # Played in the background: the agent's BYE may come while it plays.
        return f'  <nop><action><exec play_pcap_audio="{pcap}"/></action></nop>'
    return f"""  <send retrans="500">
    <![CDATA[
      INFO [$agent_contact] SIP/2.0
      Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch]
      From: <sip:200@[local_ip]:[local_port]>;tag=[pid]SIPpTag01[call_number]
      To: [$agent_from]
      Call-ID: [call_id]
      CSeq: 1 INFO
      Max-Forwards: 70
      Content-Type: application/dtmf-relay
      Content-Length: [len]

      Signal={digit}
      Duration=160
    ]]>
  </send>
  <recv response="200"/>"""


def start_target(tmp: Path, code: int = 200, key: str = "", calls: int = 1,
                 media_port: int | None = None) -> tuple[subprocess.Popen, Path]:
    xml = scenario(SIPP / "uas_consult.xml", tmp / "target.xml", user="200", code=code,
                   reason="Busy Here", wait_ms=6000, key_xml=key_xml(key, tmp), bye_wait_ms=30000)
    log = tmp / "target.log"
    proc = subprocess.Popen(
        ["sipp", "-sf", str(xml), "-i", "127.0.0.1", "-mi", "127.0.0.1", "-p", str(TARGET_PORT),
         "-mp", str(media_port or free_port()), "-m", str(calls), "-nostdin", "-timeout", "90s",
         "-timeout_error", "-trace_logs", "-log_file", str(log), "-trace_err", "-error_file",
         str(tmp / "target.err")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return proc, log


def run_caller(tmp: Path, agent, audio: tuple[Path, Path], refer_code: int = 202,
               refer_wait_ms: int = 40000, stay_ms: int = 12000
               ) -> tuple[subprocess.CompletedProcess, Path]:
    xml = scenario(SIPP / "uac_consult.xml", tmp / "caller.xml", audio=audio[0], tone=audio[1],
                   key="0",
                   key_after_ms=KEY_AFTER_MS, refer_wait_ms=refer_wait_ms, refer_code=refer_code,
                   stay_ms=stay_ms, bye_wait_ms=5000)
    log = tmp / "caller.log"
    argv = sipp_argv(xml, "107", agent.port, free_port(), free_port(), timeout_s=90)
    argv += ["-trace_logs", "-log_file", str(log)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120), log


def logged(log: Path, name: str) -> list[str]:
    text = log.read_text(errors="replace") if log.exists() else ""
    return [ln.split(":", 1)[1].strip() for ln in text.splitlines() if ln.startswith(f"{name}:")]


def calls(agent) -> list[tuple]:
    """(id, direction, caller_uri, end_reason) of every call, oldest first."""
    return agent.query("SELECT id, direction, caller_uri, end_reason FROM calls "
                       "ORDER BY started_at")


def the_transfer(agent, call_id: str) -> tuple[str, str]:
    ((outcome, detail),) = agent.query("SELECT outcome, detail FROM tool_calls WHERE call_id = ? "
                                       "AND name = 'transfer'", call_id)
    return outcome, detail


def events(agent, call_id: str, kind: str) -> list[str]:
    return [d for (d,) in agent.query("SELECT detail FROM events WHERE call_id = ? AND kind = ? "
                                      "ORDER BY at", call_id, kind)]


def new_calls(agent, before: int, n: int = 2) -> list[tuple]:
    """The two calls of one attended transfer (the caller's, the leg's), once both ended."""
    assert wait_until(lambda: len([c for c in calls(agent)[before:] if c[3]]) >= n, timeout=30), \
        agent.log_text()[-3000:]
    return calls(agent)[before:]


def said(agent, call_id: str) -> list[str]:
    return [e["text"] for e in agent.events("say") if e.get("call") == call_id]


def dominant_hz(pcm: np.ndarray, rate: int = PHONE_RATE) -> float:
    spectrum = np.abs(np.fft.rfft(pcm * np.hanning(len(pcm))))
    return float(np.argmax(spectrum) * rate / len(pcm))


def check_leg(agent, caller: tuple, leg: tuple, outcome: str, answered: bool = True) -> str:
    """The caller's and the leg's rows name each other; the transfer's row has ``outcome``.

    A target that answered was told about the call: by the LLM's sentence or the template.
    """
    assert (caller[1], leg[1], leg[2]) == ("inbound", "outbound", FRONT_DESK)
    got, detail = the_transfer(agent, caller[0])
    assert got == outcome, detail
    assert detail.startswith(f"attended, consult call {leg[0]}: ")
    assert events(agent, caller[0], "consult") == [f"call {leg[0]} to front-desk ({FRONT_DESK})"]
    (link,) = events(agent, leg[0], "consult-for")
    assert link.startswith(f"call {caller[0]}: attended transfer")
    if answered:
        (summary,) = events(agent, leg[0], "summary")
        print(f"summary said to the target: {summary}")
        assert summary.startswith(("llm: ", "template: "))
    return detail


def test_accepted_by_key_1_the_caller_gets_the_refer_with_replaces(agent, caller_audio, tmp_path):
    before = len(calls(agent))
    media = free_port()
    target, target_log = start_target(tmp_path, key="2833:1", calls=2, media_port=media)
    with Capture(tmp_path / "rtp.pcap", agent.rtp_ports) as cap:
        res, log = run_caller(tmp_path, agent, caller_audio)
    assert res.returncode == 0, res.stdout[-1500:] + agent.log_text()[-3000:]
    assert target.wait(30) == 0, (tmp_path / "target.err").read_text(errors="replace")[-2000:]
    caller, leg = new_calls(agent, before)
    (refer_to,) = logged(log, "refer-to")
    (consult_call_id,) = logged(target_log, "consult-call-id")
    assert "Replaces=" in refer_to
    replaces = urllib.parse.unquote(refer_to.split("Replaces=", 1)[1].split("&")[0].rstrip(">"))
    assert replaces.startswith(consult_call_id + ";"), (replaces, consult_call_id)
    assert "to-tag=" in replaces and "from-tag=" in replaces
    (followed,) = logged(target_log, "replaces")  # the caller's INVITE reached the target
    assert urllib.parse.unquote(followed) == replaces
    assert logged(log, "ended") == ["agent-bye"]
    detail = check_leg(agent, caller, leg, "ok")
    assert events(agent, leg[0], "accepted") == ["key 1"]
    assert detail.endswith("REFER with Replaces: 200 OK")
    assert (caller[3], leg[3]) == ("transferred", "transferred")
    assert events(agent, leg[0], "dtmf") == ["1"]
    # On the wire: the caller heard the hold tone, the target the announcement.
    packets = cap.packets()
    to_caller = [p for p in packets if p.src_port in agent.rtp_ports and p.payload_type == 0
                 and p.dst_port != media]
    held = [p for p in to_caller if 0.005 < p.level < 0.05]
    assert len(held) > 25, "no soft hold tone reached the caller"
    print(f"hold tone: {len(held)} packets to the caller")


def test_a_caller_refusing_the_refer_is_bridged_to_the_target(agent, caller_audio, tmp_path):
    before = len(calls(agent))
    media = free_port()
    target, _ = start_target(tmp_path, key="2833:1", media_port=media)
    with Capture(tmp_path / "target.pcap", range(media, media + 2)) as cap:
        res, log = run_caller(tmp_path, agent, caller_audio, refer_code=501, stay_ms=14000)
    assert res.returncode == 0, res.stdout[-1500:] + agent.log_text()[-3000:]
    assert target.wait(30) == 0
    caller, leg = new_calls(agent, before)
    (refer_to,) = logged(log, "refer-to")
    assert "Replaces=" in refer_to
    detail = check_leg(agent, caller, leg, "bridged")
    assert "REFER with Replaces: 501" in detail and detail.endswith("the calls' audio bridged")
    assert (caller[3], leg[3]) == ("caller-bye", "caller-gone")
    # The target hears the caller: its RTP from the agent carries the caller's 800 Hz tone.
    to_target = [p for p in cap.packets() if p.dst_port == media and p.payload_type == 0]
    frames = [ulaw_decode(p.payload) / 32768.0 for p in to_target]
    heard = [f for f in frames if len(f) == 160 and np.sqrt(np.mean(f ** 2)) > 0.05]
    tonal = [f for f in heard if abs(dominant_hz(f) - TONE_HZ) < 60]
    print(f"to the target: {len(to_target)} packets, {len(tonal)} with the caller's tone")
    assert len(tonal) >= 100, (len(to_target), len(heard))  # 2 s of the caller's tone


@pytest.mark.parametrize(("code", "key", "outcome", "phrase"), [
    (200, "info:2", "declined", "Sorry, the front desk can't take your call right now."),
    (486, "", "sip-486", "Sorry, the front desk is busy right now."),
])
def test_declined_or_busy_the_caller_is_offered_a_message(agent, caller_audio, tmp_path, code,
                                                          key, outcome, phrase):
    before = len(calls(agent))
    media = free_port()
    target, _ = start_target(tmp_path, code=code, key=key, media_port=media)
    with Capture(tmp_path / "rtp.pcap", agent.rtp_ports) as cap:
        res, log = run_caller(tmp_path, agent, caller_audio, refer_wait_ms=30000,
                              stay_ms=8000)
    assert res.returncode == 0, res.stdout[-1500:] + agent.log_text()[-3000:]
    assert target.wait(30) == 0
    assert logged(log, "refer-to") == [] and logged(log, "ended") == ["caller-bye"]
    caller, leg = new_calls(agent, before)
    check_leg(agent, caller, leg, outcome, answered=code == 200)
    offer = f"{phrase} Would you like to leave a message?"
    assert offer in said(agent, caller[0])
    assert caller[3] == "caller-bye"  # the call went on until the caller hung up
    assert leg[3] == ("declined" if code == 200 else "unanswered-486")
    if key:
        assert events(agent, leg[0], "dtmf") == ["2"]
    # What the caller heard last: the offer, in tiny.en's words.
    to_caller = [p for p in cap.packets() if p.src_port in agent.rtp_ports and
                 p.payload_type == 0 and p.dst_port != media]
    text = transcribe(last_words(to_caller))
    print(f"the caller heard last: {text!r}")
    assert "message" in text.lower()


def last_words(packets: list) -> np.ndarray:
    """The last run of speech in the packets (louder than the hold tone), 8 kHz float."""
    runs = speech_runs([(p.at, p.level) for p in packets], threshold=0.045, min_gap_s=1.0)
    assert runs, "the caller heard no speech"
    start, end = runs[-1]
    return np.concatenate([ulaw_decode(p.payload) / 32768.0 for p in packets
                           if start - 0.2 <= p.at <= end + 0.2]).astype(np.float32)


def transcribe(pcm: np.ndarray) -> str:
    from dialplan.options import ASROptions
    from models.registry import ModelCache

    asr = ModelCache().asr(ASROptions(model="tiny.en"))
    return asr.transcribe(resample(pcm, PHONE_RATE, ASR_RATE)).text
