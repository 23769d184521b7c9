"""A bare SIP agent (no models) that answers one call and acts on it: transfer or DTMF.

``python tests/sipp/transfer_agent.py PORT RTP_PORT SECONDS ACTION ARG``, run as a child process
by ``tests/test_sip_transfer.py`` (a crash inside pjsua2 kills only this process):

* ``transfer URI``: ``SipAgent.transfer(key, URI)`` half a second after media is active; after a
  final 2xx it waits :data:`STILL_UP_S` (the call must still be up: pjsua2 does not hang up by
  itself), then hangs up, as the call session does;
* ``dtmf DIGITS``: ``SipAgent.send_dtmf(key, DIGITS)`` half a second after media is active.

It answers with silence, prints ``ready`` once listening, then one JSON line per SIP event
(``{"event": "TransferStatus", "code": 200, ...}``), and ``clean exit`` after stopping, once the
call is over (or after SECONDS).
"""

from __future__ import annotations

import dataclasses
import json
import queue
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from agent.sip.audiolink import AudioLink  # noqa: E402
from agent.sip.events import (  # noqa: E402
    CallDisconnected,
    IncomingCall,
    MediaActive,
    TransferStatus,
)
from agent.sip.useragent import SipAgent  # noqa: E402
from dialplan.sip import SIPOptions  # noqa: E402

ACT_AFTER_S = 0.5
"""From media active to the transfer or the digits."""
STILL_UP_S = 0.5
"""How long the call is left up after a final 2xx before this agent hangs up."""


def say(event) -> None:
    print(json.dumps({"event": type(event).__name__, **dataclasses.asdict(event)}), flush=True)


def main(port: int, rtp_port: int, seconds: float, action: str, arg: str) -> None:
    events: queue.Queue = queue.Queue()
    ua = SipAgent(SIPOptions(port=port, rtp_port=rtp_port), events)
    ua.start()
    print("ready", flush=True)
    end = time.monotonic() + seconds
    act_at = hang_up_at = None
    key = None
    while time.monotonic() < end:
        now = time.monotonic()
        if act_at is not None and now >= act_at:
            act_at = None
            (ua.transfer if action == "transfer" else ua.send_dtmf)(key, arg)
        if hang_up_at is not None and now >= hang_up_at:
            hang_up_at = None
            ua.hangup(key)
        try:
            ev = events.get(timeout=0.02)
        except queue.Empty:
            continue
        say(ev)
        if isinstance(ev, IncomingCall):
            key = ev.key
            ua.answer(key, 200, AudioLink(sink=lambda b: None, source=lambda: bytes(320)))
        elif isinstance(ev, MediaActive):
            act_at = time.monotonic() + ACT_AFTER_S
        elif isinstance(ev, TransferStatus) and ev.final and 200 <= ev.code < 300:
            hang_up_at = time.monotonic() + STILL_UP_S
        elif isinstance(ev, CallDisconnected):
            break
    ua.stop()
    print("clean exit", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5])
