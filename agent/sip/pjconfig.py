"""pjsua2 configuration from :class:`~dialplan.options.SIPOptions`: transports and the account.

Pure construction, run once by :class:`~agent.sip.useragent.SipAgent` on its ``sip`` thread
while it creates the library: which transports listen, and the account that answers (its
identity, registrar credentials and RTP ports). Kept out of the user agent so that module
stays about calls; with it and :mod:`agent.sip.callbacks`, the only pjsua2 importers.
"""

from __future__ import annotations

import pjsua2 as pj

from dialplan.options import SIPOptions

RTP_PORT_RANGE = 100
"""RTP (and RTCP) ports used from ``sip.rtp_port`` on: pjsua2 moves to fresh ports for later
calls, so captures and firewalls should allow this many."""

_KINDS = {"udp": ("udp",), "tcp": ("tcp",), "both": ("udp", "tcp")}


def create_transports(ep: pj.Endpoint, o: SIPOptions) -> list[int]:
    """Open ``sip.transport``'s listening transports on ``host:port``; their ids."""
    ids = []
    for kind in _KINDS[o.transport]:
        tcfg = pj.TransportConfig()
        tcfg.port = o.port
        tcfg.boundAddress = o.host
        tcfg.publicAddress = o.host
        ids.append(ep.transportCreate(
            pj.PJSIP_TRANSPORT_UDP if kind == "udp" else pj.PJSIP_TRANSPORT_TCP, tcfg))
    return ids


def account_config(o: SIPOptions, uri: str, transport_ids: list[int]) -> pj.AccountConfig:
    """The account: ``uri`` when listening directly, else registered with ``sip.registrar``."""
    acfg = pj.AccountConfig()
    acfg.mediaConfig.transportConfig.port = o.rtp_port
    acfg.mediaConfig.transportConfig.portRange = RTP_PORT_RANGE
    acfg.mediaConfig.transportConfig.boundAddress = o.host
    acfg.mediaConfig.transportConfig.publicAddress = o.host
    r = o.registrar
    if r.uri:
        host = r.uri.split(":", 1)[-1]
        acfg.idUri = f"sip:{r.username}@{host}"
        acfg.regConfig.registrarUri = r.uri
        cred = pj.AuthCredInfo("digest", r.realm, r.username, 0, r.password)
        acfg.sipConfig.authCreds.append(cred)
    else:
        acfg.idUri = uri
        acfg.regConfig.registrarUri = ""
    if len(transport_ids) == 1:
        # Bind the account to its one transport: with TCP alone, pjsua cannot build a Contact
        # for an incoming INVITE otherwise (500, PJSIP_EUNSUPTRANSPORT; seen with sipp -t t1).
        acfg.sipConfig.transportId = transport_ids[0]
    return acfg
