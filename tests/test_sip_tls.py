"""Encrypted lines (issue 47): SIP over TLS and SRTP media, without models.

A bare answering agent (``tests/sipp/answer_agent.py``, a child process) listens on UDP and,
with a self-signed certificate made by one openssl command (the README's), on TLS, with
``sip.srtp = "mandatory"``. The caller is pjsua2's own (:func:`agent.sip.caller.call`, in this
process): over TLS with SRTP it is answered; without SRTP it is refused 488, as sipp's plain RTP
offer over UDP is. sipp (Debian's build) has no TLS, so it only plays the plain caller.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from sipp.harness import ROOT

from agent.sip.caller import call
from dialplan.sip import SIPOptions, TLSOptions
from testkit.agentproc import free_port
from testkit.wire import scenario, sipp

pytestmark = [pytest.mark.sip, pytest.mark.tool, pytest.mark.needs("sipp", "openssl",
                                                                    "espeak-ng")]


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    d = tmp_path_factory.mktemp("tls")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "365",
                    "-subj", "/CN=callagent", "-keyout", str(d / "key.pem"), "-out",
                    str(d / "cert.pem")], check=True, capture_output=True)
    return d / "cert.pem", d / "key.pem"


@pytest.fixture(scope="module")
def agent(certificate):
    port, tls_port = free_port(), free_port()
    cert, key = certificate
    child = subprocess.Popen(
        [sys.executable, str(ROOT / "tests/sipp/answer_agent.py"), str(port), str(free_port()),
         "60", str(cert), str(key), str(tls_port), "mandatory"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    for line in child.stdout:  # pjlib prints its start-up lines first
        if line.strip() == "ready":
            break
    assert child.poll() is None, "the agent did not start"
    yield port, tls_port
    child.terminate()
    child.wait(10)


@pytest.fixture(scope="module")
def speech(tmp_path_factory):
    wav = tmp_path_factory.mktemp("audio") / "hello.wav"
    subprocess.run(["espeak-ng", "-w", str(wav), "Hello, is this the library?"], check=True)
    return wav


def caller(certificate, srtp: str) -> SIPOptions:
    """The pjsua2 caller's own options: TLS (with a certificate of its own) and ``srtp``."""
    return SIPOptions(host="127.0.0.1", port=free_port(), rtp_port=free_port(), max_calls=1,
                      transport="tls", tls=TLSOptions(*map(str, certificate)), srtp=srtp)


def test_the_tls_port_presents_the_certificate(agent, certificate):
    _, tls_port = agent
    res = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{tls_port}"],
                         input="", capture_output=True, text=True, timeout=20)
    assert "CN = callagent" in res.stdout or "CN=callagent" in res.stdout, res.stdout[-1500:]
    assert "TLSv1.2" in res.stdout


def test_a_call_over_tls_with_srtp_is_answered(agent, certificate, speech):
    _, tls_port = agent
    result = call(f"sip:101@127.0.0.1:{tls_port};transport=tls", speech, lead_s=0.5,
                  after_s=1.0, timeout_s=30, options=caller(certificate, "mandatory"))
    assert result.connected and result.codec == "PCMU", (result.status_code, result.reason)
    assert result.heard_s > 1.0  # media flowed (SRTP both ways: neither side allows plain RTP)


def test_plain_rtp_is_refused_with_488_when_srtp_is_mandatory(agent, certificate, speech,
                                                                tmp_path):
    port, tls_port = agent
    plain = call(f"sip:101@127.0.0.1:{tls_port};transport=tls", speech, lead_s=0.5,
                 after_s=1.0, timeout_s=30, options=caller(certificate, "off"))
    assert (plain.connected, plain.status_code) == (False, 488), plain.reason
    time.sleep(0.2)
    xml = scenario("uac_reject", tmp_path / "r.xml", code=488)  # sipp: RTP/AVP over UDP
    res = sipp(xml, "101", port, free_port(), free_port(), timeout_s=15)
    assert res.returncode == 0, res.stdout[-1500:] + res.stderr[-1500:]
