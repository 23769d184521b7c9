"""agent.sip against sipp, without models: registration with digest auth, codec choice.

The SIP user agent runs in this test process (one pjsua2 endpoint at a time); sipp plays the
PBX (a registrar that challenges and verifies credentials) or a caller with a given offer.
"""

from __future__ import annotations

import queue
import shutil
import subprocess
import time

import pytest

from agent.audiolink import AudioLink
from agent.bench_call import free_port, scenario
from agent.sip import SipAgent
from agent.sip_events import IncomingCall, MediaActive, RegistrationChanged
from dialplan.options import RegistrarOptions, SIPOptions

pytestmark = [pytest.mark.sip, pytest.mark.skipif(
    shutil.which("sipp") is None, reason="sipp is needed (make setup installs it)")]


def next_event(events: queue.Queue, kind: type, timeout: float = 10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            ev = events.get(timeout=0.1)
        except queue.Empty:
            continue
        if isinstance(ev, kind):
            return ev
    raise AssertionError(f"no {kind.__name__} within {timeout} s")


def register(tmp_path, password: str) -> tuple[RegistrationChanged, int]:
    port = free_port()
    xml = scenario("uas_registrar", tmp_path / "reg.xml", user="100", password="s3cret")
    pbx = subprocess.Popen(["sipp", "-sf", str(xml), "-p", str(port), "-i", "127.0.0.1",
                            "-m", "1", "-nostdin", "-timeout", "20s", "-timeout_error"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    events: queue.Queue = queue.Queue()
    reg = RegistrarOptions(uri=f"sip:127.0.0.1:{port}", username="100", password=password)
    ua = SipAgent(SIPOptions(port=free_port(), rtp_port=free_port(), registrar=reg), events)
    ua.start()
    try:
        ev = next_event(events, RegistrationChanged)
    finally:
        ua.stop()
    return ev, pbx.wait(20)


def test_registers_with_digest_auth(tmp_path):
    ev, rc = register(tmp_path, "s3cret")
    assert (ev.status_code, ev.active) == (200, True)
    assert rc == 0  # the registrar saw a challenge answered with valid credentials


def test_wrong_password_is_refused_by_the_registrar(tmp_path):
    ev, _ = register(tmp_path, "wrong")
    assert (ev.status_code, ev.active) == (403, False)


@pytest.mark.parametrize(("pt", "rtpmap", "codec", "transport"), [
    (0, "PCMU/8000", "PCMU", "udp"), (8, "PCMA/8000", "PCMA", "udp"),
    (9, "G722/8000", "G722", "udp"), (0, "PCMU/8000", "PCMU", "tcp"),
    (0, "PCMU/8000", "PCMU", "both")])
def test_answers_the_offered_codec(tmp_path, pt, rtpmap, codec, transport):
    events: queue.Queue = queue.Queue()
    ua = SipAgent(SIPOptions(port=free_port(), rtp_port=free_port(), transport=transport),
                  events)
    ua.start()
    try:
        xml = scenario("uac_offer", tmp_path / "offer.xml", pt=pt, rtpmap=rtpmap)
        caller = subprocess.Popen(
            ["sipp", "-sf", str(xml), "-s", "1", f"127.0.0.1:{ua.options.port}", "-i",
             "127.0.0.1", "-mi", "127.0.0.1", "-p", str(free_port()), "-mp", str(free_port()),
             "-t", "u1" if transport == "udp" else "t1",
             "-m", "1", "-nostdin", "-timeout", "15s", "-timeout_error"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        call = next_event(events, IncomingCall)
        assert call.extension == "1"
        ua.answer(call.key, 200, AudioLink(sink=lambda b: None, source=lambda: bytes(320)))
        assert next_event(events, MediaActive).codec == codec
        assert caller.wait(20) == 0  # 200 OK's SDP answer chose the offered payload type
    finally:
        ua.stop()
