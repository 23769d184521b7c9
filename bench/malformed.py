"""Malformed SIP requests a soak sends at the agent (the kind SIP.md saw crash a pjsua2 agent).

A copy of the minimum of the suite's own hostile-SIP test messages (runtime code never imports
``tests/``): bad SDP, an opus-only offer, duplicated headers, a huge request URI, a lying
Content-Length, a bare request line, a BYE for no call, garbage and binary bytes. The INVITEs
that parse go to an unknown extension, so none of them starts a real call.
"""

from __future__ import annotations

import random
import socket
import time

EXTENSION = "101"


def _invite(port: int, n: int, ext: str = "999", extra: str = "", body: str | None = None,
            content_type: str = "application/sdp") -> str:
    sdp = body if body is not None else (
        "v=0\r\no=x 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n"
        "m=audio 42900 RTP/AVP 0\r\na=rtpmap:0 PCMU/8000\r\n")
    return (f"INVITE sip:{ext}@127.0.0.1:{port} SIP/2.0\r\n"
            f"Via: SIP/2.0/UDP 127.0.0.1:5999;branch=z9hG4bKsoak{n}\r\n"
            f"From: <sip:f@127.0.0.1:5999>;tag=s{n}\r\nTo: <sip:{ext}@127.0.0.1>\r\n"
            f"Call-ID: soak{n}@127.0.0.1\r\nCSeq: 1 INVITE\r\n"
            f"Contact: <sip:f@127.0.0.1:5999>\r\nMax-Forwards: 70\r\n{extra}"
            f"Content-Type: {content_type}\r\nContent-Length: {len(sdp)}\r\n\r\n{sdp}")


def malformed(port: int, n: int) -> list[bytes]:
    """Bad requests; the well-formed-enough INVITEs go to an unknown extension."""
    opus = ("v=0\r\no=x 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n"
            "m=audio 42900 RTP/AVP 111\r\na=rtpmap:111 opus/48000/2\r\n")
    texts = [
        _invite(port, n, body="v=0\r\ngarbage\r\n"),
        _invite(port, n, body=opus),
        _invite(port, n, extra="Via: SIP/2.0/UDP 127.0.0.1:5998;branch=z9hG4bKdup\r\n"
                               "CSeq: 1 INVITE\r\n"),
        _invite(port, n, ext="1" * 500),
        _invite(port, n).replace("Content-Length: ", "Content-Length: 99999"),
        f"INVITE sip:{EXTENSION}@127.0.0.1:{port} SIP/2.0\r\n\r\n",
        "BYE sip:101@127.0.0.1 SIP/2.0\r\nCall-ID: nope\r\n\r\n",
        "GARBAGE\r\n\r\n",
    ]
    return [t.encode("latin-1") for t in texts] + [b"\x00\x01\x02" * 100]


def send_malformed(port: int, rng: random.Random, n: int, count: int) -> int:
    msgs = malformed(port, n)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for m in rng.sample(msgs, count):
            s.sendto(m, ("127.0.0.1", port))
            time.sleep(0.05)
    return count
