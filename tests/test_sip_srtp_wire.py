"""Encrypted media on the wire (issue 47): a capture of an SRTP call, next to a plain one.

Two bare answering agents (``tests/sipp/answer_agent.py``, no models) say a spoken greeting over
and over, both reached over TLS by pjsua2's own caller, which speaks a question: one with
``sip.srtp = "mandatory"``, one with it off. ``tshark`` captures each agent's RTP ports on
loopback, and the payloads of each direction are read as bytes: G.711 speech in the clear has
a byte entropy well under 8 bits and runs of μ-law silence (0xFF/0x7F) between words, while
SRTP (AES counter mode) payloads look like random bytes: near 8 bits a byte and no silence run
longer than chance gives. The plain call is the proof that the check tells the two apart.
"""

from __future__ import annotations

import math
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from sipp.harness import ROOT

from agent.sip.caller import call
from dialplan.sip import SIPOptions, TLSOptions
from testkit.agentproc import free_block, free_port
from testkit.wire import Capture, RtpPacket

pytestmark = [pytest.mark.sip, pytest.mark.tool,
              pytest.mark.needs("tshark", "openssl", "espeak-ng", "sox")]

ULAW_SILENCE = {0xFF, 0x7F}
"""μ-law bytes of a zero sample (either sign)."""
AGENT_PORTS = 20
"""RTP ports captured from each agent's first (one call uses the first two)."""


def entropy_bits(data: bytes) -> float:
    """Shannon entropy of ``data``'s byte values, bits per byte (8 = uniformly random)."""
    n = len(data)
    return -sum(k / n * math.log2(k / n) for k in Counter(data).values()) if n else 0.0


def longest_silence_run(payloads: list[bytes]) -> int:
    """The longest run of μ-law silence bytes inside any one payload."""
    best = 0
    for p in payloads:
        run = 0
        for b in p:
            run = run + 1 if b in ULAW_SILENCE else 0
            best = max(best, run)
    return best


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    d = tmp_path_factory.mktemp("tls")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "365",
                    "-subj", "/CN=callagent", "-keyout", str(d / "key.pem"), "-out",
                    str(d / "cert.pem")], check=True, capture_output=True)
    return d / "cert.pem", d / "key.pem"


def _say(text: str, out: Path, raw: bool) -> Path:
    wav = out.with_suffix(".wav")
    subprocess.run(["espeak-ng", "-w", str(wav), text], check=True)
    if not raw:
        return wav
    subprocess.run(["sox", str(wav), "-r", "8000", "-c", "1", "-b", "16", "-e", "signed-integer",
                    "-t", "raw", str(out)], check=True)
    return out


@pytest.fixture(scope="module")
def speech(tmp_path_factory):
    d = tmp_path_factory.mktemp("audio")
    greeting = _say("Thank you for calling the library. How can I help you today?",
                    d / "greeting.raw", raw=True)
    return greeting, _say("Hello, when do you open on Saturday?", d / "question.raw", raw=False)


def answering(certificate, greeting: Path, srtp: str):
    """Start an agent saying ``greeting``; returns (process, TLS port, its RTP ports)."""
    cert, key = certificate
    tls_port, rtp = free_port(), free_block(AGENT_PORTS)
    child = subprocess.Popen(
        [sys.executable, str(ROOT / "tests/sipp/answer_agent.py"), str(free_port()), str(rtp),
         "60", str(cert), str(key), str(tls_port), srtp, str(greeting)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    for line in child.stdout:  # pjlib prints its start-up lines first
        if line.strip() == "ready":
            break
    assert child.poll() is None, "the agent did not start"
    return child, tls_port, range(rtp, rtp + AGENT_PORTS)


def captured_call(certificate, speech, srtp: str, tmp: Path) -> dict[str, list[RtpPacket]]:
    """One call over TLS with ``srtp`` both ends; the RTP of each direction, from tshark."""
    greeting, question = speech
    child, tls_port, ports = answering(certificate, greeting, srtp)
    try:
        with Capture(tmp / f"{srtp}.pcap", ports) as cap:
            caller = SIPOptions(host="127.0.0.1", port=free_port(), rtp_port=free_port(),
                                max_calls=1, transport="tls",
                                tls=TLSOptions(*map(str, certificate)), srtp=srtp)
            result = call(f"sip:101@127.0.0.1:{tls_port};transport=tls", question, lead_s=1.0,
                          after_s=1.5, timeout_s=30, options=caller)
            assert result.connected, (result.status_code, result.reason)
    finally:
        child.terminate()
        child.wait(10)
    packets = cap.packets()
    return {"agent": [p for p in packets if p.src_port in ports],
            "caller": [p for p in packets if p.dst_port in ports]}


def test_srtp_payloads_look_random_and_plain_ones_are_g711(certificate, speech, tmp_path):
    figures = {}
    for srtp in ("mandatory", "off"):
        for side, packets in captured_call(certificate, speech, srtp, tmp_path).items():
            assert len(packets) >= 100, (srtp, side, len(packets))  # 2 s and more of 20 ms
            payloads = [p.payload for p in packets]
            figures[srtp, side] = (entropy_bits(b"".join(payloads)),
                                   longest_silence_run(payloads),
                                   {len(p) for p in payloads}, len(packets))
    for side in ("agent", "caller"):
        bits, run, sizes, _ = figures["mandatory", side]
        # A 160-byte G.711 frame plus SRTP's 10-byte authentication tag; bytes near uniform.
        assert sizes == {170}, sizes
        assert bits > 7.9, figures
        assert run < 8, figures  # 8 silence bytes in a row: 1 in 2^56 for random bytes
        plain_bits, plain_run, plain_sizes, _ = figures["off", side]
        assert plain_sizes == {160}
        assert plain_bits < 7.5, figures  # speech in μ-law is far from uniform
        assert plain_run >= 160, figures  # a whole frame of silence between words
    print("| call | direction | packets | entropy bits/byte | longest μ-law silence run |")
    print("|---|---|---|---|---|")
    for (srtp, side), (bits, run, _, n) in figures.items():
        print(f"| srtp {srtp} | {side} | {n} | {bits:.3f} | {run} |")
