"""A bare SIP answering agent (no models) run as a child process by robustness tests.

``python tests/sipp/answer_agent.py PORT RTP_PORT SECONDS [CERT KEY TLS_PORT SRTP [GREETING]]``:
answers extension 101 with silence, refuses anything else with 404, prints ``ready`` once
listening and ``clean exit`` after stopping. A crash inside pjsua2 kills only this process, not
the test run. With a certificate it also listens for TLS on TLS_PORT, with ``sip.srtp = SRTP``;
with GREETING (raw 16-bit 8 kHz mono PCM) it says that, over and over, instead of silence, so a
capture has speech to look at.
"""

from __future__ import annotations

import queue
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from agent.sip.audiolink import AudioLink  # noqa: E402
from agent.sip.events import CallDisconnected, IncomingCall  # noqa: E402
from agent.sip.useragent import SipAgent  # noqa: E402
from dialplan.sip import SIPOptions, TLSOptions  # noqa: E402


def looped(pcm: bytes):
    """A frame source saying ``pcm`` again and again, 20 ms (320 bytes) a frame."""
    pos = [0]

    def frame() -> bytes:
        out = pcm[pos[0]:pos[0] + 320]
        pos[0] = pos[0] + 320 if len(out) == 320 else 0
        return out if len(out) == 320 else bytes(320)

    return frame


def main(port: int, rtp_port: int, seconds: float, *secure: str) -> None:
    events: queue.Queue = queue.Queue()
    options = SIPOptions(port=port, rtp_port=rtp_port)
    greeting = None
    if len(secure) == 5:
        greeting = Path(secure[4]).read_bytes()
        secure = secure[:4]
    if secure:
        cert, key, tls_port, srtp = secure
        options = SIPOptions(port=port, rtp_port=rtp_port, srtp=srtp,
                             tls=TLSOptions(cert, key, port=int(tls_port)))
    ua = SipAgent(options, events)
    ua.start()
    print("ready", flush=True)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            ev = events.get(timeout=0.1)
        except queue.Empty:
            continue
        if isinstance(ev, IncomingCall):
            if ev.extension == "101":
                source = looped(greeting) if greeting else (lambda: bytes(320))
                ua.answer(ev.key, 200, AudioLink(sink=lambda b: None, source=source))
                print("answered", ev.sip_call_id, flush=True)
            else:
                ua.reject(ev.key, 404)
        elif isinstance(ev, CallDisconnected):
            print("disconnected", ev.key, ev.status_code, flush=True)
    ua.stop()
    print("clean exit", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), *sys.argv[4:])
