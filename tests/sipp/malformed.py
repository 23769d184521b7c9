"""Malformed and hostile SIP requests for robustness tests (sent raw over UDP).

Modelled on what SIP.md reports crashed a pjsua2 agent once: duplicated headers after an
INVITE, bodies that are not SDP, codecs we do not have, broken start lines and binary junk.
"""

from __future__ import annotations

import itertools

_n = itertools.count()


def invite(port: int, ext: str = "999", extra: str = "", body: str | None = None,
           content_type: str = "application/sdp", call_id: str | None = None) -> str:
    """An INVITE to ``ext`` from 127.0.0.1:5999 with optional extra headers and body."""
    n = next(_n)
    sdp = body if body is not None else (
        "v=0\r\no=x 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n"
        "m=audio 42900 RTP/AVP 0\r\na=rtpmap:0 PCMU/8000\r\n")
    return (f"INVITE sip:{ext}@127.0.0.1:{port} SIP/2.0\r\n"
            f"Via: SIP/2.0/UDP 127.0.0.1:5999;branch=z9hG4bKfz{n}\r\n"
            f"From: <sip:f@127.0.0.1:5999>;tag=f{n}\r\nTo: <sip:{ext}@127.0.0.1>\r\n"
            f"Call-ID: {call_id or f'fuzz{n}@127.0.0.1'}\r\nCSeq: 1 INVITE\r\n"
            f"Contact: <sip:f@127.0.0.1:5999>\r\nMax-Forwards: 70\r\n{extra}"
            f"Content-Type: {content_type}\r\nContent-Length: {len(sdp)}\r\n\r\n{sdp}")


def messages(port: int) -> list[bytes]:
    """About twenty bad requests; the well-formed-enough INVITEs go to unknown extensions."""
    opus = ("v=0\r\no=x 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n"
            "m=audio 42900 RTP/AVP 111\r\na=rtpmap:111 opus/48000/2\r\n")
    texts = [
        invite(port, body="v=0\r\ngarbage\r\n"),
        invite(port, content_type="text/plain"),
        invite(port, body=opus),
        invite(port, extra="Via: SIP/2.0/UDP 127.0.0.1:5998;branch=z9hG4bKdup\r\n"
                           "CSeq: 1 INVITE\r\n"),
        invite(port, extra="From: <sip:g@127.0.0.1>;tag=2\r\nTo: <sip:x@127.0.0.1>\r\n"),
        invite(port, extra="Call-ID: second@x\r\n"),
        invite(port, extra="Content-Type: application/sdp\r\nContent-Length: 5\r\n"),
        invite(port, ext=""),
        invite(port, ext="%00%ff"),
        invite(port, ext="1" * 500),
        invite(port).replace("Content-Length: ", "Content-Length: 99999"),
        invite(port).replace("CSeq: 1 INVITE", "CSeq: abc INVITE"),
        invite(port).replace("SIP/2.0\r\n", "SIP/3.0\r\n", 1),
        f"INVITE sip:101@127.0.0.1:{port} SIP/2.0\r\n\r\n",
        "BYE sip:101@127.0.0.1 SIP/2.0\r\nCall-ID: nope\r\n\r\n",
        "GARBAGE\r\n\r\n",
    ]
    return [t.encode("latin-1") for t in texts] + [b"\x00\x01\x02" * 100]
