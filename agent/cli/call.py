"""``callagent call URI --play caller.wav [--record out.wav]``: a scripted test caller.

Wiring only; the caller is :mod:`agent.sip.caller` (pjsua2 via :mod:`agent.sip.useragent`).
"""

from __future__ import annotations

import argparse

from agent import log


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("call", help="call an agent, play a WAV, record the reply",
                              description=__doc__.splitlines()[0])
    p.add_argument("uri", help="sip:EXT@HOST:PORT")
    p.add_argument("--play", required=True, help="audio file to speak (any rate/encoding)")
    p.add_argument("--record", default=None, help="write what the agent said here (WAV)")
    p.add_argument("--lead", type=float, default=2.5,
                   help="seconds of silence before speaking (lets the greeting finish)")
    p.add_argument("--after", type=float, default=8.0,
                   help="seconds to keep listening after the file ends")
    p.add_argument("--port", type=int, default=5070, help="local SIP port of the caller")
    p.add_argument("--rtp-port", type=int, default=45000, help="first local RTP port")
    p.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"), default=None,
                   help="call over TLS (a URI ending ;transport=tls) with this PEM certificate "
                        "and key of the caller's own")
    p.add_argument("--srtp", choices=("off", "optional", "mandatory"), default="off",
                   help="encrypted media: offer SRTP (mandatory: only SRTP)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from agent.sip.caller import (
        call,  # imports pjsua2 through agent.sip.useragent: only when calling
    )
    from dialplan.sip import SIPOptions, TLSOptions

    tls = TLSOptions(*args.tls) if args.tls else TLSOptions()
    options = SIPOptions(host="127.0.0.1", port=args.port, rtp_port=args.rtp_port, max_calls=1,
                         transport="tls" if args.tls else "udp", tls=tls, srtp=args.srtp)
    result = call(args.uri, args.play, record=args.record, lead_s=args.lead,
                  after_s=args.after, options=options)
    log.event("call-result", result.sip_call_id or "-", connected=result.connected,
              codec=result.codec, status=result.status_code, reason=result.reason,
              heard_s=round(result.heard_s, 2), speech_s=round(result.speech_s, 2),
              record=args.record or "")
    print(f"connected={result.connected} codec={result.codec} status={result.status_code} "
          f"agent speech {result.speech_s:.1f} s of {result.heard_s:.1f} s heard")
    return 0 if result.connected else 1
